//! The objects a job owns, as a plan names them: one to apply ([`Child`]), or one to delete
//! ([`Deletion`] of a [`ChildKind`]). Every layer that builds a child (a kind's objects, the
//! planner) or writes one (the controller) speaks of them in these types.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use crate::pod_group::PodGroup;
use crate::pod_metadata::PodMetadata;

/// An object to apply.
#[derive(Clone, Debug, PartialEq)]
pub enum Child {
    /// A pod to create. Its spec is immutable: a pod that exists gets
    /// [`Child::PodMetadata`] instead.
    Pod(Box<Pod>),
    /// New labels and annotations of a pod that exists.
    PodMetadata(PodMetadata),
    /// The headless Service.
    Service(Box<Service>),
    /// The discovery ConfigMap.
    ConfigMap(Box<ConfigMap>),
    /// The launcher's ServiceAccount.
    ServiceAccount(Box<ServiceAccount>),
    /// The launcher's Role.
    Role(Box<Role>),
    /// The launcher's RoleBinding.
    RoleBinding(Box<RoleBinding>),
    /// An MPIJob's launcher Job: created once per run, never updated (its pod template is
    /// immutable); one that already exists is left as it is.
    LauncherJob(Box<BatchJob>),
    /// The job's PodGroup, when the operator uses a gang scheduler; listed before the pods
    /// that belong to it.
    PodGroup(Box<PodGroup>),
    /// A PyTorchJob's HorizontalPodAutoscaler.
    Autoscaler(Box<HorizontalPodAutoscaler>),
}

impl Child {
    /// The kind of the object, as the API names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pod(_) | Self::PodMetadata(_) => "Pod",
            Self::Service(_) => "Service",
            Self::ConfigMap(_) => "ConfigMap",
            Self::ServiceAccount(_) => "ServiceAccount",
            Self::Role(_) => "Role",
            Self::RoleBinding(_) => "RoleBinding",
            Self::LauncherJob(_) => "Job",
            Self::PodGroup(_) => "PodGroup",
            Self::Autoscaler(_) => "HorizontalPodAutoscaler",
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        let metadata = match self {
            Self::PodMetadata(change) => return &change.name,
            Self::Pod(pod) => &pod.metadata,
            Self::Service(service) => &service.metadata,
            Self::ConfigMap(config_map) => &config_map.metadata,
            Self::ServiceAccount(account) => &account.metadata,
            Self::Role(role) => &role.metadata,
            Self::RoleBinding(binding) => &binding.metadata,
            Self::LauncherJob(job) => &job.metadata,
            Self::PodGroup(group) => &group.metadata,
            Self::Autoscaler(autoscaler) => &autoscaler.metadata,
        };
        metadata.name.as_deref().unwrap_or_default()
    }
}

/// The kind of a child to delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildKind {
    /// A pod.
    Pod,
    /// A Service.
    Service,
    /// A batch Job (an MPIJob's launcher), deleted with its pods.
    Job,
    /// The job's PodGroup (see [`crate::gang`]).
    PodGroup,
    /// A PyTorchJob's HorizontalPodAutoscaler.
    Autoscaler,
}

/// A child to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    /// Its kind.
    pub kind: ChildKind,
    /// Its name, in the job's namespace.
    pub name: String,
    /// The grace period of a pod's deletion, when not its own: a pod whose training had its
    /// whole checkpoint window already is not given another.
    pub grace_seconds: Option<i64>,
}
