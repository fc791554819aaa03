//! The names of the objects eto creates for a job, and the Kubernetes name rules they must
//! satisfy.

/// The launcher: the pod `<job>-launcher` of a TrainingJob (et-operator's name), the batch
/// Job `<job>-launcher` of an MPIJob (mpi-operator's), whose pod has it as host name.
pub fn launcher(job: &str) -> String {
    format!("{job}-launcher")
}

/// Worker pod `index`: `<job>-worker-<index>` (et-operator's name).
pub fn worker(job: &str, index: u32) -> String {
    format!("{job}-worker-{index}")
}

/// The index of worker pod `pod` of `job`, if `pod` is one of its worker names.
pub fn worker_index(job: &str, pod: &str) -> Option<u32> {
    let index = pod.strip_prefix(job)?.strip_prefix("-worker-")?;
    // `01` is not a name eto gives; reject it so that names and indices map one to one.
    if index.starts_with('0') && index.len() > 1 {
        return None;
    }
    index.parse().ok()
}

/// The headless Service whose subdomain gives workers their DNS names: `<job>-workers`.
pub fn worker_service(job: &str) -> String {
    format!("{job}-workers")
}

/// The host name of a worker as the hostfile lists it: `<job>-worker-<i>.<job>-workers`,
/// which resolves from any pod in the namespace through its DNS search path.
pub fn worker_host(job: &str, index: u32) -> String {
    format!("{}.{}", worker(job, index), worker_service(job))
}

/// The host name of a pod of an MPIJob as its hostfile lists it, as mpi-operator writes it:
/// `<pod>.<job>.<namespace>.svc`.
pub fn mpi_host(job: &str, namespace: &str, pod: &str) -> String {
    format!("{pod}.{job}.{namespace}.svc")
}

/// The host name of worker `index` of MPIJob `job` in `namespace`, as its hostfile lists it
/// (see [`mpi_host`]).
pub fn mpi_worker_host(job: &str, namespace: &str, index: u32) -> String {
    mpi_host(job, namespace, &worker(job, index))
}

/// The headless Service of MPIJob `job`: the job's own name, as mpi-operator names it.
pub fn mpi_service(job: &str) -> String {
    job.to_string()
}

/// The ConfigMap with the hostfile and the discovery script: `<job>-config`.
pub fn config_map(job: &str) -> String {
    format!("{job}-config")
}

/// The Secret eto generates with the job's SSH key pair: `<job>-ssh`. (Not `<job>`: that
/// name belongs to the Secret Arena renders itself.)
pub fn generated_ssh_secret(job: &str) -> String {
    format!("{job}-ssh")
}

/// The launcher's ServiceAccount, Role and RoleBinding: `<job>-launcher`.
pub fn launcher_rbac(job: &str) -> String {
    format!("{job}-launcher")
}

/// The name of job `job`'s HorizontalPodAutoscaler: the job's (training-operator v1's name).
pub fn autoscaler(job: &str) -> String {
    job.to_string()
}

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

/// Whether `name` is a DNS-1123 label: at most 63 lowercase letters, digits and `-`,
/// starting and ending with a letter or digit. Container names must be one.
pub fn is_dns1123_label(name: &str) -> bool {
    name.len() <= 63 && !name.contains('.') && is_dns1123_subdomain(name)
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
    fn dns1123_labels() {
        for good in ["pytorch", "1st", "side-car"] {
            assert!(is_dns1123_label(good), "{good} should be accepted");
        }
        let too_long = "a".repeat(64);
        for bad in [
            "",
            "PyTorch",
            "py.torch",
            "py_torch",
            "-a",
            too_long.as_str(),
        ] {
            assert!(!is_dns1123_label(bad), "{bad} should be rejected");
        }
    }

    #[test]
    fn worker_indices_round_trip_through_names() {
        assert_eq!(worker_index("mnist", &worker("mnist", 12)), Some(12));
        assert_eq!(worker_index("mnist", "mnist-worker-0"), Some(0));
        for not_a_worker in [
            "mnist-launcher",
            "mnist-worker-",
            "mnist-worker-x",
            "mnist-worker-01",
            "other-worker-1",
            "mnist-v2-worker-1",
        ] {
            assert_eq!(worker_index("mnist", not_a_worker), None, "{not_a_worker}");
        }
        assert_eq!(worker_host("mnist", 3), "mnist-worker-3.mnist-workers");
        assert_eq!(mpi_worker_host("pi", "team", 3), "pi-worker-3.pi.team.svc");
        assert_eq!(mpi_service("pi"), "pi");
        assert_eq!(worker_service("pi"), "pi-workers");
    }

    #[test]
    fn longest_job_name_leaves_room_for_five_digit_worker_indices() {
        let name = "a".repeat(MAX_JOB_NAME_LEN);
        assert!(is_dns1035_label(&format!("{name}-worker-99999")));
        assert!(!is_dns1035_label(&format!("{name}a-worker-99999")));
    }
}
