//! A Worker of a group that re-forms, which the platform takes with a grace period, saves
//! before the group lets it go.
//!
//! An eviction (a drain), a graceful node shutdown or a preemption marks the pod
//! `DisruptionTarget` and then deletes it with its grace period: its containers get SIGTERM at
//! once, and torchrun forwards it to the training processes. Training code that hears it
//! (eto's helper records it as a `Reclaim` notice, reason `Terminating`, see
//! `python/eto_notice.py`) can still take part in the step in flight and in a checkpoint,
//! since every rank holds the whole model. So such a Worker drains as a warned one does (see
//! [`crate::reforming_group`]): every Worker of the run shows the `Checkpoint` notice, and
//! the Worker stays a member of the rendezvous (the store is not told it departed, see
//! [`crate::group_orders`]) until the training code says it saved for a notice posted no
//! earlier than the pod's deletion began, its containers stop, or `elasticPolicy.drainSeconds`
//! pass; only then do the others re-form, from the checkpoint just saved. Before, they were
//! told to re-form the moment the pod was seen going, and whatever was trained since the
//! last periodic checkpoint was trained again.
//!
//! Training code that does not hear the signal dies with it: its pod's containers stop
//! within a second or two, and the group re-forms then, as before, a second or two later.
//! Only a Worker whose agent the store reports as a member of the round has a part in the
//! group's save: one marked long after its agent went silent (its node gone dark, the taint
//! manager evicting it minutes later) is let go at once.

use eto_api::job_status::DrainingWorker;
use k8s_openapi::api::core::v1::Pod;

use crate::pods;

/// Whether `pod` is being taken by the platform with time left to save: it is marked
/// `DisruptionTarget` (an eviction marks it a moment before it deletes it, in a write of its
/// own that eto may see first) and its containers still run at `now` (if it is being
/// deleted, its grace period has not ended).
pub fn saves_before_going(pod: &Pod, now: jiff::Timestamp) -> bool {
    pods::is_disrupted(pod) && pods::runs_at(pod, now)
}

/// When the deletion of `pod` began, so that its training's answer, dated from the SIGTERM
/// it heard, counts: its deletion time less its grace period, never later than `now`.
pub fn deletion_began(pod: &Pod, now: jiff::Timestamp) -> jiff::Timestamp {
    let metadata = &pod.metadata;
    let began = metadata
        .deletion_timestamp
        .as_ref()
        .zip(metadata.deletion_grace_period_seconds)
        .map(|(deleted, grace)| deleted.0 - jiff::SignedDuration::from_secs(grace));
    began.map_or(now, |began| began.min(now))
}

/// Whether the draining `worker`, whose pod is `pod`, still saves at `now`: the platform
/// takes its pod with time left, the training code has not said it saved since its drain
/// began (`saved`, in whole seconds as notices carry them), and its drain (`drain` long) has
/// not ended. Until then the group keeps it as a member.
pub fn still_saving(
    worker: &DrainingWorker,
    pod: &Pod,
    saved: Option<jiff::Timestamp>,
    drain: std::time::Duration,
    now: jiff::Timestamp,
) -> bool {
    let drain = jiff::SignedDuration::try_from(drain).unwrap_or(jiff::SignedDuration::MAX);
    let answered = saved.is_some_and(|saved| saved.as_second() >= worker.since.0.as_second());
    saves_before_going(pod, now) && !answered && now < worker.since.0 + drain
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    /// A pod deleted at 10 s with a grace period of 30 s (gone at 40 s), in `phase`,
    /// `DisruptionTarget` when `disrupted`.
    fn evicted(phase: &str, disrupted: bool) -> Pod {
        let conditions = if disrupted {
            json!([{"type": "DisruptionTarget", "status": "True"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "metadata": {"name": "w-1", "deletionTimestamp": at(40).to_string(),
                         "deletionGracePeriodSeconds": 30},
            "status": {"phase": phase, "conditions": conditions}}))
        .unwrap()
    }

    #[test]
    fn only_a_pod_the_platform_takes_with_time_left_saves_before_going() {
        assert!(saves_before_going(&evicted("Running", true), at(11)));
        assert!(
            !saves_before_going(&evicted("Running", false), at(11)),
            "deleted by eto or a person: no DisruptionTarget"
        );
        assert!(
            !saves_before_going(&evicted("Failed", true), at(11)),
            "its containers stopped"
        );
        assert!(
            !saves_before_going(&evicted("Running", true), at(40)),
            "its grace period ended"
        );
        let marked: Pod = serde_json::from_value(json!({"metadata": {"name": "w-1"},
            "status": {"phase": "Running",
                       "conditions": [{"type": "DisruptionTarget", "status": "True"}]}}))
        .unwrap();
        assert!(
            saves_before_going(&marked, at(11)),
            "marked, its deletion a moment away"
        );
    }

    #[test]
    fn the_deletion_began_its_grace_period_before_its_deletion_time() {
        let pod = evicted("Running", true);
        assert_eq!(deletion_began(&pod, at(12)), at(10));
        assert_eq!(deletion_began(&pod, at(5)), at(5), "never later than now");
        let unknown: Pod = serde_json::from_value(json!({"metadata": {"name": "w-1"}})).unwrap();
        assert_eq!(deletion_began(&unknown, at(12)), at(12));
    }

    #[test]
    fn a_worker_saves_until_the_training_answers_or_its_drain_ends() {
        let pod = evicted("Running", true);
        let worker = DrainingWorker {
            pod: "w-1".into(),
            since: MicroTime(at(10) + jiff::SignedDuration::from_millis(300)),
        };
        let thirty = std::time::Duration::from_secs(30);
        assert!(still_saving(&worker, &pod, None, thirty, at(11)));
        assert!(
            still_saving(&worker, &pod, Some(at(9)), thirty, at(11)),
            "an answer to an earlier notice"
        );
        assert!(
            !still_saving(&worker, &pod, Some(at(10)), thirty, at(11)),
            "answered in the second its drain began"
        );
        let short = std::time::Duration::from_secs(5);
        assert!(
            !still_saving(&worker, &pod, None, short, at(16)),
            "its drain ended"
        );
        assert!(!still_saving(
            &worker,
            &evicted("Failed", true),
            None,
            thirty,
            at(11)
        ));
    }
}
