//! Label and annotation keys that are part of eto's contract with users and tools.
//!
//! The keys shared with et-operator and Arena keep their exact spelling, so that tools written
//! for those projects (`arena get`, `arena top job`, dashboards selecting by label) keep working.

/// Annotation naming an existing Secret that holds the job's SSH key pair
/// (`id_rsa`, `id_rsa.pub`, `config`). Arena sets it for `--ssh-secret`; when present eto
/// mounts that Secret and creates none.
pub const SSH_SECRET_ANNOTATION: &str = "arena.kubeflow.org/ssh-secret";

/// Annotation holding the number of seconds new workers may wait for resources
/// (Arena's `--max-wait-time`). `spec.elasticPolicy.maxWaitSeconds` takes precedence.
pub const MAX_WAIT_TIME_ANNOTATION: &str = "job-supervisor.kube-ai.io/max-wait-time";
