//! What a run's launcher is made of at a reconcile, as its kind builds it: the planner
//! ([`crate::plan`]) decides when a launcher is created and what changes on one that runs;
//! the kind decides what it is ([`super::Vocabulary::launcher_objects`]).

use eto_api::job_status::NodeCooldown;
use k8s_openapi::api::core::v1::ConfigMap;

use crate::child::Child;
use crate::discovery::Host;

/// What a kind builds a run's launcher from.
#[derive(Clone, Copy, Debug)]
pub struct LauncherInputs<'a> {
    /// The hosts of discovery: the ready workers, after a launcher that trains too.
    pub ready: &'a [Host],
    /// Every worker of the target, ready or not, after a launcher that trains too.
    pub target: &'a [Host],
    /// Nodes the launcher avoids.
    pub avoided: &'a [NodeCooldown],
}

/// A run's launcher as its kind builds it now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LauncherObjects {
    /// The ConfigMap the launcher reads its hosts from, applied where it differs, whether the
    /// launcher exists or not.
    pub config_map: Option<ConfigMap>,
    /// The launcher as it would be created now: a pod, or an object that runs one. `None`
    /// when the spec cannot give one (validation reports why).
    pub launcher: Option<Child>,
    /// What changes on a launcher pod that exists and has not finished.
    pub running: RunningLauncher,
}

/// What changes on a launcher pod that runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunningLauncher {
    /// Nothing: a pod that shows nothing of the job (a rendezvous store).
    #[default]
    Left,
    /// Its labels and annotations follow [`LauncherObjects::launcher`]'s: the hosts of
    /// discovery and the job's notice (a launcher pod the job controls).
    Relabelled,
    /// Only the annotations eto shows on pods: the hosts of discovery and the job's notice
    /// (the pod of an MPIJob's launcher Job, which the Job controls).
    Annotated,
}
