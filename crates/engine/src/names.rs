//! Kubernetes name rules that eto's object names must satisfy.

/// Longest TrainingJob name eto accepts. Worker pods and their host names are
/// `<job>-worker-<index>`, which must fit in a 63-character DNS label with room for a
/// five-digit index.
pub const MAX_JOB_NAME_LEN: usize = 63 - "-worker-".len() - 5;

/// Whether `name` is a DNS-1035 label: at most 63 lowercase letters, digits and `-`,
/// starting with a letter and ending with a letter or digit. Service names must be one.
pub fn is_dns1035_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            name.len() <= 63
                && first.is_ascii_lowercase()
                && (last.is_ascii_lowercase() || last.is_ascii_digit())
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        }
        _ => false,
    }
}

/// Whether `name` is a DNS-1123 subdomain: at most 253 characters, dot-separated labels of
/// lowercase letters, digits and `-` that start and end with a letter or digit. Most object
/// names (Secrets, ConfigMaps, Pods) must be one.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    first.is_ascii_alphanumeric()
                        && last.is_ascii_alphanumeric()
                        && bytes
                            .iter()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                }
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns1035_labels() {
        for good in ["a", "mnist", "job-1", "a1b2"] {
            assert!(is_dns1035_label(good), "{good} should be accepted");
        }
        let too_long = "a".repeat(64);
        for bad in [
            "",
            "1job",
            "-job",
            "job-",
            "Job",
            "job.x",
            "job_x",
            too_long.as_str(),
        ] {
            assert!(!is_dns1035_label(bad), "{bad} should be rejected");
        }
    }

    #[test]
    fn dns1123_subdomains() {
        for good in ["a", "1secret", "ssh.keys", "my-job-ssh"] {
            assert!(is_dns1123_subdomain(good), "{good} should be accepted");
        }
        let too_long = "a".repeat(254);
        for bad in ["", "Secret", "a..b", ".a", "a-", "a_b", too_long.as_str()] {
            assert!(!is_dns1123_subdomain(bad), "{bad} should be rejected");
        }
    }

    #[test]
    fn longest_job_name_leaves_room_for_five_digit_worker_indices() {
        let name = "a".repeat(MAX_JOB_NAME_LEN);
        assert!(is_dns1035_label(&format!("{name}-worker-99999")));
        assert!(!is_dns1035_label(&format!("{name}a-worker-99999")));
    }
}
