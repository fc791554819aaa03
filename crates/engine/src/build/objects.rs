//! The other objects of a job: its headless Service, ConfigMap, SSH Secret and the launcher's
//! ServiceAccount, Role and RoleBinding.

use std::collections::BTreeMap;

use eto_api::well_known::{JOB_NAME_LABEL, JOB_ROLE_LABEL, WORKER_ROLE};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount, ServiceSpec};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use super::Job;
use crate::discovery::DISCOVER_HOSTS_SCRIPT;
use crate::names;

/// The headless Service `<job>-workers`: it gives every worker the DNS name
/// `<job>-worker-<i>.<job>-workers` as soon as it has an address (ready or not, so that names
/// resolve by the time a worker joins host discovery).
pub fn worker_service(job: Job<'_>) -> Service {
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
pub fn config_map(job: Job<'_>, hostfile: &str, deepspeed_hostfile: &str) -> ConfigMap {
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

/// The Secret `<job>-ssh` eto generates, without its key material: the controller adds the key
/// pair when it creates the Secret, once. A TrainingJob's is `Opaque` with et-operator's keys
/// (`id_rsa`, `id_rsa.pub`, `config`); an MPIJob's is `kubernetes.io/ssh-auth` with
/// mpi-operator's (`ssh-privatekey`, `ssh-publickey`).
pub fn ssh_secret(job: Job<'_>) -> Secret {
    let type_ = job.kind().vocabulary().ssh_secret_type;
    Secret {
        metadata: job.metadata(names::generated_ssh_secret(job.name())),
        type_: Some(type_.into()),
        ..Secret::default()
    }
}

/// The type of an MPIJob's SSH Secret.
pub const SSH_AUTH_SECRET_TYPE: &str = "kubernetes.io/ssh-auth";

/// The launcher's ServiceAccount `<job>-launcher`.
pub fn launcher_service_account(job: Job<'_>) -> ServiceAccount {
    ServiceAccount {
        metadata: job.metadata(names::launcher_rbac(job.name())),
        ..ServiceAccount::default()
    }
}

/// The launcher's Role `<job>-launcher`: reading the job's ConfigMap, nothing else. The
/// launcher reaches workers over SSH, so it needs neither `pods` nor `pods/exec`.
pub fn launcher_role(job: Job<'_>) -> Role {
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
pub fn launcher_role_binding(job: Job<'_>) -> RoleBinding {
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
