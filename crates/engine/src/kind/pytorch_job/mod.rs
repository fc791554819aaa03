//! `PyTorchJob` (`kubeflow.org/v1`), Kubeflow training-operator v1's kind: what it contributes
//! to the engine. v1's defaults ([`Defaulted`]), its pods ([`pod`]) and the environment they
//! get ([`env`]), the headless Service of each pod ([`service`]) and its status as v1's users
//! read it ([`status`]), and the HorizontalPodAutoscaler of a job that sets
//! `elasticPolicy.metrics` ([`v1_autoscaler`]).
//!
//! The engine runs a PyTorchJob with a Master as it runs the other kinds, the Master in the
//! launcher's place (see [`MASTER_POD`]): its end is the run's, and its
//! loss to the platform ends the run, not the job. Each run numbers its Workers from 0
//! ([`crate::job::WorkerNames::PerRun`]), since a static job's ranks are its pods' indices.

pub mod env;
pub mod lighthouse_page;
pub(crate) mod metrics;
pub mod objects;
pub mod pod;
pub mod rendezvous;
pub mod replica_groups;
pub mod replica_groups_status;
pub mod report_source;
pub mod service;
pub mod status;
pub mod v1_autoscaler;
pub mod validation;

use crate::status::JobStatus;
use eto_api::common::CleanPodPolicy;
use eto_api::common::ReplicaRestartPolicy;
use eto_api::pytorch_job::{
    DEFAULT_PORT, MASTER, PORT_NAME, PYTORCH_CONTAINER, PyTorchElasticPolicy, PyTorchReplicaSpec,
    PyTorchReplicaType, TRAINING_OPERATOR, WORKER,
};
use eto_api::{PyTorchJob, PyTorchJobStatus};
use k8s_openapi::api::core::v1::{Container, Pod, PodTemplateSpec};

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::effective_spec::EffectiveSpec;
use crate::event_spec::EventSpec;
use crate::group_report::{GroupReport, ReportSource};
use crate::job::InvalidSpec;
use crate::job::{
    Coordinator, GroupLosses, GroupedWorkers, Kind, ReportingCoordinator, ServedJob, ShownGroups,
    SilentGroups, Vocabulary, WorkerNames,
};
use crate::names;

/// The label naming the operator on every pod and Service of a PyTorchJob, as Arena and Kueue
/// select them.
pub const OPERATOR_NAME_LABEL: &str = "training.kubeflow.org/operator-name";
/// Its value: v1's controller's name.
pub const OPERATOR_NAME: &str = "pytorchjob-controller";
/// The label holding the job's name.
pub const JOB_NAME_LABEL: &str = "training.kubeflow.org/job-name";
/// The label holding a pod's replica type, lower case (`master`, `worker`).
pub const REPLICA_TYPE_LABEL: &str = "training.kubeflow.org/replica-type";
/// The label holding a pod's index within its replica type.
pub const REPLICA_INDEX_LABEL: &str = "training.kubeflow.org/replica-index";
/// The label marking the pod of rank 0 (`master`): the Master, or worker 0 of a job without
/// one.
pub const JOB_ROLE_LABEL: &str = "training.kubeflow.org/job-role";

/// The container torchrun runs in: the one named `pytorch`, else the first.
pub(crate) fn training_container(
    spec: &mut k8s_openapi::api::core::v1::PodSpec,
) -> Option<&mut Container> {
    let position = spec
        .containers
        .iter()
        .position(|c| c.name == PYTORCH_CONTAINER)
        .unwrap_or(0);
    spec.containers.get_mut(position)
}

/// training-operator v1's Master, which trains as rank 0 beside the workers.
pub const MASTER_POD: Coordinator = Coordinator {
    trains: true,
    ..Coordinator::plain("Master")
};

/// The store of the torchrun rendezvous eto hosts for an elastic job (see [`rendezvous`]):
/// the workers train as one group that re-forms at it.
pub const RENDEZVOUS_STORE: Coordinator = Coordinator {
    only_serves: true,
    group_reforms: true,
    ..Coordinator::plain("RendezvousStore")
};

/// The TorchFT Lighthouse of a job of replica groups (see [`replica_groups`]): each group
/// comes and goes alone.
pub const LIGHTHOUSE: Coordinator = Coordinator {
    only_serves: true,
    groups_stand_alone: true,
    ..Coordinator::plain("Lighthouse")
};

/// Its names, fields and labels.
pub const VOCABULARY: Vocabulary = Vocabulary {
    name: "PyTorchJob",
    original_operator: "training-operator v1",
    resource: "pytorchjobs.kubeflow.org",
    aliases: &["pytorchjob", "pytorchjobs"],
    min_field: "Worker replicas",
    bound_paths: (
        "spec.elasticPolicy.minReplicas",
        "spec.elasticPolicy.maxReplicas",
    ),
    suspend_keys: &["spec", "runPolicy", "suspend"],
    suspend_field: "spec.runPolicy.suspend",
    suspended_reason: "PyTorchJobSuspended",
    resumed_reason: "PyTorchJobResumed",
    operator_label: (OPERATOR_NAME_LABEL, OPERATOR_NAME),
    job_name_label: JOB_NAME_LABEL,
    role_label: REPLICA_TYPE_LABEL,
    launcher_role: "master",
    launcher_called: "Master",
    launcher_name: |job| pod_name(job, PyTorchReplicaType::Master, 0),
    index_label: REPLICA_INDEX_LABEL,
    service_name: |job| pod_name(job, PyTorchReplicaType::Master, 0),
    worker_host: |job, _, index| names::worker(job, index),
    coordinator: MASTER_POD,
    worker_names: WorkerNames::PerRun,
    ssh_secret_type: "Opaque",
    worker_pod: objects::worker_pod,
    supporting_objects: objects::supporting_objects,
    launcher_objects: objects::launcher_objects,
    launcher_host: |_| None,
    autoscaler: Some(v1_autoscaler::autoscaler),
    training_container: Some(eto_api::pytorch_job::PYTORCH_CONTAINER),
    api_resource: || kube::core::ApiResource::erase::<PyTorchJob>(&()),
    reference: None,
    managed_by_eto,
    stored_status,
    scaled_by_requests: false,
    served_by_default: false,
};

impl ServedJob for PyTorchJob {
    fn kind(&self) -> Kind {
        Kind::PYTORCH_JOB
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    /// The Master's pod template.
    fn coordinator_template(&self) -> Option<&PodTemplateSpec> {
        self.spec
            .pytorch_replica_specs
            .get(MASTER)?
            .template
            .as_ref()
    }

    fn worker_template(&self) -> Option<&PodTemplateSpec> {
        self.spec
            .pytorch_replica_specs
            .get(WORKER)?
            .template
            .as_ref()
    }

    fn engine_status(&self) -> JobStatus {
        self.status
            .as_ref()
            .map(status::to_engine)
            .unwrap_or_default()
    }

    fn validate(&self) -> Result<EffectiveSpec, InvalidSpec> {
        validation::validate(self)
    }

    fn started_by_another_operator(&self) -> bool {
        self.status.as_ref().is_some_and(|status| {
            super::kubeflow_status::started_elsewhere_by(&status.conditions, &status.eto)
        })
    }

    /// The Worker replica's (v1's default if unset; `Never` without Workers): it decides
    /// whether a lost rank of a static job, or a lost group of an elastic one, restarts.
    fn replica_restart_policy(&self) -> Option<ReplicaRestartPolicy> {
        Some(
            Defaulted::of(self)
                .worker
                .map_or(ReplicaRestartPolicy::Never, |worker| worker.restart_policy),
        )
    }

    /// v1's rule for an elastic job: the first Worker to succeed ends the run.
    fn first_worker_success_decides(&self) -> bool {
        self.spec.elastic_policy.is_some()
    }

    /// Its Master's and its Workers' (see [`service`]), as many as the spec or the recorded
    /// target has; for a job whose rendezvous eto hosts, the one Service that names all its
    /// pods.
    fn pod_service_names(&self) -> Vec<String> {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        if self.coordinator().only_serves {
            return vec![rendezvous::service_name(name)];
        }
        let recorded = self
            .status
            .as_ref()
            .map_or(0, |status| status.eto.target_workers.len());
        let workers = Defaulted::of(self)
            .worker
            .map_or(0, |worker| worker.replicas)
            .max(u32::try_from(recorded).unwrap_or(u32::MAX));
        std::iter::once(pod_name(name, PyTorchReplicaType::Master, 0))
            .chain((0..workers).map(|index| names::worker(name, index)))
            .collect()
    }

    /// A job of replica groups (see [`replica_groups`]) has a Lighthouse; an elastic job
    /// whose rendezvous eto hosts (see [`rendezvous`]) a rendezvous store; any other its
    /// Master (if any).
    fn coordinator(&self) -> Coordinator {
        if replica_groups::ReplicaGroups::of(self).is_some() {
            LIGHTHOUSE
        } else if rendezvous::HostedRendezvous::of(self).is_some() {
            RENDEZVOUS_STORE
        } else {
            MASTER_POD
        }
    }

    /// An elastic job whose rendezvous eto hosts, or of replica groups, replaces its workers
    /// under new names; any other keeps its ranks' names.
    fn worker_names(&self) -> WorkerNames {
        if self.coordinator().only_serves {
            WorkerNames::NeverReused
        } else {
            WorkerNames::PerRun
        }
    }

    fn grouped_workers(&self) -> Option<&dyn GroupedWorkers> {
        Some(self)
    }

    fn reporting_coordinator(&self) -> Option<&dyn ReportingCoordinator> {
        Some(self)
    }

    fn coordinator_role(&self) -> &'static str {
        match self.coordinator() {
            RENDEZVOUS_STORE => rendezvous::STORE_REPLICA_TYPE,
            LIGHTHOUSE => replica_groups::LIGHTHOUSE_REPLICA_TYPE,
            _ => VOCABULARY.launcher_role,
        }
    }

    fn launcher_name(&self) -> String {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        match self.coordinator() {
            RENDEZVOUS_STORE => rendezvous::store_name(name),
            LIGHTHOUSE => replica_groups::lighthouse_name(name),
            _ => Kind::PYTORCH_JOB.launcher_name(name),
        }
    }

    fn min_field(&self) -> &'static str {
        if self.coordinator().only_serves {
            "elasticPolicy.minReplicas"
        } else {
            Kind::PYTORCH_JOB.vocabulary().min_field
        }
    }

    fn launcher_called(&self) -> &'static str {
        match self.coordinator() {
            RENDEZVOUS_STORE => "rendezvous store",
            LIGHTHOUSE => "Lighthouse",
            _ => Kind::PYTORCH_JOB.vocabulary().launcher_called,
        }
    }
}

impl GroupedWorkers for PyTorchJob {
    /// A replica group no live Worker holds takes the lowest group id free, first by a
    /// waiting spare, then by new Workers, each pod a rank in it (see
    /// [`replica_groups::seat`]).
    fn seat_workers(
        &self,
        groups: u32,
        target: &[u32],
        pods: &std::collections::BTreeMap<u32, &Pod>,
        new: &mut std::collections::BTreeMap<u32, Pod>,
    ) -> std::collections::BTreeMap<u32, std::collections::BTreeMap<String, String>> {
        let Some(replica_groups) = replica_groups::ReplicaGroups::of(self) else {
            return std::collections::BTreeMap::new();
        };
        let created: Vec<u32> = new.keys().copied().collect();
        let seating = replica_groups::seat(
            replica_groups.pods_per_group,
            groups,
            target,
            &created,
            pods,
        );
        for (index, pod) in new.iter_mut() {
            match seating.new.get(index) {
                Some(place) => replica_groups::give_place(pod, &replica_groups, *place),
                None => replica_groups::wait_as_spare(pod),
            }
        }
        seating
            .promoted
            .into_iter()
            .map(|(index, id)| (index, replica_groups::promoted_labels(id)))
            .collect()
    }

    /// Spare replica groups are kept at every size: eto gives each its place.
    fn spares_kept(&self) -> crate::spares::KeptWhen {
        if replica_groups::ReplicaGroups::of(self).is_some() {
            crate::spares::KeptWhen::Always
        } else {
            crate::spares::KeptWhen::AtMaximum
        }
    }

    /// The Workers of replica groups of one pod without a group id (see
    /// [`replica_groups::spares_among`]).
    fn waiting_spares(
        &self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
    ) -> std::collections::BTreeSet<u32> {
        replica_groups::ReplicaGroups::of(self)
            .map(|groups| replica_groups::spares_among(&groups, pods))
            .unwrap_or_default()
    }

    /// The Workers of replica groups of several pods, by group (see
    /// [`replica_groups::groups_of_several`]).
    fn worker_groups(
        &self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
    ) -> std::collections::BTreeMap<u32, u32> {
        replica_groups::ReplicaGroups::of(self)
            .map(|groups| replica_groups::groups_of_several(&groups, pods))
            .unwrap_or_default()
    }

    /// The Workers of replica groups whose Manager stopped heartbeating the Lighthouse (see
    /// [`crate::group_report::QuorumReport::silent_groups`]); the page is read again within the
    /// grace, and when a Manager that stopped will be due.
    fn silent_group_workers(
        &self,
        pods: &std::collections::BTreeMap<u32, &Pod>,
        report: &GroupReport,
        grace: Duration,
    ) -> Option<SilentGroups> {
        let quorum = report.quorum.as_ref()?;
        let silent = quorum.silent_groups(grace);
        Some(SilentGroups {
            workers: pods
                .iter()
                .filter_map(|(index, pod)| {
                    let age = silent.get(&replica_groups::group_of(pod)?)?;
                    Some((*index, *age))
                })
                .collect(),
            read_again: quorum.next_silence_due(grace),
        })
    }

    /// The pods of a replica group (see [`replica_groups`]).
    fn pods_per_group(&self) -> u32 {
        replica_groups::ReplicaGroups::of(self).map_or(1, |groups| groups.pods_per_group)
    }

    /// The replica groups' quorum (see [`replica_groups_status::show`]).
    fn show_groups(
        &self,
        report: Option<&GroupReport>,
        groups: usize,
        status: &mut JobStatus,
    ) -> ShownGroups {
        replica_groups_status::show(report, groups, status)
    }

    /// Survivors restarted, and the groups' state lost (see
    /// [`replica_groups_status::record_losses`]).
    fn record_group_losses(
        &self,
        losses: &GroupLosses<'_>,
        report: Option<&GroupReport>,
        status: &mut JobStatus,
    ) -> Vec<EventSpec> {
        replica_groups_status::record_losses(losses, report, status)
    }
}

impl ReportingCoordinator for PyTorchJob {
    fn report_source(&self, pods: &[&Pod]) -> Option<ReportSource> {
        report_source::source(self, pods)
    }

    fn progress_beside(&self, pods: &[&Pod]) -> Option<ReportSource> {
        report_source::progress_beside(self, pods)
    }

    fn heartbeat_timeout(&self) -> Option<Duration> {
        self.coordinator()
            .group_reforms
            .then(|| rendezvous::heartbeat_timeout(self))
    }
}

/// A stored status read without the rest of the job (a job that does not decode), in the
/// engine's shape.
pub fn stored_status(value: serde_json::Value) -> Option<JobStatus> {
    serde_json::from_value::<PyTorchJobStatus>(value)
        .ok()
        .map(|status| status::to_engine(&status))
}

/// Processes per pod when the spec names none, as v1 defaults it.
pub const DEFAULT_NPROC_PER_NODE: &str = "auto";

/// A PyTorchJob's spec as training-operator v1 reads it after its defaulting, which v1
/// applies in memory and never writes back (nor does eto: Kueue and Arena read the spec as
/// written).
#[derive(Clone, Debug, PartialEq)]
pub struct Defaulted<'a> {
    /// The Master, if the spec has one.
    pub master: Option<Replica<'a>>,
    /// The Workers, if the spec has them.
    pub worker: Option<Replica<'a>>,
    /// `spec.nprocPerNode`: `auto` when unset, unless the deprecated
    /// `elasticPolicy.nProcPerNode` is set; then `None`.
    pub nproc_per_node: Option<String>,
    /// `runPolicy.cleanPodPolicy`: `None` when unset.
    pub clean_pod_policy: CleanPodPolicy,
    /// The Worker bounds of an elastic job.
    pub elastic: Option<ElasticBounds<'a>>,
}

/// One replica type after v1's defaulting.
#[derive(Clone, Debug, PartialEq)]
pub struct Replica<'a> {
    /// Its pods: `replicas`, 1 when unset.
    pub replicas: u32,
    /// `restartPolicy`, `OnFailure` when unset.
    pub restart_policy: ReplicaRestartPolicy,
    /// Its pod template, if the spec has one.
    pub template: Option<&'a PodTemplateSpec>,
    /// The port of its `pytorch` container named `pytorchjob-port`, 23456 when none is.
    pub port: i32,
}

/// An elastic job's Worker bounds after v1's defaulting: one bound set gives the other; none
/// gives the Worker replicas to both.
#[derive(Clone, Debug, PartialEq)]
pub struct ElasticBounds<'a> {
    /// Fewest Workers.
    pub min: u32,
    /// Most Workers.
    pub max: u32,
    /// The policy as written, for torchrun's other settings.
    pub policy: &'a PyTorchElasticPolicy,
}

impl<'a> Defaulted<'a> {
    /// `job`'s spec as v1 reads it. Counts below zero read as zero; validation reports them.
    pub fn of(job: &'a PyTorchJob) -> Self {
        let replica = |key: &str| job.spec.pytorch_replica_specs.get(key).map(Replica::of);
        let master = replica(MASTER);
        let worker = replica(WORKER);
        let elastic = job.spec.elastic_policy.as_ref().map(|policy| {
            let bound = |value: Option<i32>| value.map(|v| u32::try_from(v).unwrap_or(0));
            let workers = worker.as_ref().map_or(0, |w| w.replicas);
            let (min, max) = match (bound(policy.min_replicas), bound(policy.max_replicas)) {
                (Some(min), Some(max)) => (min, max),
                (None, Some(max)) => (max, max),
                (Some(min), None) => (min, min),
                (None, None) => (workers, workers),
            };
            ElasticBounds { min, max, policy }
        });
        let deprecated_nproc = elastic
            .as_ref()
            .is_some_and(|e| e.policy.n_proc_per_node.is_some());
        let nproc_per_node = job
            .spec
            .nproc_per_node
            .clone()
            .or_else(|| (!deprecated_nproc).then(|| DEFAULT_NPROC_PER_NODE.to_string()));
        let clean_pod_policy = job
            .spec
            .run_policy
            .as_ref()
            .and_then(|policy| policy.clean_pod_policy)
            .unwrap_or(CleanPodPolicy::None);
        Self {
            master,
            worker,
            nproc_per_node,
            clean_pod_policy,
            elastic,
        }
    }

    /// Pods of every type: the world of a static job, in pods.
    pub fn total_replicas(&self) -> u32 {
        [&self.master, &self.worker]
            .into_iter()
            .flatten()
            .map(|replica| replica.replicas)
            .sum()
    }

    /// The replica of `type_`, if the spec has it.
    pub fn replica(&self, type_: PyTorchReplicaType) -> Option<&Replica<'a>> {
        match type_ {
            PyTorchReplicaType::Master => self.master.as_ref(),
            PyTorchReplicaType::Worker => self.worker.as_ref(),
        }
    }
}

impl<'a> Replica<'a> {
    fn of(spec: &'a PyTorchReplicaSpec) -> Self {
        let template = spec.template.as_ref();
        let port = template
            .and_then(|t| pytorch_container(t))
            .and_then(|container| {
                container
                    .ports
                    .iter()
                    .flatten()
                    .find(|port| port.name.as_deref() == Some(PORT_NAME))
            })
            .map_or(DEFAULT_PORT, |port| port.container_port);
        Self {
            replicas: spec
                .replicas
                .map_or(1, |replicas| u32::try_from(replicas).unwrap_or(0)),
            restart_policy: spec
                .restart_policy
                .unwrap_or(ReplicaRestartPolicy::OnFailure),
            template,
            port,
        }
    }
}

/// The container v1 configures in `template`: the one named `pytorch`, else the first.
pub fn pytorch_container(template: &PodTemplateSpec) -> Option<&Container> {
    let containers = &template.spec.as_ref()?.containers;
    containers
        .iter()
        .find(|c| c.name == PYTORCH_CONTAINER)
        .or_else(|| containers.first())
}

/// The lower-case name of `type_`, as pod names and labels have it.
pub fn type_label(type_: PyTorchReplicaType) -> &'static str {
    match type_ {
        PyTorchReplicaType::Master => "master",
        PyTorchReplicaType::Worker => "worker",
    }
}

/// Pod `index` of `type_`, and its Service: `<job>-master-0`, `<job>-worker-<index>`.
pub fn pod_name(job: &str, type_: PyTorchReplicaType, index: u32) -> String {
    format!("{job}-{}-{index}", type_label(type_))
}

/// Whether eto runs `job`, a PyTorchJob as JSON: `spec.runPolicy.managedBy` unset or
/// training-operator v1's (eto runs in its place); MultiKueue's is left alone.
pub fn managed_by_eto(job: &serde_json::Value) -> bool {
    job["spec"]["runPolicy"]["managedBy"]
        .as_str()
        .is_none_or(|manager| manager == TRAINING_OPERATOR)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    pub(super) fn job(spec: serde_json::Value) -> PyTorchJob {
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "ddp", "namespace": "team", "uid": "u-1"},
            "spec": spec
        }))
        .unwrap()
    }

    fn pod(ports: serde_json::Value) -> serde_json::Value {
        json!({"spec": {"containers": [
            {"name": "sidecar", "image": "proxy", "ports": [{"name": "pytorchjob-port", "containerPort": 1}]},
            {"name": "pytorch", "image": "torch", "ports": ports}
        ]}})
    }

    #[test]
    fn v1s_defaults_fill_what_the_spec_leaves_out() {
        let job = job(json!({"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": pod(json!([]))},
            "Worker": {"template": pod(json!([{"name": "pytorchjob-port", "containerPort": 29500}])), "restartPolicy": "ExitCode"}
        }}));
        let defaulted = Defaulted::of(&job);
        let master = defaulted.master.clone().unwrap();
        assert_eq!(
            (master.replicas, master.restart_policy, master.port),
            (1, ReplicaRestartPolicy::OnFailure, DEFAULT_PORT)
        );
        let worker = defaulted.worker.clone().unwrap();
        assert_eq!(
            (worker.replicas, worker.restart_policy, worker.port),
            (1, ReplicaRestartPolicy::ExitCode, 29500)
        );
        assert_eq!(defaulted.nproc_per_node.as_deref(), Some("auto"));
        assert_eq!(defaulted.clean_pod_policy, CleanPodPolicy::None);
        assert_eq!(defaulted.elastic, None);
        assert_eq!(defaulted.total_replicas(), 2);
    }

    #[test]
    fn elastic_bounds_default_from_each_other_then_from_the_workers() {
        let cases = [
            (json!({"minReplicas": 2, "maxReplicas": 5}), (2, 5)),
            (json!({"maxReplicas": 5}), (5, 5)),
            (json!({"minReplicas": 2}), (2, 2)),
            (json!({}), (3, 3)),
        ];
        for (policy, bounds) in cases {
            let job = job(json!({
                "elasticPolicy": policy,
                "pytorchReplicaSpecs": {"Worker": {"replicas": 3}}
            }));
            let elastic = Defaulted::of(&job).elastic.unwrap();
            assert_eq!((elastic.min, elastic.max), bounds, "{policy}");
        }
    }

    #[test]
    fn the_deprecated_nproc_field_leaves_nproc_per_node_unset() {
        let deprecated = job(json!({
            "elasticPolicy": {"nProcPerNode": 2},
            "pytorchReplicaSpecs": {"Worker": {"replicas": 3}}
        }));
        assert_eq!(Defaulted::of(&deprecated).nproc_per_node, None);
        let explicit = job(json!({"nprocPerNode": "4", "pytorchReplicaSpecs": {}}));
        assert_eq!(
            Defaulted::of(&explicit).nproc_per_node.as_deref(),
            Some("4")
        );
    }

    #[test]
    fn pods_are_named_by_type_and_index_and_managed_by_says_who_runs_the_job() {
        assert_eq!(
            pod_name("ddp", PyTorchReplicaType::Master, 0),
            "ddp-master-0"
        );
        assert_eq!(
            pod_name("ddp", PyTorchReplicaType::Worker, 3),
            "ddp-worker-3"
        );
        let managed_by =
            |value: serde_json::Value| json!({"spec": {"runPolicy": {"managedBy": value}}});
        assert!(managed_by_eto(&json!({"spec": {}})));
        assert!(managed_by_eto(&managed_by(json!(
            "kubeflow.org/training-operator"
        ))));
        assert!(!managed_by_eto(&managed_by(json!(
            "kueue.x-k8s.io/multikueue"
        ))));
    }
}
