//! The SSH Secret eto generates for the jobs whose launcher reaches its workers over SSH.

use k8s_openapi::api::core::v1::Secret;

use crate::job::JobContext;
use crate::names;

/// The Secret `<job>-ssh` eto generates, without its key material: the controller adds the key
/// pair when it creates the Secret, once. A TrainingJob's is `Opaque` with et-operator's keys
/// (`id_rsa`, `id_rsa.pub`, `config`); an MPIJob's is `kubernetes.io/ssh-auth` with
/// mpi-operator's (`ssh-privatekey`, `ssh-publickey`).
pub fn ssh_secret(job: JobContext<'_>) -> Secret {
    let type_ = job.kind().vocabulary().ssh_secret_type;
    Secret {
        metadata: job.metadata(names::generated_ssh_secret(job.name())),
        type_: Some(type_.into()),
        ..Secret::default()
    }
}

/// The type of an MPIJob's SSH Secret.
pub const SSH_AUTH_SECRET_TYPE: &str = "kubernetes.io/ssh-auth";
