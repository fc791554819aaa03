//! The objects eto creates for a job, built from the job alone (no API calls).
//!
//! Every object carries the job's controller owner reference (so garbage collection removes
//! it with the job), [`MANAGER`] as `app.kubernetes.io/managed-by` (so eto's watches select
//! only its own objects) and et-operator's job label.

mod launcher;
mod objects;
mod worker;

use std::collections::BTreeMap;

use eto_api::TrainingJob;
use eto_api::training_job::Notice;
use eto_api::well_known::{
    GROUP_NAME, GROUP_NAME_LABEL, JOB_NAME_LABEL, MANAGED_BY_LABEL, MANAGER,
};
use k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, KeyToPath, ObjectFieldSelector, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

pub use launcher::launcher_pod;
pub use objects::{
    config_map, launcher_role, launcher_role_binding, launcher_service_account, ssh_secret,
    worker_service,
};
pub use worker::worker_pod;

use crate::effective_spec::{EffectiveSpec, SshSecretSource};
use crate::names;

/// Name of the volume holding the SSH key pair, mounted at [`SSH_DIR`].
pub const SSH_VOLUME: &str = "eto-ssh";
/// Where the SSH key pair is mounted in every container.
pub const SSH_DIR: &str = "/root/.ssh";
/// Name of the launcher's volume with the hostfile and the discovery script.
pub const DISCOVERY_VOLUME: &str = "eto-discovery";
/// Where the launcher finds `hostfile` and `discover_hosts.sh`.
pub const DISCOVERY_DIR: &str = "/etc/edl";
/// Name of the launcher's volume with the DeepSpeed hostfile.
pub const DEEPSPEED_VOLUME: &str = "eto-deepspeed";
/// Where the launcher finds the DeepSpeed `hostfile`.
pub const DEEPSPEED_DIR: &str = "/job";
/// Name of the workers' volume with the notice, mounted at [`DISCOVERY_DIR`].
pub const NOTICE_VOLUME: &str = "eto-notice";
/// Volume names eto adds to pods; templates may not use them.
pub const RESERVED_VOLUMES: [&str; 4] = [
    SSH_VOLUME,
    DISCOVERY_VOLUME,
    DEEPSPEED_VOLUME,
    NOTICE_VOLUME,
];
/// Command of a worker whose first container has none: an SSH daemon in the foreground, so
/// that the launcher can start the training processes.
pub const SSHD_COMMAND: [&str; 2] = ["/usr/sbin/sshd", "-De"];

/// A valid job, as the builders need it.
#[derive(Clone, Copy, Debug)]
pub struct Job<'a> {
    /// The TrainingJob.
    pub job: &'a TrainingJob,
    /// Its validated spec.
    pub spec: &'a EffectiveSpec,
    /// Its current run (`status.run`), recorded on the pods created now.
    pub run: i32,
    /// The notice its pods show (`status.notice`).
    pub notice: Option<&'a Notice>,
}

impl Job<'_> {
    /// The job's name.
    pub fn name(&self) -> &str {
        self.job.metadata.name.as_deref().unwrap_or_default()
    }

    /// The job's namespace.
    pub fn namespace(&self) -> &str {
        self.job.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The owner reference every child carries: controller, blocking owner deletion.
    pub fn owner(&self) -> OwnerReference {
        OwnerReference {
            api_version: TrainingJob::api_version(&()).into_owned(),
            kind: TrainingJob::kind(&()).into_owned(),
            name: self.name().to_string(),
            uid: self.job.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// The labels on every object of the job.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (GROUP_NAME_LABEL.to_string(), GROUP_NAME.to_string()),
            (JOB_NAME_LABEL.to_string(), self.name().to_string()),
            (MANAGED_BY_LABEL.to_string(), MANAGER.to_string()),
        ])
    }

    /// Metadata of a child named `name`, with the job's labels and owner.
    pub fn metadata(&self, name: String) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace().to_string()),
            labels: Some(self.labels()),
            owner_references: Some(vec![self.owner()]),
            ..ObjectMeta::default()
        }
    }

    /// The Secret holding the job's SSH key pair.
    pub fn ssh_secret_name(&self) -> String {
        match &self.spec.ssh_secret {
            SshSecretSource::Generated => names::generated_ssh_secret(self.name()),
            SshSecretSource::Provided(name) => name.clone(),
        }
    }

    /// The SSH volume: the key pair as `id_rsa`, `id_rsa.pub`, `authorized_keys` (the public
    /// key) and `config`, readable by its owner only.
    pub fn ssh_volume(&self) -> Volume {
        let item = |key: &str, path: &str| KeyToPath {
            key: key.into(),
            path: path.into(),
            mode: None,
        };
        Volume {
            name: SSH_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(self.ssh_secret_name()),
                default_mode: Some(0o600),
                items: Some(vec![
                    item("id_rsa", "id_rsa"),
                    item("id_rsa.pub", "id_rsa.pub"),
                    item("id_rsa.pub", "authorized_keys"),
                    item("config", "config"),
                ]),
                optional: None,
            }),
            ..Volume::default()
        }
    }
}

/// The mount of the SSH volume, added to every container of every pod.
pub fn ssh_mount() -> VolumeMount {
    VolumeMount {
        name: SSH_VOLUME.into(),
        mount_path: SSH_DIR.into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// A downward-API file at `path` holding the pod's annotation `annotation`.
pub fn annotation_file(path: &str, annotation: &str, mode: i32) -> DownwardAPIVolumeFile {
    DownwardAPIVolumeFile {
        path: path.into(),
        field_ref: Some(ObjectFieldSelector {
            api_version: None,
            field_path: format!("metadata.annotations['{annotation}']"),
        }),
        mode: Some(mode),
        resource_field_ref: None,
    }
}

/// Merges `ours` over `theirs` (template labels or annotations): eto's keys win.
pub fn merged(
    theirs: Option<&BTreeMap<String, String>>,
    ours: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged = theirs.cloned().unwrap_or_default();
    merged.extend(ours);
    merged
}

#[cfg(test)]
mod tests;
