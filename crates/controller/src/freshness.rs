//! Waiting until the caches show a reconcile's own writes.
//!
//! Every kind has its own watch, and the watches are not ordered with each other. After a
//! reconcile creates worker `w-3` and records it in `status.targetWorkers`, the next reconcile
//! may see the new status before the new pod, and take `w-3` for deleted (replacing a healthy
//! worker); or see the new pod before the new status, and take `w-3` for a stray (deleting it).
//! So a reconcile that created pods or changed the status ends by waiting until the caches show
//! those writes. kube-runtime never runs two reconciles of one job at once, so the next
//! reconcile of the job starts from caches at least as new as what the last one wrote.
//!
//! The wait is bounded ([`CACHE_WAIT`]): a cache that does not catch up in time (a broken watch,
//! a pod deleted at once by someone else) is logged, and the reconcile ends anyway.

use std::time::Duration;

use eto_engine::job::Kind;
use eto_engine::scaling::ScalerKind;
use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::context::Stores;

/// How long a reconcile waits for the caches to show its writes.
pub const CACHE_WAIT: Duration = Duration::from_secs(10);

/// The writes of one reconcile that the next one must see.
#[derive(Clone, Debug, Default)]
pub struct Written {
    /// Pods that were not in the cache when they were applied.
    pub created_pods: Vec<ObjectRef<Pod>>,
    /// Launcher Jobs that were created: a next reconcile that did not see one would take it
    /// for gone.
    pub created_jobs: Vec<ObjectRef<BatchJob>>,
    /// The job, its kind, and its resourceVersion before a status write that changed it.
    pub status: Option<(Kind, ObjectRef<DynamicObject>, String)>,
    /// The job's requests whose status changed, with their resourceVersion before the write:
    /// a request's status records what it started, and must not be started twice.
    pub requests: Vec<(ScalerKind, ObjectRef<DynamicObject>, String)>,
}

/// Whether `store` no longer shows `object` at resourceVersion `before` (or no longer has it).
fn moved_past(
    store: &Store<DynamicObject>,
    object: &ObjectRef<DynamicObject>,
    before: &str,
) -> bool {
    store
        .get(object)
        .is_none_or(|cached| cached.metadata.resource_version.as_deref() != Some(before))
}

impl Written {
    /// Whether `stores` show every write: each created pod is cached, and the cached job is
    /// no longer the version the status was written over (or is gone).
    fn shown_in(&self, stores: &Stores) -> bool {
        let pods_shown = self
            .created_pods
            .iter()
            .all(|pod| stores.pods.get(pod).is_some());
        let jobs_shown = self
            .created_jobs
            .iter()
            .all(|job| stores.launcher_jobs.get(job).is_some());
        let status_shown = self
            .status
            .as_ref()
            .is_none_or(|(kind, job, before)| moved_past(stores.jobs(*kind), job, before));
        let requests_shown = self.requests.iter().all(|(kind, request, before)| {
            let store = match kind {
                ScalerKind::ScaleIn => &stores.scale_ins,
                ScalerKind::ScaleOut => &stores.scale_outs,
            };
            moved_past(store, request, before)
        });
        pods_shown && jobs_shown && status_shown && requests_shown
    }
}

impl Stores {
    /// Resolves once the caches show `written`, or after `limit`; returns whether they do.
    pub async fn show(&self, written: &Written, limit: Duration) -> bool {
        let mut changes = self.changes.subscribe();
        let shown = async {
            while !written.shown_in(self) {
                if changes.changed().await.is_err() {
                    // No cache is updated any more: the controller is stopping.
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(limit, shown).await.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::ApiResource;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;
    use tokio::sync::watch;

    use super::*;
    use crate::pod_cache::PodCacheWriter;
    use crate::testing::{listed, listed_index, listed_pods};

    fn resource() -> ApiResource {
        ApiResource::erase::<eto_api::TrainingJob>(&())
    }

    /// Stores with no objects, and the writers of the pod and job caches.
    fn stores() -> (Stores, PodCacheWriter, Writer<DynamicObject>) {
        let (pods, pod_writer) = listed_pods(Vec::new());
        let job_writer = listed(Writer::new(resource()), Vec::new());
        let stores = Stores {
            jobs: [
                job_writer.as_reader(),
                listed(Writer::new(Kind::MPI_JOB.api_resource()), Vec::new()).as_reader(),
                listed(Writer::new(Kind::PYTORCH_JOB.api_resource()), Vec::new()).as_reader(),
                listed(Writer::new(Kind::TRAIN_JOB.api_resource()), Vec::new()).as_reader(),
            ],
            launcher_jobs: listed(Writer::default(), Vec::new()).as_reader(),
            pods,
            services: listed(Writer::<Service>::default(), Vec::new()).as_reader(),
            config_maps: listed(Writer::<ConfigMap>::default(), Vec::new()).as_reader(),
            secrets: listed(Writer::<Secret>::default(), Vec::new()).as_reader(),
            service_accounts: listed(Writer::<ServiceAccount>::default(), Vec::new()).as_reader(),
            roles: listed(Writer::<Role>::default(), Vec::new()).as_reader(),
            role_bindings: listed(Writer::<RoleBinding>::default(), Vec::new()).as_reader(),
            autoscalers: listed(Writer::<HorizontalPodAutoscaler>::default(), Vec::new())
                .as_reader(),
            scale_ins: listed(
                Writer::new(ApiResource::erase::<eto_api::ScaleIn>(&())),
                Vec::new(),
            )
            .as_reader(),
            scale_outs: listed(
                Writer::new(ApiResource::erase::<eto_api::ScaleOut>(&())),
                Vec::new(),
            )
            .as_reader(),
            scale_ins_by_job: listed_index(crate::observe::selected_job, &[]),
            scale_outs_by_job: listed_index(crate::observe::selected_job, &[]),
            pod_groups: Writer::new(crate::pod_groups::resource(
                &eto_engine::pod_group::GangScheduler::Volcano,
            ))
            .as_reader(),
            pod_groups_resource: crate::pod_groups::resource(
                &eto_engine::pod_group::GangScheduler::Volcano,
            ),
            warned_nodes: crate::warned_nodes::WarnedNodes::default(),
            changes: watch::channel(()).0,
        };
        (stores, pod_writer, job_writer)
    }

    fn pod(name: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}})).unwrap()
    }

    fn job(resource_version: &str) -> DynamicObject {
        let mut job = DynamicObject::new("mnist", &resource()).within("default");
        job.metadata.resource_version = Some(resource_version.into());
        job
    }

    fn job_ref() -> ObjectRef<DynamicObject> {
        ObjectRef::new_with("mnist", resource()).within("default")
    }

    #[tokio::test]
    async fn nothing_written_is_shown_at_once() {
        let (stores, _, _) = stores();
        assert!(stores.show(&Written::default(), Duration::ZERO).await);
    }

    #[tokio::test]
    async fn a_created_pod_is_shown_once_its_cache_has_it() {
        let (stores, mut pods, _) = stores();
        let written = Written {
            created_pods: vec![ObjectRef::new("w-3").within("default")],
            ..Written::default()
        };
        assert!(
            !stores.show(&written, Duration::ZERO).await,
            "the cache does not have the pod yet"
        );
        let changes = stores.changes.clone();
        let cache = tokio::spawn(async move {
            pods.apply_watcher_event(&watcher::Event::Apply(pod("w-3")));
            changes.send_replace(());
        });
        assert!(stores.show(&written, CACHE_WAIT).await);
        cache.await.unwrap();
    }

    #[tokio::test]
    async fn a_status_write_is_shown_once_the_cached_job_moved_past_it() {
        let (stores, _, mut jobs) = stores();
        jobs.apply_watcher_event(&watcher::Event::Apply(job("7")));
        let written = Written {
            status: Some((Kind::TRAINING_JOB, job_ref(), "7".into())),
            ..Written::default()
        };
        assert!(
            !stores.show(&written, Duration::ZERO).await,
            "the cache still has the version the status was written over"
        );
        let changes = stores.changes.clone();
        let cache = tokio::spawn(async move {
            jobs.apply_watcher_event(&watcher::Event::Apply(job("8")));
            changes.send_replace(());
        });
        assert!(stores.show(&written, CACHE_WAIT).await);
        cache.await.unwrap();
    }
}
