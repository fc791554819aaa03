//! The last state of eto's pods that the pod watch saw deleted, kept a while for the
//! reconciles of their jobs (see `eto_engine::plan::Observed::departed`).
//!
//! When a node vanishes, the pod garbage collector marks each of its pods (`DisruptionTarget`,
//! phase `Failed`) and deletes it at once. The cache drops a pod at its delete event, so a
//! reconcile that runs after both events finds the pod gone and would read a deletion by
//! someone, which a `restartPolicy: OnFailure` worker is not replaced for. The object the delete
//! event carries still shows the mark: it is kept here, by namespace and controller uid, for
//! [`KEPT_FOR`] after the event. A pod deleted while the watch was down (the relist finds it
//! gone, with no delete event) leaves nothing here: it reads as deleted, as before.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

/// How long the last state of a deleted pod is kept: far longer than a reconcile takes to
/// follow the delete event, even behind a queue of other jobs.
pub const KEPT_FOR: Duration = Duration::from_secs(600);

/// A namespace and a controller uid.
type Controller = (String, String);

/// The last state of deleted pods, shared by the pod watch that records them and the
/// reconciles that read them.
#[derive(Clone, Default)]
pub struct DepartedPods {
    inner: Arc<Mutex<Departed>>,
}

#[derive(Default)]
struct Departed {
    by_controller: BTreeMap<Controller, Vec<Arc<Pod>>>,
    /// When each pod of `by_controller` was recorded, oldest first, with its controller.
    recorded: VecDeque<(Instant, Controller)>,
}

impl DepartedPods {
    /// Keeps `pod`, deleted at `now`, for its controller of uid `controller`; forgets those
    /// deleted more than [`KEPT_FOR`] before.
    pub fn record(&self, pod: Pod, controller: &str, now: Instant) {
        let uid = controller.to_string();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let mut departed = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        departed.forget_before(now.checked_sub(KEPT_FOR));
        let controller = (namespace, uid);
        departed
            .by_controller
            .entry(controller.clone())
            .or_default()
            .push(Arc::new(pod));
        departed.recorded.push_back((now, controller));
    }

    /// The kept pods in `namespace` whose controller has `uid`, oldest first.
    pub fn controlled_by(&self, namespace: &str, uid: &str) -> Vec<Arc<Pod>> {
        let departed = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        departed
            .by_controller
            .get(&(namespace.to_string(), uid.to_string()))
            .cloned()
            .unwrap_or_default()
    }
}

impl Departed {
    /// Forgets the pods recorded before `cutoff` (none when it is `None`).
    fn forget_before(&mut self, cutoff: Option<Instant>) {
        let Some(cutoff) = cutoff else {
            return;
        };
        while let Some((at, _)) = self.recorded.front()
            && *at < cutoff
        {
            let Some((_, controller)) = self.recorded.pop_front() else {
                break;
            };
            // A controller's pods are recorded in order: its oldest goes first.
            if let Some(pods) = self.by_controller.get_mut(&controller) {
                pods.remove(0);
                if pods.is_empty() {
                    self.by_controller.remove(&controller);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "status": {"phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True"}]},
        }))
        .unwrap()
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .filter_map(|pod| pod.metadata.name.as_deref())
            .collect()
    }

    #[test]
    fn keeps_the_last_state_of_each_controllers_pods_for_a_while() {
        let departed = DepartedPods::default();
        let start = Instant::now();
        departed.record(pod("a-0"), "a", start);
        departed.record(pod("b-0"), "b", start + Duration::from_secs(1));
        departed.record(pod("a-1"), "a", start + Duration::from_secs(300));
        let kept = departed.controlled_by("default", "a");
        assert_eq!(names(&kept), ["a-0", "a-1"]);
        assert_eq!(
            kept[0].status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Failed"),
            "the state the pod went in"
        );
        assert!(
            departed.controlled_by("other", "a").is_empty(),
            "by namespace"
        );

        // A record forgets what is older than KEPT_FOR: a-0 and b-0, not a-1.
        departed.record(pod("c-0"), "c", start + KEPT_FOR + Duration::from_secs(2));
        assert_eq!(names(&departed.controlled_by("default", "a")), ["a-1"]);
        assert!(departed.controlled_by("default", "b").is_empty());
        let inner = departed.inner.lock().unwrap();
        assert_eq!(
            inner
                .by_controller
                .keys()
                .map(|(_, uid)| uid.as_str())
                .collect::<Vec<_>>(),
            ["a", "c"],
            "a controller without pods leaves no entry behind"
        );
        assert_eq!(inner.recorded.len(), 2);
    }
}
