//! Re-forming the group of an elastic PyTorchJob whose rendezvous eto hosts: one checkpoint,
//! then one change.
//!
//! torchrun stops every worker process of the job and starts the group again whenever an
//! agent leaves or joins: whatever was trained since the last checkpoint is trained again. So
//! before eto takes a worker out of a running group (a scale-in, or a worker whose node
//! announced it goes away, see [`crate::node_warnings`]), it:
//!
//! 1. posts every worker of the run a `Checkpoint` notice ([`notice`]): save a checkpoint
//!    now, say so, and wait (the worker that leaves sees its own `Reclaim` notice, which asks
//!    the same);
//! 2. keeps the leaving worker's pod, draining (see [`crate::drain`]), until the training code
//!    says it saved for that notice (one `POST` to the store, see
//!    [`crate::group_report`]), or `elasticPolicy.drainSeconds` pass,
//!    or the node's own deadline comes;
//! 3. deletes it, with a grace period of [`LEAVING_GRACE_SECONDS`], keeping the notice up
//!    until its pod is gone, so that no worker trains on with it (the training waits until
//!    the notice is taken down: then the group's next collective fails and torchrun
//!    re-forms it, from the checkpoint);
//! 4. once it is gone, takes the notice down and creates the workers the job is short of, so
//!    that they join the group that re-forms without it: one re-formed group, not two
//!    ([`holds_new_workers`]); the gates of workers that wait to join open only then (see
//!    `plan/run/notices.rs`). A worker warned of its node's end is replaced before it
//!    leaves instead: it trains on while its replacement starts and waits at its shut gate
//!    (see [`crate::warned_handover`]), and the gate opens as the warned worker's pod is
//!    deleted, so that the group re-forms once, with the replacement.
//!
//! A worker the platform takes with a grace period (an eviction) drains the same way, from
//! when its deletion began (see [`crate::saving_on_termination`]), but its replacement is
//! created at once: it starts while the group saves and waits at its shut gate (see
//! [`crate::joining`]) until the drain ends, then joins the group as it re-forms. One lost without warning
//! (failed, force-deleted, gone with its node) is beyond any notice: it is replaced at once
//! as before. The job's own notices come first: a job that suspends
//! shows its `Suspend` notice, not this one.

use std::time::Duration;

use eto_api::job_status::{DrainingWorker, Notice, NoticeKind};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::{node_warnings, pods};

/// The reason of the `Checkpoint` notice.
pub const WORKERS_LEAVING: &str = "WorkersLeaving";

/// The grace period of a worker that leaves once its group saved (or had its time): eto's
/// PID 1 then stops its training within seconds, and the group, waiting for it to be gone,
/// trains on.
pub const LEAVING_GRACE_SECONDS: i64 = 5;

/// The grace period of a worker whose agent waits beside the formed round (a spare, or one
/// waiting for the next round) when it goes: it trains nothing and has nothing to save, and
/// its agent, kept through a longer grace period by eto's PID 1, comes back to the
/// rendezvous, where it may take a place in the round the group re-forms, only to leave it.
pub const BESIDE_GROUP_GRACE_SECONDS: i64 = 1;

/// How often eto reads the store's report while a worker drains: the training code's word
/// reaches no watch.
pub const POLL: Duration = Duration::from_secs(1);

/// Whether a worker lost in this reconcile leaves by draining: its node announced it goes
/// away and its pod still runs, so the group can save before it leaves.
pub fn leaves_by_draining(pod: &Pod) -> bool {
    pods::disruption_reason(pod) == Some(node_warnings::NODE_WARNING)
        && !pods::is_terminating(pod)
        && !pods::is_finished(pod)
}

/// Whether the workers the job is short of wait to be created: they do while a worker drains
/// whose pod eto deletes once the group saved (a scale-in, a node's warning), so that they
/// join the group that re-forms once it left. A worker the platform takes (an eviction, see
/// [`crate::saving_on_termination`]) holds none: its pod goes whatever eto does, and its
/// replacements are created at once, to start while the group saves and wait at their shut
/// gate (see [`crate::joining`]) until the drains end.
pub fn holds_new_workers(draining: &[DrainingWorker], pods: &[&Pod]) -> bool {
    draining.iter().any(|worker| {
        pods.iter()
            .find(|pod| pod.metadata.name.as_deref() == Some(worker.pod.as_str()))
            .is_some_and(|pod| !taken_by_the_platform(pod))
    })
}

/// Whether the platform takes `pod` whatever eto does: it is being deleted, or marked
/// `DisruptionTarget` for a reason of the platform's (an eviction marks the pod a moment
/// before it deletes it), not eto's own mark of a node's warning.
fn taken_by_the_platform(pod: &Pod) -> bool {
    pods::is_terminating(pod)
        || pods::disruption_reason(pod).is_some_and(|reason| reason != node_warnings::NODE_WARNING)
}

/// The `Checkpoint` notice every worker of the run shows while `draining` is under way,
/// `None` when no worker drains. It dates from the first drain, so that one word of the
/// training code answers every worker leaving with it, and its deadline is the first drain's
/// end (`drain` after its start).
pub fn notice(draining: &[DrainingWorker], drain: Duration) -> Option<Notice> {
    let first = draining.iter().map(|worker| worker.since.0).min()?;
    // Notices carry whole seconds: the notice dates from the second the drain began in.
    let since = jiff::Timestamp::from_second(first.as_second()).unwrap_or(first);
    let deadline = crate::time::after(first, drain);
    let leaving: Vec<&str> = draining.iter().map(|worker| worker.pod.as_str()).collect();
    Some(Notice {
        kind: NoticeKind::Checkpoint,
        reason: WORKERS_LEAVING.into(),
        since: Time(since),
        deadline: Some(Time(deadline)),
        message: format!(
            "{} {} the group, which then re-forms: save a checkpoint now, say so (eto_notice.saved), and wait; the re-formed group resumes from it",
            leaving.join(", "),
            if leaving.len() == 1 {
                "leaves"
            } else {
                "leave"
            }
        ),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn at(seconds: f64) -> jiff::Timestamp {
        jiff::Timestamp::from_millisecond(1_800_000_000_000 + (seconds * 1000.0) as i64).unwrap()
    }

    fn draining(pod: &str, since: f64) -> DrainingWorker {
        DrainingWorker {
            pod: pod.into(),
            since: MicroTime(at(since)),
        }
    }

    #[test]
    fn the_notice_dates_from_the_first_drain_in_whole_seconds_and_ends_with_it() {
        let thirty = Duration::from_secs(30);
        assert_eq!(notice(&[], thirty), None, "no drain, no notice");
        let shown = notice(
            &[draining("j-worker-4", 7.0), draining("j-worker-2", 5.5)],
            thirty,
        )
        .expect("a notice");
        assert_eq!(shown.kind, NoticeKind::Checkpoint);
        assert_eq!(shown.reason, WORKERS_LEAVING);
        assert_eq!(shown.since, Time(at(5.0)));
        assert_eq!(shown.deadline, Some(Time(at(35.5))));
        assert!(
            shown
                .message
                .starts_with("j-worker-4, j-worker-2 leave the group"),
            "{}",
            shown.message
        );
    }

    #[test]
    fn only_a_running_worker_lost_to_its_nodes_warning_leaves_by_draining() {
        let pod = |reason: &str, phase: &str, deleting: bool| -> Pod {
            let mut metadata = json!({"name": "j-worker-1"});
            if deleting {
                metadata["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
            }
            serde_json::from_value(json!({"metadata": metadata, "status": {"phase": phase,
                "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": reason}]}}))
            .unwrap()
        };
        for (reason, phase, deleting, drains) in [
            (node_warnings::NODE_WARNING, "Running", false, true),
            (node_warnings::NODE_WARNING, "Running", true, false),
            (node_warnings::NODE_WARNING, "Failed", false, false),
            ("EvictionByEvictionAPI", "Running", false, false),
            ("PreemptionByScheduler", "Running", false, false),
        ] {
            assert_eq!(
                leaves_by_draining(&pod(reason, phase, deleting)),
                drains,
                "{reason} {phase} deleting={deleting}"
            );
        }
    }

    #[test]
    fn only_a_worker_eto_deletes_after_its_drain_holds_new_workers() {
        let pod = |reason: Option<&str>, deleting: bool| -> Pod {
            let mut metadata = json!({"name": "j-worker-1"});
            if deleting {
                metadata["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
            }
            let conditions: Vec<serde_json::Value> = reason
                .map(|reason| json!({"type": "DisruptionTarget", "status": "True", "reason": reason}))
                .into_iter()
                .collect();
            serde_json::from_value(json!({"metadata": metadata,
                "status": {"phase": "Running", "conditions": conditions}}))
            .unwrap()
        };
        let leaving = [draining("j-worker-1", 0.0)];
        for (reason, deleting, holds) in [
            (None, false, true),
            (Some(node_warnings::NODE_WARNING), false, true),
            (Some(node_warnings::NODE_WARNING), true, false),
            (Some("EvictionByEvictionAPI"), false, false),
            (Some("EvictionByEvictionAPI"), true, false),
            (None, true, false),
        ] {
            let pod = pod(reason, deleting);
            assert_eq!(
                holds_new_workers(&leaving, &[&pod]),
                holds,
                "{reason:?} deleting={deleting}"
            );
        }
        let scaled_in = pod(None, false);
        assert!(!holds_new_workers(&[], &[&scaled_in]), "nobody drains");
        assert!(!holds_new_workers(&leaving, &[]), "its pod is gone");
    }
}
