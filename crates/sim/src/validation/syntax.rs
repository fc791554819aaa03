//! The string formats kube-apiserver checks names, keys and values against, each returning
//! kube-apiserver's messages (empty when the value is valid), so that eto-sim's refusals read
//! as a real cluster's.

/// A DNS-1123 label's longest length.
const DNS1123_LABEL_MAX: usize = 63;
/// A DNS-1123 subdomain's longest length.
const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// The longest name part of a qualified name, and the longest label value.
const QUALIFIED_NAME_MAX: usize = 63;

const DNS1123_LABEL_FORMAT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FORMAT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FORMAT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FORMAT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const ENV_VAR_NAME_MESSAGE: &str = "a valid environment variable name must consist only of printable ASCII characters other than '='";
const DNS1123_SUBDOMAIN_UNDERSCORE_FORMAT: &str =
    "_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_UNDERSCORE_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character";

/// kube-apiserver's "too long" message.
fn max_length(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// kube-apiserver's message for a value that does not match `format`, with examples.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{format}')",
        examples.join(" or ")
    )
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn matches_dns1123_label(value: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(is_label_char);
    edge(value.chars().next())
        && edge(value.chars().last())
        && value.chars().all(|c| is_label_char(c) || c == '-')
}

fn matches_dns1123_subdomain(value: &str) -> bool {
    value.split('.').all(matches_dns1123_label)
}

/// A DNS-1123 label: a host name, a container, volume or port name.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errors.push(max_length(DNS1123_LABEL_MAX));
    }
    if !matches_dns1123_label(value) {
        if matches_dns1123_subdomain(value) {
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_error(
                DNS1123_LABEL_MESSAGE,
                DNS1123_LABEL_FORMAT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errors
}

/// A DNS-1123 subdomain: most object names, a label key's prefix.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(max_length(DNS1123_SUBDOMAIN_MAX));
    }
    if !matches_dns1123_subdomain(value) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_MESSAGE,
            DNS1123_SUBDOMAIN_FORMAT,
            &["example.com"],
        ));
    }
    errors
}

fn matches_qualified_part(value: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge(value.chars().next())
        && edge(value.chars().last())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A qualified name: a label or annotation key, a scheduling gate, an Event's reporter. An
/// optional DNS subdomain and `/`, then a name of at most 63 characters.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|message| format!("prefix part {message}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MESSAGE,
                    QUALIFIED_NAME_FORMAT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!("name part {}", max_length(QUALIFIED_NAME_MAX)));
    }
    if !matches_qualified_part(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MESSAGE,
                QUALIFIED_NAME_FORMAT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errors
}

/// A label value: empty, or at most 63 characters shaped like a qualified name's name part.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > QUALIFIED_NAME_MAX {
        errors.push(max_length(QUALIFIED_NAME_MAX));
    }
    if !value.is_empty() && !matches_qualified_part(value) {
        errors.push(regex_error(
            LABEL_VALUE_MESSAGE,
            LABEL_VALUE_FORMAT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// An environment variable's name, under the relaxed rule of Kubernetes 1.34 and later:
/// printable ASCII other than `=` (an empty name is reported as missing, not here).
pub fn env_var_name(value: &str) -> Vec<String> {
    if value.chars().all(|c| (' '..='~').contains(&c) && c != '=') {
        Vec::new()
    } else {
        vec![ENV_VAR_NAME_MESSAGE.to_string()]
    }
}

fn matches_dns1123_label_with_underscore(value: &str) -> bool {
    let inner = value.strip_prefix('_').unwrap_or(value);
    let edge = |c: Option<char>| c.is_some_and(is_label_char);
    edge(inner.chars().next())
        && edge(inner.chars().last())
        && inner
            .chars()
            .all(|c| is_label_char(c) || c == '-' || c == '_')
}

/// A DNS search path of a pod, under the relaxed rule of Kubernetes 1.34 and later: a DNS
/// subdomain whose labels may also hold `_` (and start with one).
pub fn dns1123_subdomain_with_underscore(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(max_length(DNS1123_SUBDOMAIN_MAX));
    }
    if !value.split('.').all(matches_dns1123_label_with_underscore) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_UNDERSCORE_MESSAGE,
            DNS1123_SUBDOMAIN_UNDERSCORE_FORMAT,
            &["example.com"],
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    type Check = fn(&str) -> Vec<String>;

    #[test]
    fn formats_accept_and_refuse_as_kube_apiserver_does() {
        // (check, value, valid)
        let cases: [(Check, &str, bool); 25] = [
            (dns1123_label, "worker-0", true),
            (dns1123_label, "Worker", false),
            (dns1123_label, "a.b", false),
            (dns1123_label, "-a", false),
            (dns1123_label, &"a".repeat(64), false),
            (dns1123_subdomain, "gpu-node-1.example.com", true),
            (dns1123_subdomain, "node_1", false),
            (dns1123_subdomain, "", false),
            (qualified_name, "eto.dev/run", true),
            (qualified_name, "nvidia.com/gpu.product", true),
            (qualified_name, "MyName", true),
            (qualified_name, "a/b/c", false),
            (qualified_name, "/name", false),
            (qualified_name, "Example.com/name", false),
            (qualified_name, "name-", false),
            (label_value, "", true),
            (label_value, "H100_80GB", true),
            (label_value, "a b", false),
            (label_value, &"v".repeat(64), false),
            (env_var_name, "OMPI_MCA_orte_default_hostfile", true),
            (env_var_name, "1ABC", true),
            (env_var_name, "A=B", false),
            (env_var_name, "ä", false),
            (dns1123_subdomain_with_underscore, "_tcp.job.svc", true),
            (dns1123_subdomain_with_underscore, "job..svc", false),
        ];
        for (check, value, valid) in cases {
            assert_eq!(
                check(value).is_empty(),
                valid,
                "{value:?}: {:?}",
                check(value)
            );
        }
    }

    #[test]
    fn messages_are_kube_apiservers() {
        assert_eq!(
            dns1123_label("a.b"),
            ["must not contain dots"],
            "a subdomain that is no label"
        );
        assert_eq!(
            label_value("a b"),
            [
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
    }
}
