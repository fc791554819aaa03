//! Backing off the pods that replace those failing on their own.
//!
//! A pod whose own code, image or configuration fails (see [`crate::own_failure`]) fails again
//! when it is replaced as it was: a typo in a command, an import error, a missing file. eto
//! replaces such pods as the kubelet restarts a container that keeps failing
//! (`CrashLoopBackOff`): the first failure of a role is replaced at once (it may be a fluke,
//! and recovery is what eto is for), the next ones after [`FIRST_DELAY`], doubling with each
//! failure in a row up to [`MAX_DELAY`]. What the platform takes (a reclaim, an eviction, a
//! preemption, a node's loss) is never backed off: its replacements are created at once,
//! during a back-off too.
//!
//! # Failures in a row, per role
//! The record is per role (`Worker`, or the pod that coordinates the job's runs), in
//! `status.backoff`, and survives the operator's restarts. Pods that fail together count once:
//! a Worker failure counts only when the Worker was created after the role's latest counted
//! failure ([`RoleBackoff::next_index`]); the others failed with it (two Workers whose command
//! has a typo fail within a second of each other, and are one failure of their code). A
//! failure is counted once ([`RoleBackoff::counted`]), however many reconciles see it.
//!
//! # The end of a back-off
//! - A pod of the role created after the latest failure runs for [`RAN_WELL`]: the code works.
//! - The role's pod template changes (the user fixed it): its next pods are created at once,
//!   from the new template.
//!
//! A failure on several nodes is the code's, not the nodes': node cooldowns (see
//! [`crate::cooldown`]) only steer new pods away from a node, while the back-off delays them
//! wherever they go.

use std::time::Duration;

use eto_api::job_status::RoleBackoff;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;

/// The delay after the second failure in a row.
pub const FIRST_DELAY: Duration = Duration::from_secs(10);

/// The longest delay.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// How long a pod of a backed-off role runs before its role's back-off ends.
pub const RAN_WELL: Duration = Duration::from_secs(600);

/// How long a role that failed `failures` times in a row waits before its next pod: none after
/// one failure, then [`FIRST_DELAY`], doubling, at most [`MAX_DELAY`].
pub fn delay(failures: i32) -> Duration {
    let Some(doublings) = failures.checked_sub(2).and_then(|d| u32::try_from(d).ok()) else {
        return Duration::ZERO;
    };
    FIRST_DELAY
        .checked_mul(2_u32.saturating_pow(doublings.min(16)))
        .map_or(MAX_DELAY, |delay| delay.min(MAX_DELAY))
}

/// A failure of a pod of a role, as a reconcile sees it.
#[derive(Clone, Debug)]
pub struct Failure<'a> {
    /// The role.
    pub role: &'a str,
    /// The failed pod's uid: a failure counts once.
    pub pod_uid: &'a str,
    /// The failure in words (see [`crate::own_failure::OwnFailure::describe`]), after the
    /// pod's name.
    pub cause: String,
    /// Whether it is a failure of its own rather than one of a pod that failed with the
    /// latest counted one (see the module documentation).
    pub fresh: bool,
    /// The digest of the role's template now (see [`digest`]).
    pub template: &'a str,
}

/// The role's record after `failure`, from the record `previous` (see the module
/// documentation): one more failure in a row when it is fresh and not counted yet, its delay
/// starting now. A failure that is not fresh leaves the count and the delay as they were.
pub fn count(
    previous: Option<&RoleBackoff>,
    failure: &Failure<'_>,
    now: jiff::Timestamp,
) -> RoleBackoff {
    match previous {
        Some(record)
            if !failure.fresh
                || (!failure.pod_uid.is_empty() && record.counted == failure.pod_uid) =>
        {
            record.clone()
        }
        _ => {
            let failures = previous
                .map_or(0, |record| record.failures)
                .saturating_add(1);
            // Whole seconds, as the API's times are.
            let since = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
            RoleBackoff {
                role: failure.role.to_string(),
                failures,
                since: Time(since),
                retry_at: Time(crate::time::after(since, delay(failures))),
                cause: failure.cause.clone(),
                waiting: previous.map(|r| r.waiting.clone()).unwrap_or_default(),
                next_index: previous.and_then(|r| r.next_index),
                counted: failure.pod_uid.to_string(),
                template: failure.template.to_string(),
            }
        }
    }
}

/// Whether the role of `record` still waits at `now`.
pub fn waits(record: &RoleBackoff, now: jiff::Timestamp) -> bool {
    now < record.retry_at.0
}

/// Why a back-off ended, if it did (see the module documentation): its role's template is now
/// `template`, and `pods` are the role's pods.
pub fn ended(
    record: &RoleBackoff,
    template: &str,
    pods: &[&Pod],
    now: jiff::Timestamp,
) -> Option<&'static str> {
    if record.template != template {
        return Some("its pod template changed");
    }
    pods.iter()
        .any(|pod| ran_well_since(pod, record.since.0).is_some_and(|well| well <= now))
        .then_some("a pod created since its latest failure ran for 10 minutes")
}

/// When `pod`, created after `since`, will have run for [`RAN_WELL`] without a restart, if it
/// runs: the time a reconcile looks again to end the back-off.
pub fn ran_well_since(pod: &Pod, since: jiff::Timestamp) -> Option<jiff::Timestamp> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    // Creation times are whole seconds: a pod created in the second of the failure is taken
    // to be created after it.
    if created.as_second() < since.as_second() || crate::own_failure::OwnFailure::of(pod).is_some()
    {
        return None;
    }
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    if statuses.iter().any(|status| status.restart_count != 0) {
        return None;
    }
    Some(crate::time::after(
        crate::pods::running_since(pod)?,
        RAN_WELL,
    ))
}

/// A short, stable digest of a role's pod template: a changed template ends its back-off.
pub fn digest<T: Serialize>(template: Option<&T>) -> String {
    let text = template
        .and_then(|template| serde_json::to_string(template).ok())
        .unwrap_or_default();
    // FNV-1a, 64 bits: stable across builds, unlike the standard library's hasher.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn delays_double_from_the_second_failure_up_to_five_minutes() {
        let delays: Vec<u64> = (0..=10).map(|n| delay(n).as_secs()).collect();
        assert_eq!(delays, [0, 0, 10, 20, 40, 80, 160, 300, 300, 300, 300]);
        assert_eq!(delay(i32::MAX), MAX_DELAY);
    }

    #[test]
    fn failures_count_once_and_pods_that_fail_together_count_as_one() {
        let failure = |uid: &'static str, fresh: bool| Failure {
            role: "Worker",
            pod_uid: uid,
            cause: format!("{uid} failed"),
            fresh,
            template: "t1",
        };
        // (failure, now, failures, retry at)
        let steps = [
            (
                "the first failure is replaced at once",
                failure("a", true),
                0,
                1,
                0,
            ),
            ("seen again, it counts once", failure("a", true), 1, 1, 0),
            ("a pod that failed with it", failure("b", false), 2, 1, 0),
            (
                "its replacement's failure waits 10 s",
                failure("c", true),
                5,
                2,
                15,
            ),
            ("the next one 20 s", failure("d", true), 20, 3, 40),
        ];
        let mut record: Option<RoleBackoff> = None;
        for (name, failure, now, failures, retry_at) in steps {
            let next = count(record.as_ref(), &failure, at(now));
            assert_eq!(
                (next.failures, next.retry_at.0),
                (failures, at(retry_at)),
                "{name}"
            );
            record = Some(next);
        }
        let record = record.unwrap();
        assert_eq!(record.cause, "d failed");
        assert!(waits(&record, at(39)));
        assert!(!waits(&record, at(40)));
    }

    fn running_pod(created: i64, started: i64, restarts: i32) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "w", "creationTimestamp": at(created).to_string()},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i", "imageID": "",
                "ready": true, "restartCount": restarts, "state": {"running": {"startedAt": at(started).to_string()}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_back_off_ends_when_a_new_pod_ran_well_or_the_template_changed() {
        let record = count(
            None,
            &Failure {
                role: "Worker",
                pod_uid: "a",
                cause: String::new(),
                fresh: true,
                template: "t1",
            },
            at(100),
        );
        let new = running_pod(105, 110, 0);
        let old = running_pod(0, 5, 0);
        let restarted = running_pod(105, 110, 1);
        // (template, pods, now, ended)
        let cases: [(&str, Vec<&Pod>, i64, Option<&str>); 6] = [
            ("t1", vec![&new], 709, None),
            (
                "t1",
                vec![&new],
                710,
                Some("a pod created since its latest failure ran for 10 minutes"),
            ),
            ("t1", vec![&old], 10_000, None),
            ("t1", vec![&restarted], 10_000, None),
            ("t2", vec![], 101, Some("its pod template changed")),
            ("t1", vec![], 10_000, None),
        ];
        for (template, pods, now, expected) in cases {
            assert_eq!(
                ended(&record, template, &pods, at(now)),
                expected,
                "{template} {now}"
            );
        }
        assert_eq!(ran_well_since(&new, at(100)), Some(at(710)));
    }

    #[test]
    fn a_digest_is_stable_and_tells_templates_apart() {
        let one = json!({"spec": {"containers": [{"name": "w", "image": "train:v1"}]}});
        let two = json!({"spec": {"containers": [{"name": "w", "image": "train:v2"}]}});
        assert_eq!(digest(Some(&one)), digest(Some(&one.clone())));
        assert_ne!(digest(Some(&one)), digest(Some(&two)));
        assert_eq!(digest(Some(&one)).len(), 16);
        assert_eq!(
            digest::<serde_json::Value>(None),
            "cbf29ce484222325",
            "the empty text"
        );
    }
}
