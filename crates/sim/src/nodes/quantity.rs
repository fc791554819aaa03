//! Resource quantities (`500m`, `2`, `1.5Gi`) and what pods request of them.

use std::collections::BTreeMap;

use serde_json::Value;

/// A quantity in thousandths of its unit (millicores for CPU, millibytes for memory), so that
/// every Kubernetes quantity is an integer.
pub type Milli = i128;

/// Parses a Kubernetes quantity; `None` if it is not one.
pub fn parse(text: &str) -> Option<Milli> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let negative = whole.starts_with('-');
    let whole: i128 = whole.trim_start_matches(['+', '-']).parse().unwrap_or(0);
    if number.is_empty() || fraction.len() > 9 || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let fraction_value: i128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let scale: i128 = 10i128.pow(u32::try_from(fraction.len()).ok()?);
    let (multiplier, divisor): (i128, i128) = match suffix {
        "" => (1000, 1),
        "m" => (1, 1),
        "k" => (1000 * 1000, 1),
        "M" => (1000 * 1_000_000, 1),
        "G" => (1000 * 1_000_000_000, 1),
        "T" => (1000 * 1_000_000_000_000, 1),
        "P" => (1000 * 1_000_000_000_000_000, 1),
        "Ki" => (1000 * 1024, 1),
        "Mi" => (1000 * 1024 * 1024, 1),
        "Gi" => (1000 * 1024 * 1024 * 1024, 1),
        "Ti" => (1000 * 1024 * 1024 * 1024 * 1024, 1),
        "Pi" => (1000 * 1024 * 1024 * 1024 * 1024 * 1024, 1),
        "n" => (1, 1_000_000),
        "u" => (1, 1000),
        _ => return None,
    };
    let value = (whole * scale + fraction_value) * multiplier / scale / divisor;
    Some(if negative { -value } else { value })
}

/// Reads a quantity that may be a JSON string or number.
pub fn parse_value(value: &Value) -> Option<Milli> {
    match value {
        Value::String(text) => parse(text),
        Value::Number(number) => parse(&number.to_string()),
        _ => None,
    }
}

/// What a pod requests: the sum over its containers (a container's limit stands in for a
/// missing request, as the API server defaults it), at least the largest init container,
/// plus one `pods` slot.
pub fn pod_requests(pod: &Value) -> BTreeMap<String, Milli> {
    let container_requests = |container: &Value| {
        let mut requests: BTreeMap<String, Milli> = BTreeMap::new();
        for source in ["limits", "requests"] {
            for (name, value) in container["resources"][source]
                .as_object()
                .into_iter()
                .flatten()
            {
                if let Some(amount) = parse_value(value) {
                    requests.insert(name.clone(), amount);
                }
            }
        }
        requests
    };
    let mut total: BTreeMap<String, Milli> = BTreeMap::new();
    for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
        for (name, amount) in container_requests(container) {
            *total.entry(name).or_default() += amount;
        }
    }
    for container in pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for (name, amount) in container_requests(container) {
            let entry = total.entry(name).or_default();
            *entry = (*entry).max(amount);
        }
    }
    *total.entry("pods".into()).or_default() += 1000;
    total
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn quantities_parse_to_thousandths() {
        let cases = [
            ("1", Some(1000)),
            ("500m", Some(500)),
            ("0.5", Some(500)),
            ("2Ki", Some(2048 * 1000)),
            ("1Gi", Some(1024 * 1024 * 1024 * 1000)),
            ("1.5G", Some(1_500_000_000 * 1000)),
            ("8", Some(8000)),
            ("abc", None),
            ("1Qi", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), expected, "{text}");
        }
    }

    #[test]
    fn pods_request_the_sum_of_containers_with_limits_as_default_requests() {
        let pod = json!({"spec": {
            "containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "2"}, "requests": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}}]
        }});
        let requests = pod_requests(&pod);
        assert_eq!(requests["nvidia.com/gpu"], 2000);
        assert_eq!(
            requests["cpu"], 4000,
            "the init container needs more than the sum"
        );
        assert_eq!(requests["memory"], 1024 * 1024 * 1024 * 1000);
        assert_eq!(requests["pods"], 1000);
    }
}
