//! A TrainingJob's workers and other objects, as et-operator makes them: its headless
//! Service, the launcher's ConfigMap, ServiceAccount, Role and RoleBinding.

use std::collections::BTreeMap;

use eto_api::job_status::NodeCooldown;
use eto_api::well_known::{JOB_NAME_LABEL, JOB_ROLE_LABEL, WORKER_ROLE};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount, ServiceSpec};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use crate::builders::{SshWorker, ssh_worker_pod};
use crate::child::Child;
use crate::discovery::DISCOVER_HOSTS_SCRIPT;
use crate::job::JobContext;
use crate::names;

/// Worker `index` of TrainingJob `job` (see [`ssh_worker_pod`]): as et-operator's, the key
/// pair in every container, and the first container's arguments without a command go to the
/// SSH daemon.
pub fn worker_pod(job: JobContext<'_>, index: u32, in_cooldown: &[NodeCooldown]) -> Option<Pod> {
    let ssh = SshWorker {
        args_go_to_sshd: true,
        keys_in_every_container: true,
    };
    Some(ssh_worker_pod(job, index, in_cooldown, ssh))
}

/// What a run of TrainingJob `job` needs beside its pods: the launcher's ServiceAccount, Role
/// and RoleBinding, and the workers' Service.
pub fn supporting_objects(job: JobContext<'_>) -> Vec<Child> {
    vec![
        Child::ServiceAccount(Box::new(launcher_service_account(job))),
        Child::Role(Box::new(launcher_role(job))),
        Child::RoleBinding(Box::new(launcher_role_binding(job))),
        Child::Service(Box::new(worker_service(job))),
    ]
}

/// The headless Service `<job>-workers`: it gives every worker the DNS name
/// `<job>-worker-<i>.<job>-workers` as soon as it has an address (ready or not, so that names
/// resolve by the time a worker joins host discovery).
pub fn worker_service(job: JobContext<'_>) -> Service {
    Service {
        metadata: job.metadata(names::worker_service(job.name())),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(BTreeMap::from([
                (JOB_NAME_LABEL.to_string(), job.name().to_string()),
                (JOB_ROLE_LABEL.to_string(), WORKER_ROLE.to_string()),
            ])),
            publish_not_ready_addresses: Some(true),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The ConfigMap `<job>-config`: `hostfile`, `deepspeed-hostfile` and `discover_hosts.sh`.
pub fn config_map(job: JobContext<'_>, hostfile: &str, deepspeed_hostfile: &str) -> ConfigMap {
    ConfigMap {
        metadata: job.metadata(names::config_map(job.name())),
        data: Some(BTreeMap::from([
            ("hostfile".to_string(), hostfile.to_string()),
            (
                "deepspeed-hostfile".to_string(),
                deepspeed_hostfile.to_string(),
            ),
            (
                "discover_hosts.sh".to_string(),
                DISCOVER_HOSTS_SCRIPT.to_string(),
            ),
        ])),
        ..ConfigMap::default()
    }
}

/// The launcher's ServiceAccount `<job>-launcher`.
pub fn launcher_service_account(job: JobContext<'_>) -> ServiceAccount {
    ServiceAccount {
        metadata: job.metadata(names::launcher_rbac(job.name())),
        ..ServiceAccount::default()
    }
}

/// The launcher's Role `<job>-launcher`: reading the job's ConfigMap, nothing else. The
/// launcher reaches workers over SSH, so it needs neither `pods` nor `pods/exec`.
pub fn launcher_role(job: JobContext<'_>) -> Role {
    Role {
        metadata: job.metadata(names::launcher_rbac(job.name())),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            resource_names: Some(vec![names::config_map(job.name())]),
            verbs: vec!["get".into(), "watch".into()],
            non_resource_urls: None,
        }]),
    }
}

/// The RoleBinding `<job>-launcher` of the launcher's Role to its ServiceAccount.
pub fn launcher_role_binding(job: JobContext<'_>) -> RoleBinding {
    let name = names::launcher_rbac(job.name());
    RoleBinding {
        metadata: job.metadata(name.clone()),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name,
            namespace: Some(job.namespace().to_string()),
            api_group: None,
        }]),
    }
}
