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

/// Label on every pod of a job, with value [`GROUP_NAME`] (et-operator's `group-name`).
pub const GROUP_NAME_LABEL: &str = "group-name";
/// Value of [`GROUP_NAME_LABEL`].
pub const GROUP_NAME: &str = "kai.alibabacloud.com";
/// Label holding the job name on every pod of a job.
pub const JOB_NAME_LABEL: &str = "training-job-name";
/// Label holding the role of a pod: [`LAUNCHER_ROLE`] or [`WORKER_ROLE`].
pub const JOB_ROLE_LABEL: &str = "training-job-role";
/// Value of [`JOB_ROLE_LABEL`] on the launcher.
pub const LAUNCHER_ROLE: &str = "launcher";
/// Value of [`JOB_ROLE_LABEL`] on workers.
pub const WORKER_ROLE: &str = "worker";
/// Label holding a worker's index, the `<i>` of `<job>-worker-<i>`.
pub const REPLICA_INDEX_LABEL: &str = "replica-index";
/// Label on every object eto creates, with value [`MANAGER`].
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// eto's name as a manager: the value of [`MANAGED_BY_LABEL`] and the field manager of its
/// writes.
pub const MANAGER: &str = "eto";
/// Label holding the job's run (`status.run`) a pod belongs to; pods of earlier runs are
/// removed.
pub const RUN_LABEL: &str = "eto.dev/run";
/// Label holding the job's `status.restartCount` when the pod was created, on pods created
/// before [`RUN_LABEL`] existed; read as their run.
pub const RESTART_LABEL: &str = "eto.dev/restart";
/// Annotation on every pod holding the notice shown in `/etc/edl/notice` (see
/// [`crate::job_status::Notice`]).
pub const NOTICE_ANNOTATION: &str = "eto.dev/notice";
/// Annotation on a worker of an elastic PyTorchJob whose rendezvous eto hosts: `go` once the
/// worker may start its training, shown in `/etc/edl/start`.
pub const START_ANNOTATION: &str = "eto.dev/start";
/// Environment variable of the launcher's first container: `true` when its run resumes a
/// suspended job, `false` otherwise. `horovodrun` passes it on to the training processes.
pub const RESUME_ENV: &str = "ETO_RESUME";
/// Annotation Alibaba's job supervisor (and et-operator users) set to `"true"` to suspend a
/// job; eto reads it as `spec.suspend: true`.
pub const JOB_SUSPENDED_ANNOTATION: &str = "job-supervisor.kube-ai.io/job-suspended";

/// The pod annotation that opts a pod into the stop signal of the `kubeai` SDK (Alibaba's
/// job supervisor reads it): `"true"`.
pub const KUBEAI_MANAGED_ANNOTATION: &str = "job-supervisor.kube-ai.io/managed-by-job-supervisor";

/// The port the `kubeai` SDK listens on for its stop signal.
pub const KUBEAI_PORT: u16 = 9009;
/// Annotation on the launcher holding the current hostfile, which the launcher reads as
/// `/etc/edl/hostfile` (see docs/how-a-job-runs.md on host discovery).
pub const HOSTFILE_ANNOTATION: &str = "eto.dev/hostfile";
/// Annotation on the launcher holding the current DeepSpeed hostfile, read as `/job/hostfile`.
pub const DEEPSPEED_HOSTFILE_ANNOTATION: &str = "eto.dev/deepspeed-hostfile";

/// Label on every pod of an MPIJob naming the operator, with value [`MPI_OPERATOR_NAME`]:
/// mpi-operator's label and value, kept so that selectors written for mpi-operator keep
/// working (`app.kubernetes.io/managed-by: eto` tells eto's pods apart).
pub const MPI_OPERATOR_NAME_LABEL: &str = "training.kubeflow.org/operator-name";
/// Value of [`MPI_OPERATOR_NAME_LABEL`].
pub const MPI_OPERATOR_NAME: &str = "mpi-operator";
/// Label holding the job name on every pod of an MPIJob.
pub const MPI_JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
/// Label holding the role of an MPIJob's pod: [`LAUNCHER_ROLE`] or [`WORKER_ROLE`].
pub const MPI_JOB_ROLE_LABEL: &str = "training.kubeflow.org/job-role";
/// Label holding an MPIJob worker's index.
pub const MPI_REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";
/// Environment variable of the first container of an MPIJob's pods: `launcher` or `worker`.
pub const MPI_ROLE_ENV: &str = "K_MPI_JOB_ROLE";

/// The annotation by which a pod's owner says which pods go first when the job shrinks: the
/// lowest cost first, as for a ReplicaSet (Kubernetes' `controller.kubernetes.io/pod-deletion-cost`).
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Annotation on the pods eto creates from a pod template of the job: a digest of that
/// template, so that pods waiting on a template the job no longer has (an image never pulled, a
/// missing Secret) are replaced by pods of the new one.
pub const TEMPLATE_ANNOTATION: &str = "eto.dev/template";
