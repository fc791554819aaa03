//! A job's children: which objects belong to it, and the engine's view of the job with them.
//!
//! The operator reads children from its watch caches, `kubectl eto` from the API server; both
//! look for the names [`Children::wanted`] gives and keep what [`Children::controlled`] keeps,
//! so that the plugin's answers are the operator's. A child belongs to a job when the job
//! controls it (its controller owner reference carries the job's uid), or, for the pods of a
//! launcher run by a batch Job (see [`crate::job::Coordinator::runs_in_a_batch_job`]), when that Job
//! controls it. An object holding a child's name that the job does not control is not its
//! child (see [`crate::plan::TakenName`]).

use std::sync::Arc;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::gang::{self, Gang};
use crate::job::{JobRef, controlled_by};
use crate::plan::{Observed, RejectedPod, SecretPresence, TakenName};
use crate::pod_group::PodGroup;
use crate::scaling::Scaler;
use crate::{names, pods};

/// The names of a job's children, to look up in its namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The launcher's batch Job, for a kind whose launcher is one
    /// (see [`crate::job::Coordinator::runs_in_a_batch_job`]).
    pub launcher_job: Option<String>,
    /// The headless Service of the workers.
    pub service: String,
    /// The headless Services a kind has one per pod (see
    /// [`crate::job::ServedJob::pod_service_names`]).
    pub pod_services: Vec<String>,
    /// The discovery ConfigMap.
    pub config_map: String,
    /// The ServiceAccount, Role and RoleBinding of a launcher pod
    /// (see [`crate::job::Coordinator::has_own_rbac`]).
    pub launcher_rbac: Option<String>,
    /// The PodGroup, when the operator uses a gang scheduler.
    pub pod_group: String,
    /// The HorizontalPodAutoscaler, for a kind whose jobs may have one.
    pub autoscaler: Option<String>,
}

/// A job's children, and the scale requests of a kind they scale
/// ([`crate::job::Kind::scaled_by_requests`]).
#[derive(Clone, Debug, Default)]
pub struct Children {
    /// Its pods, workers and launcher.
    pub pods: Vec<Arc<Pod>>,
    /// The last state of its pods that the watch saw deleted lately.
    pub departed: Vec<Arc<Pod>>,
    /// The launcher's batch Job (see [`crate::job::Coordinator::runs_in_a_batch_job`]).
    pub launcher_job: Option<Arc<BatchJob>>,
    /// The headless Service of its workers.
    pub worker_service: Option<Arc<Service>>,
    /// The headless Services of its pods, one per pod.
    pub pod_services: Vec<Arc<Service>>,
    /// Its ConfigMap.
    pub config_map: Option<Arc<ConfigMap>>,
    /// Its launcher pod's ServiceAccount.
    pub service_account: Option<Arc<ServiceAccount>>,
    /// Its launcher pod's Role.
    pub role: Option<Arc<Role>>,
    /// Its launcher pod's RoleBinding.
    pub role_binding: Option<Arc<RoleBinding>>,
    /// The scale requests that select it.
    pub scalers: Vec<Scaler>,
    /// Its PodGroup.
    pub pod_group: Option<PodGroup>,
    /// Its HorizontalPodAutoscaler.
    pub autoscaler: Option<Arc<HorizontalPodAutoscaler>>,
}

fn kept<T>(object: Option<Arc<T>>, uid: &str, meta: impl Fn(&T) -> &ObjectMeta) -> Option<Arc<T>> {
    object.filter(|object| controlled_by(meta(object), uid))
}

impl Children {
    /// The names to look up for `job`'s children.
    pub fn wanted(job: JobRef<'_>) -> Wanted {
        let name = job.name();
        let kind = job.kind();
        Wanted {
            launcher_job: (kind.vocabulary().coordinator.runs_in_a_batch_job)
                .then(|| kind.launcher_name(name)),
            service: kind.service_name(name),
            pod_services: job.pod_service_names(),
            config_map: names::config_map(name),
            launcher_rbac: (kind.vocabulary().coordinator.has_own_rbac)
                .then(|| names::launcher_rbac(name)),
            pod_group: gang::pod_group_name(job).to_string(),
            autoscaler: kind
                .autoscaled_by_metrics()
                .then(|| names::autoscaler(name)),
        }
    }

    /// Of `found` (objects found under the [`Wanted`] names, and pods that may be the job's),
    /// what belongs to `job`: what it controls, the pods its launcher Job controls, the RBAC
    /// objects of a launcher pod, and the requests of a kind they scale.
    pub fn controlled(job: JobRef<'_>, found: Self) -> Self {
        let uid = job.uid();
        let launcher = job.kind().vocabulary().coordinator;
        let rbac = launcher.has_own_rbac;
        let launcher_job = kept(found.launcher_job, uid, |job| &job.metadata)
            .filter(|_| launcher.runs_in_a_batch_job);
        let launcher_uid = launcher_job
            .as_ref()
            .and_then(|launcher| launcher.metadata.uid.clone());
        let pods = found
            .pods
            .into_iter()
            .filter(|pod| {
                controlled_by(&pod.metadata, uid)
                    || launcher_uid
                        .as_deref()
                        .is_some_and(|launcher| controlled_by(&pod.metadata, launcher))
            })
            .collect();
        let departed = found
            .departed
            .into_iter()
            .filter(|pod| controlled_by(&pod.metadata, uid))
            .collect();
        Self {
            pods,
            departed,
            launcher_job,
            worker_service: kept(found.worker_service, uid, |s| &s.metadata),
            pod_services: found
                .pod_services
                .into_iter()
                .filter(|service| controlled_by(&service.metadata, uid))
                .collect(),
            config_map: kept(found.config_map, uid, |c| &c.metadata),
            service_account: kept(found.service_account, uid, |a| &a.metadata).filter(|_| rbac),
            role: kept(found.role, uid, |r| &r.metadata).filter(|_| rbac),
            role_binding: kept(found.role_binding, uid, |b| &b.metadata).filter(|_| rbac),
            scalers: if job.kind().scaled_by_requests() {
                found.scalers
            } else {
                Vec::new()
            },
            pod_group: found
                .pod_group
                .filter(|group| controlled_by(&group.metadata, uid)),
            autoscaler: kept(found.autoscaler, uid, |a| &a.metadata)
                .filter(|_| job.kind().autoscaled_by_metrics()),
        }
    }

    /// The engine's view of `job` with these children; `taken` are names of its children
    /// found held by objects it does not control, `rejected_pod` a pod the API server
    /// refused to create, `gang` the operator's gang scheduling.
    pub fn observed<'a>(
        &'a self,
        job: JobRef<'a>,
        ssh_secret: SecretPresence,
        taken: &'a [TakenName],
        rejected_pod: Option<&'a RejectedPod>,
        gang: Gang<'a>,
    ) -> Observed<'a> {
        Observed {
            job,
            launcher_job: self.launcher_job.as_deref(),
            pods: self.pods.iter().map(AsRef::as_ref).collect(),
            departed: self.departed.iter().map(AsRef::as_ref).collect(),
            worker_service: self.worker_service.as_deref(),
            pod_services: self.pod_services.iter().map(AsRef::as_ref).collect(),
            config_map: self.config_map.as_deref(),
            service_account: self.service_account.as_deref(),
            role: self.role.as_deref(),
            role_binding: self.role_binding.as_deref(),
            ssh_secret,
            scalers: &self.scalers,
            taken,
            rejected_pod,
            gang,
            pod_group: self.pod_group.as_ref(),
            node_warnings: &[],
            group_report: None,
            earlier_progress: None,
            autoscaler: self.autoscaler.as_deref(),
        }
    }

    /// The pod of the job's coordinator (see [`crate::job::Coordinator`]): its launcher
    /// (the newest pod of a launcher Job), its Master or its rendezvous store.
    pub fn coordinator_pod(&self, job: JobRef<'_>) -> Option<&Pod> {
        let role_label = job.kind().vocabulary().role_label;
        self.pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|pod| pods::label(pod, role_label) == Some(job.coordinator_role()))
            .max_by_key(|pod| pod.metadata.creation_timestamp.clone())
    }

    /// The worker pods, by index.
    pub fn workers(&self, job: JobRef<'_>) -> Vec<&Pod> {
        let mut workers: Vec<(u32, &Pod)> = self
            .pods
            .iter()
            .filter_map(|pod| {
                let index = names::worker_index(job.name(), pod.metadata.name.as_deref()?)?;
                Some((index, pod.as_ref()))
            })
            .collect();
        workers.sort_by_key(|(index, _)| *index);
        workers.into_iter().map(|(_, pod)| pod).collect()
    }

    /// The workers `job`'s status lists that are not among these children: gone, or not seen
    /// yet.
    pub fn missing_workers(&self, job: JobRef<'_>) -> Vec<String> {
        job.status()
            .target_workers
            .into_iter()
            .filter(|worker| {
                !self
                    .pods
                    .iter()
                    .any(|pod| pod.metadata.name.as_deref() == Some(worker.as_str()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::{mpi_job, training_job};

    fn owned_by(name: &str, uid: &str) -> serde_json::Value {
        json!({"name": name, "ownerReferences": [
            {"apiVersion": "v1", "kind": "X", "name": "owner", "uid": uid, "controller": true}]})
    }

    fn pod(name: &str, uid: &str, role: &str) -> Arc<Pod> {
        let mut metadata = owned_by(name, uid);
        metadata["labels"] =
            json!({"training-job-role": role, "training.kubeflow.org/job-role": role});
        Arc::new(serde_json::from_value(json!({"metadata": metadata})).unwrap())
    }

    #[test]
    fn a_job_keeps_what_it_controls_and_its_launcher_jobs_pods() {
        let mut training = training_job();
        training.metadata.uid = Some("tj".into());
        let job = JobRef::new(&training);
        let wanted = Children::wanted(job);
        assert_eq!(wanted.launcher_job, None);
        assert_eq!(wanted.launcher_rbac.as_deref(), Some("mnist-launcher"));
        let found = Children {
            pods: vec![
                pod("mnist-worker-0", "tj", "worker"),
                pod("mnist-worker-1", "someone-else", "worker"),
                pod("mnist-launcher", "tj", "launcher"),
            ],
            departed: vec![
                pod("mnist-worker-2", "tj", "worker"),
                pod("mnist-worker-2", "someone-else", "worker"),
            ],
            config_map: Some(Arc::new(
                serde_json::from_value(json!({"metadata": owned_by("mnist-config", "other")}))
                    .unwrap(),
            )),
            ..Children::default()
        };
        let children = Children::controlled(job, found);
        let names: Vec<_> = children
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["mnist-worker-0", "mnist-launcher"]);
        assert_eq!(children.departed.len(), 1, "its own departed pods only");
        assert!(children.config_map.is_none(), "held by another object");
        assert_eq!(
            children
                .coordinator_pod(job)
                .and_then(|p| p.metadata.name.clone())
                .as_deref(),
            Some("mnist-launcher")
        );

        let mut mpi = mpi_job();
        mpi.metadata.uid = Some("mj".into());
        let job = JobRef::new(&mpi);
        assert_eq!(
            Children::wanted(job).launcher_job.as_deref(),
            Some("pi-launcher")
        );
        assert_eq!(Children::wanted(job).launcher_rbac, None);
        let mut launcher_job: BatchJob =
            serde_json::from_value(json!({"metadata": owned_by("pi-launcher", "mj")})).unwrap();
        launcher_job.metadata.uid = Some("lj".into());
        let found = Children {
            pods: vec![
                pod("pi-worker-0", "mj", "worker"),
                pod("pi-launcher-x", "lj", "launcher"),
            ],
            launcher_job: Some(Arc::new(launcher_job)),
            ..Children::default()
        };
        let children = Children::controlled(job, found);
        assert_eq!(children.pods.len(), 2, "the launcher Job's pod too");
        assert_eq!(children.workers(job).len(), 1);
    }
}
