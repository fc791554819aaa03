//! The notice the training processes read in `/etc/edl/notice`.
//!
//! Every pod of a job shows the file: it holds the notice in the pod's annotation
//! [`NOTICE_ANNOTATION`], as one line of JSON (see [`Notice`]), delivered through the downward
//! API as the launcher's hostfile is (see [`crate::discovery`]): an update of the pod makes the
//! kubelet rewrite the file at once, with no `pods/exec`. A pod without the annotation shows an
//! empty file: no notice.
//!
//! The job's notice (`status.notice`: suspending, or resumed) goes to every pod of the run. A
//! pod that is being disrupted (`DisruptionTarget=True`: its node is reclaimed, preempted or
//! drained) gets a `Reclaim` notice of its own instead, so that a rank about to die can save
//! what it must even while the job runs on; but once the whole job is suspending, its
//! `Suspend` notice goes to that pod too: every rank must hear that the whole job stops (its
//! deadline already ends no later than the first warned node of the run goes).

use std::collections::BTreeMap;

use eto_api::job_status::{Notice, NoticeKind, WarnedNode};
use eto_api::well_known::NOTICE_ANNOTATION;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::node_warnings::{self, NODE_WARNING};
use crate::pods;

/// The file content of `notice`: one line of JSON.
pub fn render(notice: &Notice) -> String {
    // A struct of strings and times always serializes.
    serde_json::to_string(notice).unwrap_or_default()
}

/// The annotations that show `notice` (none for no notice).
pub fn annotations(notice: Option<&Notice>) -> BTreeMap<String, String> {
    notice
        .map(|notice| (NOTICE_ANNOTATION.to_string(), render(notice)))
        .into_iter()
        .collect()
}

/// The notice `pod` shows now, if any (its annotation, when it parses).
pub fn shown(pod: &Pod) -> Option<Notice> {
    serde_json::from_str(pods::annotation(pod, NOTICE_ANNOTATION)?).ok()
}

/// The notice `pod` should show: its own `Reclaim` notice while it is being disrupted and the
/// job is not suspending, else the job's. A pod that already shows a `Reclaim` notice keeps it (its time is when eto first
/// saw the disruption). A pod disrupted because its node announced it goes away (one of
/// `warnings`, see [`crate::node_warnings`]) gets the warning's deadline and says which node
/// and why.
pub fn for_pod(
    pod: &Pod,
    job: Option<&Notice>,
    warnings: &[WarnedNode],
    now: jiff::Timestamp,
) -> Option<Notice> {
    let suspending = job.is_some_and(|notice| notice.kind == NoticeKind::Suspend);
    if !pods::is_disrupted(pod) || suspending {
        return job.cloned();
    }
    let shown = shown(pod).filter(|notice| notice.kind == NoticeKind::Reclaim);
    // A pod being deleted goes by its deletion time, whatever its node announced.
    let warned = pods::node(pod)
        .filter(|_| pod.metadata.deletion_timestamp.is_none())
        .and_then(|node| warnings.iter().find(|warning| warning.node == node));
    if let Some(warning) = warned {
        return shown.or_else(|| {
            Some(Notice {
                kind: NoticeKind::Reclaim,
                reason: NODE_WARNING.into(),
                since: Time(now),
                deadline: Some(warning.deadline.clone()),
                message: format!(
                    "pod {} is going away: {}; it has left host discovery: save what it must and exit",
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    node_warnings::describe(warning)
                ),
            })
        });
    }
    shown.or_else(|| {
        Some(Notice {
            kind: NoticeKind::Reclaim,
            reason: "Disrupted".into(),
            since: Time(now),
            deadline: pod.metadata.deletion_timestamp.clone(),
            message: format!(
                "pod {} is going away (its node is reclaimed, preempted or drained): save what it must and exit",
                pod.metadata.name.as_deref().unwrap_or_default()
            ),
        })
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn suspending() -> Notice {
        Notice {
            kind: NoticeKind::Suspend,
            reason: "BelowMinWorkers".into(),
            since: Time(at(0)),
            deadline: Some(Time(at(300))),
            message: "suspending".into(),
        }
    }

    fn pod(status: serde_json::Value, annotations: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "w-1", "annotations": annotations}, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn a_notice_is_one_line_of_json_with_the_fields_training_code_reads() {
        let line = render(&suspending());
        assert!(!line.contains('\n'));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap(),
            json!({"kind": "Suspend", "reason": "BelowMinWorkers", "since": "2027-01-15T08:00:00Z",
                "deadline": "2027-01-15T08:05:00Z", "message": "suspending"})
        );
        assert!(annotations(None).is_empty());
    }

    #[test]
    fn a_disrupted_pod_gets_its_own_reclaim_notice_and_keeps_it_until_the_job_suspends() {
        let running = json!({"phase": "Running"});
        assert_eq!(
            for_pod(&pod(running, json!({})), Some(&suspending()), &[], at(5)),
            Some(suspending())
        );

        let disrupted = json!({"phase": "Running", "conditions": [{"type": "DisruptionTarget", "status": "True"}]});
        let reclaim = for_pod(&pod(disrupted.clone(), json!({})), None, &[], at(5)).unwrap();
        assert_eq!(
            (reclaim.kind, reclaim.since.0),
            (NoticeKind::Reclaim, at(5))
        );
        let shown = pod(disrupted, json!(annotations(Some(&reclaim))));
        let again = for_pod(&shown, None, &[], at(9)).unwrap();
        assert_eq!(again, reclaim, "first seen at 5, still");
        // Once the whole job suspends, every rank hears it, this one too.
        assert_eq!(
            for_pod(&shown, Some(&suspending()), &[], at(9)),
            Some(suspending())
        );
    }
}
