//! Label and field selectors, in the syntax of the `labelSelector` and `fieldSelector` query
//! parameters.

use std::collections::BTreeSet;

use serde_json::Value;

/// A selector that cannot be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    ///
    /// # Errors
    /// [`SelectorError`] naming the requirement that does not parse.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        split_top_level(text)
            .into_iter()
            .filter(|part| !part.trim().is_empty())
            .map(|part| parse_requirement(part.trim()))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether an object with `labels` (its `metadata.labels`, possibly null) matches.
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
            Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
            Requirement::In(key, values) => label(key).is_some_and(|v| values.contains(v)),
            Requirement::NotIn(key, values) => !label(key).is_some_and(|v| values.contains(v)),
            Requirement::Exists(key) => label(key).is_some(),
            Requirement::DoesNotExist(key) => label(key).is_none(),
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (index, character) in text.char_indices() {
        match character {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(part: &str) -> Result<Requirement, SelectorError> {
    let error = || SelectorError(part.to_string());
    let set = |rest: &str| -> Result<BTreeSet<String>, SelectorError> {
        let inner = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(error)?;
        Ok(inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect())
    };
    if let Some(key) = part.strip_prefix('!') {
        return valid_key(key.trim())
            .map(Requirement::DoesNotExist)
            .ok_or_else(error);
    }
    if let Some((key, value)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(
            valid_key(key).ok_or_else(error)?,
            value.trim().into(),
        ));
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(
            valid_key(key).ok_or_else(error)?,
            value.trim().into(),
        ));
    }
    if let Some((key, rest)) = part.split_once(" notin ") {
        return Ok(Requirement::NotIn(
            valid_key(key).ok_or_else(error)?,
            set(rest)?,
        ));
    }
    if let Some((key, rest)) = part.split_once(" in ") {
        return Ok(Requirement::In(
            valid_key(key).ok_or_else(error)?,
            set(rest)?,
        ));
    }
    valid_key(part).map(Requirement::Exists).ok_or_else(error)
}

fn valid_key(key: &str) -> Option<String> {
    let key = key.trim();
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    valid.then(|| key.to_string())
}

/// A parsed field selector over the fields the simulated API server supports:
/// `metadata.name`, `metadata.namespace`, and for pods `spec.nodeName` and `status.phase`,
/// for events `involvedObject.*`, `reason` and `type`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Fields that may appear in a field selector.
const SELECTABLE_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.schedulerName",
    "status.phase",
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "regarding.kind",
    "regarding.name",
    "regarding.uid",
    "reason",
    "type",
];

impl FieldSelector {
    /// Parses `a=b,c!=d`.
    ///
    /// # Errors
    /// [`SelectorError`] for syntax the API server does not accept, or for a field it does not
    /// index.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        text.split(',')
            .filter(|part| !part.trim().is_empty())
            .map(|part| {
                let part = part.trim();
                let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                    (f, false, v)
                } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('='))
                {
                    (f, true, v)
                } else {
                    return Err(SelectorError(part.to_string()));
                };
                if !SELECTABLE_FIELDS.contains(&field.trim()) {
                    return Err(SelectorError(format!(
                        "field label not supported: {}",
                        field.trim()
                    )));
                }
                Ok((field.trim().to_string(), equal, value.trim().to_string()))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether `object` matches. A missing field reads as the empty string.
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = crate::resources::read_json_path(object, field)
                .and_then(Value::as_str)
                .unwrap_or_default();
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selectors_match_as_kubernetes_does() {
        let labels = json!({"app": "web", "tier": "front", "env": "prod"});
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("missing notin (web)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier in (front),!missing", true),
            ("app=web,env=dev", false),
        ];
        for (selector, expected) in cases {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(Some(&labels)), expected, "{selector}");
        }
        assert!(!LabelSelector::parse("app").unwrap().matches(None));
    }

    #[test]
    fn malformed_label_selectors_are_errors() {
        for bad in ["app in web", "=web", "a b"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selectors_read_nested_fields() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let cases = [
            ("metadata.name=p", true),
            ("metadata.namespace=ns,spec.nodeName=n1", true),
            ("spec.nodeName!=n1", false),
            ("status.phase=Pending", false),
            ("spec.nodeName=", false),
        ];
        for (selector, expected) in cases {
            assert_eq!(
                FieldSelector::parse(selector).unwrap().matches(&pod),
                expected,
                "{selector}"
            );
        }
        let unscheduled = json!({"metadata": {"name": "p"}, "spec": {}});
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .matches(&unscheduled)
        );
        assert!(FieldSelector::parse("spec.hostname=x").is_err());
    }
}
