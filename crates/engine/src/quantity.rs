//! Sums of resource quantities (`500m`, `16Gi`, `2`), for the resources a gang of pods
//! requests together.
//!
//! Quantities are held in thousandths of a unit: the finest a Kubernetes scheduler counts
//! (values below a thousandth, `n` and `u`, round up to one, as the API server rounds them).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Resource amounts in thousandths of a unit, by resource name.
pub type Amounts = BTreeMap<String, i128>;

/// `text` in thousandths of a unit, or `None` when it is not a quantity.
pub fn parse(text: &str) -> Option<i128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (integer, fraction) = number.split_once('.').unwrap_or((number, ""));
    let negative = integer.starts_with('-');
    let integer = integer.trim_start_matches(['+', '-']);
    if integer.is_empty() && fraction.is_empty()
        || !integer
            .chars()
            .chain(fraction.chars())
            .all(|c| c.is_ascii_digit())
        || fraction.len() > 9
    {
        return None;
    }
    // The number in billionths, then scaled by the suffix.
    let whole: i128 = if integer.is_empty() {
        0
    } else {
        integer.parse().ok()?
    };
    let billionths =
        whole.checked_mul(1_000_000_000)? + format!("{fraction:0<9}").parse::<i128>().ok()?;
    let (multiplier, divisor): (i128, i128) = match suffix {
        "n" => (1, 1_000_000_000),
        "u" => (1, 1_000_000),
        "m" => (1, 1_000),
        "" => (1, 1),
        "k" => (1_000, 1),
        "M" => (1_000_000, 1),
        "G" => (1_000_000_000, 1),
        "T" => (1_000_000_000_000, 1),
        "P" => (1_000_000_000_000_000, 1),
        "E" => (1_000_000_000_000_000_000, 1),
        "Ki" => (1 << 10, 1),
        "Mi" => (1 << 20, 1),
        "Gi" => (1 << 30, 1),
        "Ti" => (1 << 40, 1),
        "Pi" => (1 << 50, 1),
        "Ei" => (1 << 60, 1),
        exponent => {
            let power: u32 = exponent.strip_prefix(['e', 'E'])?.parse().ok()?;
            (10_i128.checked_pow(power)?, 1)
        }
    };
    // Billionths × multiplier / divisor, in thousandths, rounded up.
    let scaled = billionths.checked_mul(multiplier)?;
    let per_thousandth = 1_000_000 * divisor;
    let thousandths = (scaled + per_thousandth - 1) / per_thousandth;
    Some(if negative { -thousandths } else { thousandths })
}

/// `thousandths` as a quantity: `1500m`, `4`, or with a binary suffix for large whole values
/// that have one (`64Gi`).
pub fn format(thousandths: i128) -> Quantity {
    if thousandths % 1_000 != 0 {
        return Quantity(format!("{thousandths}m"));
    }
    let units = thousandths / 1_000;
    let binary = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20)]
        .into_iter()
        .find(|(_, shift)| units != 0 && units % (1_i128 << shift) == 0);
    Quantity(match binary {
        Some((suffix, shift)) => format!("{}{suffix}", units >> shift),
        None => units.to_string(),
    })
}

/// What a container asks the scheduler for: its requests, and its limits for the resources
/// it requests nothing of (Kubernetes defaults a missing request to the limit).
fn container_requests(container: &Container) -> Amounts {
    let Some(resources) = &container.resources else {
        return Amounts::new();
    };
    let mut amounts = Amounts::new();
    for source in [&resources.limits, &resources.requests]
        .into_iter()
        .flatten()
    {
        for (name, quantity) in source {
            if let Some(amount) = parse(&quantity.0) {
                amounts.insert(name.clone(), amount);
            }
        }
    }
    amounts
}

/// What a pod with `spec` asks the scheduler for, as kube-scheduler counts it: the sum over
/// its containers, or the largest init container when that is more, plus its overhead.
/// Quantities that do not parse count as nothing (the API server rejects such a pod anyway).
pub fn pod_requests(spec: &PodSpec) -> Amounts {
    let mut total = Amounts::new();
    for container in &spec.containers {
        add(&mut total, &container_requests(container), 1);
    }
    for init in spec.init_containers.iter().flatten() {
        for (name, amount) in container_requests(init) {
            let current = total.entry(name).or_default();
            *current = (*current).max(amount);
        }
    }
    for (name, quantity) in spec.overhead.iter().flatten() {
        if let Some(amount) = parse(&quantity.0) {
            *total.entry(name.clone()).or_default() += amount;
        }
    }
    total
}

/// Adds `times` × `amounts` to `total`.
pub fn add(total: &mut Amounts, amounts: &Amounts, times: u32) {
    for (name, amount) in amounts {
        *total.entry(name.clone()).or_default() += amount * i128::from(times);
    }
}

/// `amounts` as quantities.
pub fn quantities(amounts: &Amounts) -> BTreeMap<String, Quantity> {
    amounts
        .iter()
        .map(|(name, amount)| (name.clone(), format(*amount)))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parses_the_forms_kubernetes_accepts() {
        let cases = [
            ("1", Some(1_000)),
            ("500m", Some(500)),
            ("0.5", Some(500)),
            (".5", Some(500)),
            ("1.5Gi", Some(1_610_612_736_000)),
            ("16Gi", Some(17_179_869_184_000)),
            ("2k", Some(2_000_000)),
            ("1e3", Some(1_000_000)),
            ("1E2", Some(100_000)),
            ("100n", Some(1)),
            ("1u", Some(1)),
            ("-2", Some(-2_000)),
            ("", None),
            ("abc", None),
            ("1.2.3", None),
            ("5X", None),
            ("1Qi", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), expected, "{text:?}");
        }
    }

    #[test]
    fn formats_sums_readably_and_reparses_them_exactly() {
        let cases = [
            (1_500, "1500m"),
            (4_000, "4"),
            (0, "0"),
            (68_719_476_736_000, "64Gi"),
            (1_048_576_000, "1Mi"),
            (2_048_000, "2048"),
            (1_000_000_000_000, "1000000000"),
        ];
        for (thousandths, expected) in cases {
            let formatted = format(thousandths);
            assert_eq!(formatted.0, expected);
            assert_eq!(parse(&formatted.0), Some(thousandths));
        }
    }

    #[test]
    fn a_pod_requests_its_containers_sum_or_its_largest_init_container() {
        let spec: PodSpec = serde_json::from_value(json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "2", "cpu": "4"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "c"},
            ],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3", "memory": "512Mi"}}}],
            "overhead": {"cpu": "100m"},
        }))
        .unwrap();
        assert_eq!(
            pod_requests(&spec),
            Amounts::from([
                ("cpu".into(), 3_100),
                ("memory".into(), 1_073_741_824_000),
                ("nvidia.com/gpu".into(), 2_000),
            ]),
            "cpu: max(1 + 0.5, 3) + 0.1; memory: max(1Gi, 512Mi); the GPU limit counts as its request"
        );
    }
}
