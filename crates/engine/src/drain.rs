//! Draining: a worker removed from a running job leaves host discovery first; its pod goes
//! later.
//!
//! Deleting a worker that Horovod is training with looks like a crash to the other ranks (a
//! broken ring, a Gloo connection reset). Taking it out of host discovery instead makes Horovod
//! see a host removal, which it handles at its next commit by re-forming the ring without the
//! host. So a removed worker that host discovery listed while the launcher runs is *drained*:
//! out of discovery at once, its pod deleted once `elasticPolicy.drainSeconds` have passed.
//! Nothing tells eto when Horovod has let go of the host without exec into the launcher, so
//! the drain is a bounded wait, cut short when it can no longer matter: the pod stopped by
//! itself, or the launcher is no longer running. A removed worker that discovery never listed,
//! or removed while no launcher runs, is deleted at once.
//!
//! A PyTorchJob whose rendezvous eto hosts drains the same way, for another reason: torchrun
//! stops every worker and re-forms the group when one leaves, so its workers are first told
//! to save a checkpoint (see [`crate::reforming_group`]), and the drain is cut short as soon as the
//! training code says it saved for a notice posted no earlier than the drain began (the
//! store's report, see [`crate::group_report`]). Such a worker stays
//! listed while its pod is deleted, until the pod is gone (at most a second drain's length
//! past the first's end): the group waits for it to be gone before it trains on. A worker
//! whose agent the store reports beside the formed round (a spare, or one waiting for the
//! next round), or whose training waits behind its shut gate (see [`crate::joining`]), trains
//! nothing and has nothing to save: it goes at once, without a drain,
//! before a member draining with it leaves, so that it cannot take that member's place in
//! the round that re-forms only to leave it again. A worker the platform takes with a grace
//! period (an eviction) drains from when its deletion began, and saves before it goes (see
//! [`crate::saving_on_termination`]): while it does, it is among the drain's
//! [`DrainDecision::saving`].

use std::time::Duration;

use eto_api::job_status::DrainingWorker;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use crate::{pods, saving_on_termination};

/// A worker leaving the job in this reconcile.
#[derive(Clone, Copy, Debug)]
pub struct Removed<'a> {
    /// Its pod.
    pub pod: &'a Pod,
    /// Whether host discovery listed it until now.
    pub was_in_discovery: bool,
}

/// What drains start from.
#[derive(Clone, Debug)]
pub struct DrainInput<'a> {
    /// The workers draining since earlier reconciles (`status.drainingWorkers`).
    pub draining: &'a [DrainingWorker],
    /// Workers leaving the job now.
    pub removed: Vec<Removed<'a>>,
    /// The job's worker pods.
    pub pods: Vec<&'a Pod>,
    /// Whether the launcher of the current run is running.
    pub launcher_running: bool,
    /// `elasticPolicy.drainSeconds`.
    pub drain: Duration,
    /// The `since` of the latest notice the training code said it saved for, if it says so
    /// (see the module documentation).
    pub saved: Option<jiff::Timestamp>,
    /// Whether a worker whose pod is deleted stays listed until the pod is gone (see the
    /// module documentation).
    pub keep_until_gone: bool,
    /// The workers (pod names) whose agents the group's coordinator reports at its
    /// rendezvous beside a formed round, not in it, and those whose training waits behind
    /// their shut gate (see [`crate::joining`]): they go at once (see the module
    /// documentation). Empty where no group re-forms.
    pub beside_group: &'a [&'a str],
    /// The workers whose agents the group's coordinator reports as members of its round:
    /// only they have a part in the group's save (one whose agent went silent, its node gone
    /// dark, has none). Empty where no group re-forms.
    pub members: &'a [&'a str],
    /// The time.
    pub now: jiff::Timestamp,
}

/// What the drains decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrainDecision {
    /// The new `status.drainingWorkers`: the workers whose drain goes on.
    pub draining: Vec<DrainingWorker>,
    /// Pods to delete now.
    pub delete: Vec<String>,
    /// When the next drain ends, if one is under way.
    pub next_end: Option<jiff::Timestamp>,
    /// The draining workers whose pods the platform is taking and whose group waits for
    /// their save before it lets them go (see [`crate::saving_on_termination`]).
    pub saving: Vec<String>,
}

/// Decides the drains; see the module documentation.
pub fn decide(input: &DrainInput<'_>) -> DrainDecision {
    let mut decision = DrainDecision::default();
    let drain = jiff::SignedDuration::try_from(input.drain).unwrap_or(jiff::SignedDuration::MAX);
    let starting = input.removed.iter().filter_map(|removed| {
        let name = removed.pod.metadata.name.as_deref()?;
        let already = input.draining.iter().any(|d| d.pod == name);
        (!already).then(|| {
            let drains =
                removed.was_in_discovery && input.launcher_running && !input.drain.is_zero();
            // One the platform takes drains from when its deletion began.
            let began = saving_on_termination::deletion_began(removed.pod, input.now);
            DrainingWorker {
                pod: name.to_string(),
                // One that need not drain is due at once.
                since: MicroTime(if drains { began } else { input.now - drain }),
            }
        })
    });
    for worker in input
        .draining
        .iter()
        .cloned()
        .chain(starting.collect::<Vec<_>>())
    {
        let named = |pod: &&&Pod| pod.metadata.name.as_deref() == Some(worker.pod.as_str());
        let Some(pod) = input.pods.iter().find(named) else {
            continue;
        };
        let end = worker.since.0 + drain;
        let saving = input.keep_until_gone
            && input.launcher_running
            && input.members.contains(&worker.pod.as_str())
            && saving_on_termination::still_saving(
                &worker,
                pod,
                input.saved,
                input.drain,
                input.now,
            );
        if saving {
            let due = pod
                .metadata
                .deletion_timestamp
                .as_ref()
                .map_or(end, |deleted| deleted.0.min(end));
            decision.next_end = Some(decision.next_end.map_or(due, |next| next.min(due)));
            decision.saving.push(worker.pod.clone());
            decision.draining.push(worker);
            continue;
        }
        if pods::is_terminating(pod) {
            if input.keep_until_gone && input.now < end + drain {
                decision.draining.push(worker);
            }
            continue;
        }
        // Notices carry whole seconds.
        let saved = input
            .saved
            .is_some_and(|saved| saved.as_second() >= worker.since.0.as_second());
        if input.beside_group.contains(&worker.pod.as_str()) {
            decision.delete.push(worker.pod);
        } else if input.now >= end || !input.launcher_running || pods::is_finished(pod) || saved {
            if input.keep_until_gone {
                decision.draining.push(worker.clone());
            }
            decision.delete.push(worker.pod);
        } else {
            decision.next_end = Some(decision.next_end.map_or(end, |next| next.min(end)));
            decision.draining.push(worker);
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn pod(name: &str, phase: &str, terminating: bool) -> Pod {
        let mut metadata = json!({"name": name});
        if terminating {
            metadata["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
        }
        serde_json::from_value(json!({"metadata": metadata, "status": {"phase": phase}})).unwrap()
    }

    fn draining(pod: &str, since: i64) -> DrainingWorker {
        DrainingWorker {
            pod: pod.into(),
            since: MicroTime(at(since)),
        }
    }

    const THIRTY: Duration = Duration::from_secs(30);

    struct World {
        pods: BTreeMap<String, Pod>,
    }

    impl World {
        fn of(pods: &[Pod]) -> Self {
            Self {
                pods: pods
                    .iter()
                    .map(|p| (p.metadata.name.clone().unwrap(), p.clone()))
                    .collect(),
            }
        }

        fn decide(
            &self,
            previous: &[DrainingWorker],
            removed: &[(&str, bool)],
            launcher_running: bool,
            now: i64,
        ) -> DrainDecision {
            self.decide_saved(previous, removed, launcher_running, now, None)
        }

        fn decide_saved(
            &self,
            previous: &[DrainingWorker],
            removed: &[(&str, bool)],
            launcher_running: bool,
            now: i64,
            saved: Option<jiff::Timestamp>,
        ) -> DrainDecision {
            decide(&DrainInput {
                draining: previous,
                removed: removed
                    .iter()
                    .map(|(name, was_in_discovery)| Removed {
                        pod: &self.pods[*name],
                        was_in_discovery: *was_in_discovery,
                    })
                    .collect(),
                pods: self.pods.values().collect(),
                launcher_running,
                drain: THIRTY,
                saved,
                keep_until_gone: false,
                beside_group: &[],
                members: &[],
                now: at(now),
            })
        }
    }

    #[test]
    fn a_worker_in_discovery_drains_before_its_pod_is_deleted() {
        let world = World::of(&[pod("w-3", "Running", false)]);
        let started = world.decide(&[], &[("w-3", true)], true, 0);
        assert_eq!(started.draining, [draining("w-3", 0)]);
        assert!(started.delete.is_empty(), "not deleted yet");
        assert_eq!(started.next_end, Some(at(30)));

        let waiting = world.decide(&started.draining, &[], true, 29);
        assert!(waiting.delete.is_empty());
        let over = world.decide(&started.draining, &[], true, 30);
        assert_eq!(over.delete, ["w-3"]);
        assert!(over.draining.is_empty(), "its drain is over");
        assert_eq!(over.next_end, None);
    }

    #[test]
    fn a_worker_that_was_not_in_discovery_or_has_no_launcher_goes_at_once() {
        let world = World::of(&[pod("w-1", "Pending", false), pod("w-2", "Running", false)]);
        let pending = world.decide(&[], &[("w-1", false)], true, 0);
        assert_eq!(pending.delete, ["w-1"]);
        assert!(pending.draining.is_empty());
        let no_launcher = world.decide(&[], &[("w-2", true)], false, 0);
        assert_eq!(no_launcher.delete, ["w-2"]);
        assert!(no_launcher.draining.is_empty());
    }

    #[test]
    fn a_drain_ends_early_when_the_pod_stopped_or_the_launcher_did() {
        let world = World::of(&[pod("w-1", "Failed", false), pod("w-2", "Running", false)]);
        let previous = [draining("w-1", 0), draining("w-2", 0)];
        let decision = world.decide(&previous, &[], true, 1);
        assert_eq!(decision.delete, ["w-1"], "w-1 stopped by itself");
        let decision = world.decide(&previous, &[], false, 1);
        assert_eq!(
            decision.delete,
            ["w-1", "w-2"],
            "nobody trains with them any more"
        );
    }

    #[test]
    fn a_pod_being_deleted_or_gone_is_forgotten() {
        let world = World::of(&[pod("w-1", "Running", true)]);
        let decision = world.decide(&[draining("w-1", 0), draining("w-2", 0)], &[], true, 10);
        assert!(decision.delete.is_empty(), "w-1 is already going, w-2 gone");
        assert!(decision.draining.is_empty());
    }

    #[test]
    fn a_worker_already_draining_keeps_its_start() {
        let world = World::of(&[pod("w-3", "Running", false)]);
        let decision = world.decide(&[draining("w-3", 0)], &[("w-3", true)], true, 10);
        assert_eq!(decision.draining, [draining("w-3", 0)]);
        assert_eq!(decision.next_end, Some(at(30)));
    }

    #[test]
    fn a_drain_ends_once_the_training_code_saved_for_a_notice_posted_since_it_began() {
        let world = World::of(&[pod("w-1", "Running", false), pod("w-2", "Running", false)]);
        // w-1 drains since 0.4 s (its notice says 0 s: notices carry whole seconds), w-2
        // since 20 s.
        let since_0_4 = DrainingWorker {
            pod: "w-1".into(),
            since: MicroTime(at(0) + jiff::SignedDuration::from_millis(400)),
        };
        let previous = [since_0_4, draining("w-2", 20)];
        let answered_0 = world.decide_saved(&previous, &[], true, 21, Some(at(0)));
        assert_eq!(answered_0.delete, ["w-1"], "w-1's notice was answered");
        assert_eq!(answered_0.draining, [draining("w-2", 20)]);
        let older = world.decide_saved(&previous, &[], true, 21, Some(at(-60)));
        assert!(
            older.delete.is_empty(),
            "an answer to an earlier notice ends nothing"
        );
        let answered_20 = world.decide_saved(&previous, &[], true, 21, Some(at(20)));
        assert_eq!(answered_20.delete, ["w-1", "w-2"]);
    }

    #[test]
    fn a_group_that_re_forms_keeps_a_worker_listed_until_its_pod_is_gone() {
        let world = World::of(&[pod("w-1", "Running", true)]);
        let keep = |now: i64| {
            decide(&DrainInput {
                draining: &[draining("w-1", 0)],
                removed: Vec::new(),
                pods: world.pods.values().collect(),
                launcher_running: true,
                drain: THIRTY,
                saved: Some(at(0)),
                keep_until_gone: true,
                beside_group: &[],
                members: &[],
                now: at(now),
            })
        };
        let deleting = keep(5);
        assert_eq!(deleting.draining, [draining("w-1", 0)], "still there");
        assert!(deleting.delete.is_empty(), "already being deleted");
        assert_eq!(keep(59).draining.len(), 1);
        assert!(keep(60).draining.is_empty(), "a stuck pod holds no longer");
        let gone = World::of(&[]);
        let decision = decide(&DrainInput {
            draining: &[draining("w-1", 0)],
            removed: Vec::new(),
            pods: gone.pods.values().collect(),
            launcher_running: true,
            drain: THIRTY,
            saved: None,
            keep_until_gone: true,
            beside_group: &[],
            members: &[],
            now: at(5),
        });
        assert!(decision.draining.is_empty(), "gone");
    }

    #[test]
    fn a_worker_the_platform_takes_saves_from_when_its_deletion_began() {
        // Evicted at 10 s with a grace period of 30 s; eto sees it at 11 s.
        let evicted: Pod = serde_json::from_value(json!({
            "metadata": {"name": "w-1", "deletionTimestamp": at(40).to_string(),
                         "deletionGracePeriodSeconds": 30},
            "status": {"phase": "Running",
                       "conditions": [{"type": "DisruptionTarget", "status": "True"}]}}))
        .unwrap();
        let world = World::of(&[evicted]);
        let decide =
            |previous: &[DrainingWorker], saved: Option<i64>, now: i64, members: &[&str]| {
                let removed = if previous.is_empty() {
                    vec![Removed {
                        pod: &world.pods["w-1"],
                        was_in_discovery: true,
                    }]
                } else {
                    Vec::new()
                };
                decide(&DrainInput {
                    draining: previous,
                    removed,
                    pods: world.pods.values().collect(),
                    launcher_running: true,
                    drain: THIRTY,
                    saved: saved.map(at),
                    keep_until_gone: true,
                    beside_group: &[],
                    members,
                    now: at(now),
                })
            };
        let seen = decide(&[], None, 11, &["w-1"]);
        assert_eq!(seen.draining, [draining("w-1", 10)], "from its deletion");
        assert_eq!(seen.saving, ["w-1"]);
        assert!(seen.delete.is_empty(), "the platform deletes it");
        assert_eq!(
            seen.next_end,
            Some(at(40)),
            "its drain, or its grace period"
        );

        let answered = decide(&seen.draining, Some(10), 14, &["w-1"]);
        assert!(answered.saving.is_empty(), "the group saved");
        assert_eq!(answered.draining, seen.draining, "listed until it is gone");
        let earlier = decide(&seen.draining, Some(9), 14, &["w-1"]);
        assert_eq!(earlier.saving, ["w-1"], "an answer to an earlier notice");
        assert!(
            decide(&seen.draining, None, 40, &["w-1"]).saving.is_empty(),
            "its time is up"
        );
        let silent = decide(&[], None, 11, &[]);
        assert!(
            silent.saving.is_empty(),
            "not a member of the round (a spare, or its agent silent): nothing to save"
        );
    }

    #[test]
    fn a_worker_beside_the_formed_round_goes_at_once_and_holds_nothing() {
        // w-1 is a member of the round, w-3 its spare; a warning takes both. w-2 drained
        // since earlier and has since been left out of a round that re-formed.
        let world = World::of(&[
            pod("w-1", "Running", false),
            pod("w-2", "Running", false),
            pod("w-3", "Running", false),
        ]);
        let decide_beside = |beside_group: &[&str]| {
            decide(&DrainInput {
                draining: &[draining("w-2", 0)],
                removed: vec![
                    Removed {
                        pod: &world.pods["w-1"],
                        was_in_discovery: true,
                    },
                    Removed {
                        pod: &world.pods["w-3"],
                        was_in_discovery: true,
                    },
                ],
                pods: world.pods.values().collect(),
                launcher_running: true,
                drain: THIRTY,
                saved: None,
                keep_until_gone: true,
                beside_group,
                members: &[],
                now: at(10),
            })
        };
        let decision = decide_beside(&["w-2", "w-3"]);
        assert_eq!(decision.delete, ["w-2", "w-3"], "they train nothing");
        assert_eq!(
            decision.draining,
            [draining("w-1", 10)],
            "only the member drains, and only it holds the group"
        );
        assert_eq!(decision.next_end, Some(at(40)));
        let unknown = decide_beside(&[]);
        assert!(unknown.delete.is_empty(), "without a report, all drain");
        assert_eq!(unknown.draining.len(), 3);
    }
}
