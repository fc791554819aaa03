//! Which workers a job should have.
//!
//! `status.targetWorkers` is the durable record of the workers the job should have now; each
//! reconcile starts from it and from the worker pods of the current run:
//!
//! 1. A target worker that failed, was evicted, is being disrupted, completed or disappeared
//!    is *lost*: it leaves the target (and so host discovery) and goes on the blacklist. If
//!    its restart policy replaces it, a worker with a new index takes its place: Horovod
//!    blacklists hosts by name, so a name is never reused.
//! 2. A worker lost to its node's advance warning (see [`crate::node_warnings`]) whose
//!    warning was withdrawn while it still runs and is ready *returns*: it takes the place of
//!    a target worker that is not ready yet or whose training has not started (its
//!    replacement, most likely, whose pod is deleted), or of one the job is short of;
//!    otherwise its pod is deleted, the job having its workers without it.
//! 3. A worker pod that exists but is not in the target (left by an operator that stopped
//!    before recording it) replaces a lost worker first, then is adopted while the target is
//!    short of the desired count (before or after a change of `replicas`, the larger), and
//!    is deleted otherwise. Workers being drained are left alone.
//! 4. A ScaleIn or ScaleOut under way (see [`crate::scaling`]) adds its new workers to the
//!    target, or takes its workers out.
//! 5. When the count the job holds to changed since the last reconcile, the target grows with
//!    new indices or shrinks, dropping workers that are not ready first, then those whose pods
//!    have the lowest `controller.kubernetes.io/pod-deletion-cost` (as a ReplicaSet does: the
//!    way to pick which workers a `kubectl scale` removes), then the highest indices.
//! 6. Workers whose pods train as one group (a replica group of several pods, see
//!    [`WorkerInput::groups`]) come and go together: a lost worker takes the other workers
//!    of its group out of the target with it (their pods are deleted; each is replaced under
//!    a new index when the lost one is; a group left short of workers takes a lost worker
//!    whose pod is gone, which tells no group), a worker lost to a withdrawn warning never returns
//!    alone, and a shrink drops whole groups, ranking each group as its least ready and
//!    cheapest worker, then by its newest. A shrink drops workers waiting as spares (see
//!    [`WorkerInput::spares`]) last.
//!
//! Without a change of `worker.replicas`, a lost worker that is not replaced is not made up for:
//! the job runs with fewer workers, as with et-operator.

use std::collections::{BTreeMap, BTreeSet};

use eto_api::common::ReplicaRestartPolicy;
use k8s_openapi::api::core::v1::Pod;

use crate::loss::Loss;
use crate::pods;

/// What the worker bookkeeping starts from.
#[derive(Clone, Debug)]
pub struct WorkerInput<'a> {
    /// The worker restart policy.
    pub policy: ReplicaRestartPolicy,
    /// Workers the spec asks for.
    pub desired: u32,
    /// Workers the spec asked for at the last reconcile (`status.workers.desired`), `None` for
    /// a job (or run) that has no workers yet.
    pub previous_desired: Option<u32>,
    /// The indices of `status.targetWorkers`.
    pub previous_target: &'a [u32],
    /// The worker pods of the current run, by index.
    pub pods: &'a BTreeMap<u32, &'a Pod>,
    /// The last state of workers of the current run whose pods the watch saw deleted lately,
    /// by index (see [`crate::plan::Observed::departed`]): for a worker without a pod, what
    /// its pod showed as it went tells a loss to the platform from a deletion
    /// ([`Loss::of_departed`]).
    pub departed: &'a BTreeMap<u32, &'a Pod>,
    /// Indices of workers already on the blacklist.
    pub blacklisted: &'a BTreeSet<u32>,
    /// Indices of blacklisted workers lost to a node's warning that was withdrawn, whose pods
    /// still run and are ready: they may return (see the module documentation).
    pub returning: &'a BTreeSet<u32>,
    /// Indices of workers whose pods run but whose training has not started: they wait at a
    /// shut gate to join a group that re-forms (see [`crate::joining`]). A returning worker
    /// takes the place of one as of one not ready: it never joined, where the returning one
    /// is still a member.
    pub unstarted: &'a BTreeSet<u32>,
    /// Indices of workers removed from the job whose pods are still draining
    /// (see [`crate::drain`]): neither adopted nor deleted here.
    pub draining: &'a BTreeSet<u32>,
    /// Indices of target workers whose creation an earlier reconcile held back (see
    /// [`crate::reforming_group`]): without a pod, they are not lost but still to create.
    pub held: &'a BTreeSet<u32>,
    /// Indices that belong to the target (the workers of a ScaleOut under way), unless lost.
    pub add: &'a [u32],
    /// Indices taken out of the target (the workers of a ScaleIn, or of a failed ScaleOut).
    pub remove: &'a [u32],
    /// The smallest index never used by the job.
    pub next_index: u32,
    /// The group of each worker whose pod is one of several that train as one group, by
    /// index (a replica group of several pods: its group id); empty where every worker
    /// stands alone.
    pub groups: &'a BTreeMap<u32, u32>,
    /// The workers of each group of `groups`: 1 where every worker stands alone.
    pub group_size: u32,
    /// Workers that wait as spares for eto to give them a place (spare replica groups): a
    /// shrink drops them last, but those beyond `kept_spares`.
    pub spares: &'a BTreeSet<u32>,
    /// The spares of `spares` the target keeps; those beyond it (started for warned groups
    /// held until a spare waits, see [`crate::warned_handover`]) replace lost workers first,
    /// and a shrink drops them first.
    pub kept_spares: u32,
    /// Target workers to renew, whatever the restart policy: their pods wait on a pod template
    /// the job no longer has (see `plan/run/template_change.rs`). Each leaves the target, its
    /// pod is deleted, and a worker with a new index takes its place.
    pub renew: &'a BTreeSet<u32>,
}

/// A target worker that stopped counting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostWorker {
    /// Its index.
    pub index: u32,
    /// Why.
    pub loss: Loss,
    /// The index of its replacement, if its restart policy replaces it.
    pub replacement: Option<u32>,
}

/// A target worker taken out with its group, whose other worker was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftWithGroup {
    /// Its index.
    pub index: u32,
    /// The index of the lost worker of its group.
    pub lost: u32,
    /// The index of its replacement, if the lost worker is replaced.
    pub replacement: Option<u32>,
}

/// The grace period of a worker taken out with its group (see the module documentation): its
/// group lost a pod and cannot train again, and while it lives its training may hold up the
/// other groups (a TorchFT Manager that still heartbeats makes the Lighthouse wait for it).
/// Training between two steps hears the SIGTERM and leaves within it; training stuck in a
/// step of its broken group is stopped then.
pub const LEFT_WITH_GROUP_GRACE_SECONDS: i64 = 2;

/// What the worker bookkeeping decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerDecision {
    /// The indices the job should have, ascending.
    pub target: Vec<u32>,
    /// Target indices without a pod: to create.
    pub create: Vec<u32>,
    /// Worker pods to delete: excess and scale-in victims.
    pub delete: Vec<u32>,
    /// Target workers lost since the last reconcile.
    pub lost: Vec<LostWorker>,
    /// Target workers taken out with their group since the last reconcile (see the module
    /// documentation); their pods are among those to delete.
    pub left_with_group: Vec<LeftWithGroup>,
    /// Worker pods taken into the target.
    pub adopted: Vec<u32>,
    /// Workers of `returning` back in the target, each with the target worker that gave way
    /// to it, if one did.
    pub returned: Vec<(u32, Option<u32>)>,
    /// Workers of `renew` taken out of the target, each with the worker that takes its place.
    pub renewed: Vec<(u32, u32)>,
    /// The change of the desired count, if `worker.replicas` changed.
    pub resized: Option<(u32, u32)>,
}

/// Decides the target workers; see the module documentation. The workers it deletes are
/// removed from the job: the plan drains them first when they were in host discovery.
pub fn decide(input: &WorkerInput<'_>) -> WorkerDecision {
    let mut decision = WorkerDecision::default();
    let mut next_index = input.next_index;
    let mut target: Vec<u32> = Vec::new();
    // Live worker pods outside the target: most likely the replacement of a loss that an
    // earlier reconcile created but could not record (the operator stopped between the two
    // writes). A replacement takes one of them before it takes a new index, so that one loss
    // is never replaced twice.
    let mut spare: BTreeSet<u32> = input
        .pods
        .iter()
        .filter(|&(index, pod)| {
            !input.previous_target.contains(index)
                && !input.add.contains(index)
                && !input.remove.contains(index)
                && !input.blacklisted.contains(index)
                && !input.draining.contains(index)
                && Loss::of(Some(pod)).is_none()
        })
        .map(|(&index, _)| index)
        .collect();
    // As many spares as the target holds beyond those it keeps take lost workers' places
    // before new workers would, the most useful first.
    let mut standing_in = live_spares(input);
    let mut stand_ins = standing_in.len().saturating_sub(input.kept_spares as usize);
    let mut stood_in = BTreeSet::new();
    for &index in input.previous_target {
        let pod = input.pods.get(&index).copied();
        let loss = Loss::of_worker(pod, input.departed.get(&index).copied());
        match loss.filter(|_| pod.is_some() || !input.held.contains(&index)) {
            None => target.push(index),
            Some(loss) => {
                let stand_in = (loss.is_replaced_under(input.policy) && stand_ins > 0)
                    .then(|| standing_in.pop())
                    .flatten();
                if stand_in.is_some() {
                    stand_ins -= 1;
                }
                stood_in.extend(stand_in);
                let replacement = stand_in.or_else(|| {
                    loss.is_replaced_under(input.policy).then(|| {
                        spare.pop_first().unwrap_or_else(|| {
                            next_index += 1;
                            next_index - 1
                        })
                    })
                });
                if stand_in.is_none() {
                    target.extend(replacement);
                }
                decision.lost.push(LostWorker {
                    index,
                    loss,
                    replacement,
                });
            }
        }
    }

    for index in target.clone() {
        if input.renew.contains(&index) && input.pods.contains_key(&index) {
            target.retain(|i| *i != index);
            decision.delete.push(index);
            let replacement = spare.pop_first().unwrap_or_else(|| {
                next_index += 1;
                next_index - 1
            });
            target.push(replacement);
            decision.renewed.push((index, replacement));
        }
    }

    // A lost worker takes its group with it. A worker whose pod is gone tells no group: a
    // group left short of workers takes one of those.
    let mut fallen: BTreeMap<u32, &LostWorker> = decision
        .lost
        .iter()
        .filter_map(|lost| Some((*input.groups.get(&lost.index)?, lost)))
        .collect();
    let mut vanished = decision
        .lost
        .iter()
        .filter(|lost| !input.pods.contains_key(&lost.index));
    let mut left_in: BTreeMap<u32, u32> = BTreeMap::new();
    for group in target.iter().filter_map(|index| input.groups.get(index)) {
        *left_in.entry(*group).or_default() += 1;
    }
    for (group, left) in left_in {
        if left < input.group_size
            && !fallen.contains_key(&group)
            && let Some(lost) = vanished.next()
        {
            fallen.insert(group, lost);
        }
    }
    for index in target.clone() {
        let Some(lost) = input.groups.get(&index).and_then(|group| fallen.get(group)) else {
            continue;
        };
        target.retain(|i| *i != index);
        if input.pods.contains_key(&index) {
            decision.delete.push(index);
        }
        let replacement = lost.replacement.map(|_| {
            next_index += 1;
            next_index - 1
        });
        target.extend(replacement);
        decision.left_with_group.push(LeftWithGroup {
            index,
            lost: lost.index,
            replacement,
        });
    }

    let lost: BTreeSet<u32> = decision.lost.iter().map(|l| l.index).collect();
    for &index in input.add {
        if !target.contains(&index) && !lost.contains(&index) && !input.blacklisted.contains(&index)
        {
            target.push(index);
        }
    }
    let not_ready = |index: &u32| {
        input.unstarted.contains(index)
            || !input.pods.get(index).is_some_and(|pod| pods::is_ready(pod))
    };
    for &index in input.returning {
        if input.groups.contains_key(&index) {
            // Its group left with it and was replaced.
            decision.delete.push(index);
            continue;
        }
        let gives_way = target
            .iter()
            .copied()
            .filter(|i| not_ready(i) && !input.returning.contains(i))
            .max();
        match gives_way {
            Some(other) => {
                target.retain(|i| *i != other);
                if input.pods.contains_key(&other) {
                    decision.delete.push(other);
                }
            }
            None if target.len() < input.desired as usize => {}
            None => {
                decision.delete.push(index);
                continue;
            }
        }
        target.push(index);
        decision.returned.push((index, gives_way));
    }

    // Up to the larger of the counts before and after a change of `replicas`: a worker
    // created for a growth that was not recorded is kept, and a shrink below picks its
    // victims by readiness as usual.
    let adoption_limit = input
        .previous_desired
        .map_or(input.desired, |previous| previous.max(input.desired))
        as usize;
    for (&index, pod) in input.pods {
        let untracked = !target.contains(&index)
            && !decision.delete.contains(&index)
            && !lost.contains(&index)
            && !input.blacklisted.contains(&index)
            && !input.draining.contains(&index);
        if untracked && Loss::of(Some(pod)).is_none() {
            if target.len() < adoption_limit {
                target.push(index);
                decision.adopted.push(index);
            } else {
                decision.delete.push(index);
            }
        }
    }

    for &index in input.remove {
        target.retain(|i| *i != index);
        if input.pods.contains_key(&index) && !decision.delete.contains(&index) {
            decision.delete.push(index);
        }
    }

    let desired = input.desired as usize;
    if input.previous_desired != Some(input.desired) {
        decision.resized = input
            .previous_desired
            .map(|previous| (previous, input.desired));
        while target.len() < desired {
            target.push(next_index);
            next_index += 1;
        }
        // Spares beyond those kept go first, the least useful first.
        let spares: Vec<u32> = live_spares(input)
            .into_iter()
            .filter(|index| target.contains(index) && !stood_in.contains(index))
            .collect();
        let excess = spares.len().saturating_sub(input.kept_spares as usize);
        for index in spares.into_iter().take(excess) {
            if target.len() <= desired {
                break;
            }
            target.retain(|i| *i != index);
            decision.delete.push(index);
        }
        if target.len() > desired {
            // Workers that are not ready cost nothing to drop; then those of the lowest
            // deletion cost go, and among equals the newest. A group ranks as its least
            // ready and cheapest worker, and as its newest. Waiting spares go last: the
            // count of their groups shrank.
            let ready = |index: &u32| input.pods.get(index).is_some_and(|pod| pods::is_ready(pod));
            let cost = |index: &u32| {
                input
                    .pods
                    .get(index)
                    .map_or(0, |pod| pods::deletion_cost(pod))
            };
            let members = |index: &u32| -> Vec<u32> {
                match input.groups.get(index) {
                    Some(group) => target
                        .iter()
                        .copied()
                        .filter(|i| input.groups.get(i) == Some(group))
                        .collect(),
                    None => vec![*index],
                }
            };
            let rank = |index: &u32| {
                let members = members(index);
                let all_ready = members.iter().all(ready);
                let cost = members.iter().map(cost).min().unwrap_or(0);
                let newest = members.iter().copied().max().unwrap_or(*index);
                let group = !input.spares.contains(index);
                (group, !all_ready, std::cmp::Reverse(cost), newest, *index)
            };
            let ranks: BTreeMap<u32, _> =
                target.iter().map(|index| (*index, rank(index))).collect();
            target.sort_by_key(|index| ranks[index]);
            decision.delete.extend(
                target
                    .drain(desired..)
                    .filter(|index| input.pods.contains_key(index)),
            );
        }
    }
    target.sort_unstable();
    decision.create = target
        .iter()
        .copied()
        .filter(|index| !input.pods.contains_key(index))
        .collect();
    decision.delete.sort_unstable();
    decision.target = target;
    decision
}

/// The spares of the previous target whose pods live, the least useful first: those not ready,
/// then the newest.
fn live_spares(input: &WorkerInput<'_>) -> Vec<u32> {
    let mut spares: Vec<u32> = input
        .previous_target
        .iter()
        .copied()
        .filter(|index| input.spares.contains(index))
        .filter(|index| {
            input
                .pods
                .get(index)
                .is_some_and(|pod| Loss::of(Some(pod)).is_none())
        })
        .collect();
    let ready = |index: &u32| input.pods.get(index).is_some_and(|pod| pods::is_ready(pod));
    spares.sort_by_key(|index| (ready(index), std::cmp::Reverse(*index)));
    spares
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn pod(phase: &str, ready: bool) -> Pod {
        let mut status = json!({"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]});
        if phase == "Failed" {
            status["containerStatuses"] = json!([{"name": "w", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]);
        }
        serde_json::from_value(json!({"metadata": {"name": "w"}, "status": status})).unwrap()
    }

    struct Case {
        policy: ReplicaRestartPolicy,
        desired: u32,
        previous_desired: Option<u32>,
        previous_target: Vec<u32>,
        pods: Vec<(u32, Pod)>,
        draining: BTreeSet<u32>,
        held: BTreeSet<u32>,
        add: Vec<u32>,
        remove: Vec<u32>,
        next_index: u32,
    }

    static NONE: BTreeSet<u32> = BTreeSet::new();
    static NO_PODS: BTreeMap<u32, &Pod> = BTreeMap::new();
    static NO_GROUPS: BTreeMap<u32, u32> = BTreeMap::new();

    /// The input of a job asking for `desired` workers, as at the last reconcile, whose
    /// target was `previous_target`, whose pods are `pods` and whose next index is
    /// `next_index`: restart policy `Never`, nothing blacklisted, draining, held, added,
    /// removed, renewed or departed, no groups and no spares.
    fn input<'a>(
        desired: u32,
        previous_target: &'a [u32],
        pods: &'a BTreeMap<u32, &'a Pod>,
        next_index: u32,
    ) -> WorkerInput<'a> {
        WorkerInput {
            policy: ReplicaRestartPolicy::Never,
            desired,
            previous_desired: Some(desired),
            previous_target,
            pods,
            departed: &NO_PODS,
            blacklisted: &NONE,
            returning: &NONE,
            unstarted: &NONE,
            draining: &NONE,
            held: &NONE,
            add: &[],
            remove: &[],
            next_index,
            groups: &NO_GROUPS,
            group_size: 1,
            spares: &NONE,
            kept_spares: 0,
            renew: &NONE,
        }
    }

    fn decide_case(case: &Case) -> WorkerDecision {
        let pods: BTreeMap<u32, &Pod> = case.pods.iter().map(|(i, p)| (*i, p)).collect();
        decide(&WorkerInput {
            policy: case.policy,
            previous_desired: case.previous_desired,
            draining: &case.draining,
            held: &case.held,
            add: &case.add,
            remove: &case.remove,
            ..input(case.desired, &case.previous_target, &pods, case.next_index)
        })
    }

    fn running() -> Pod {
        pod("Running", true)
    }

    /// A running pod whose node announced it goes away.
    fn disrupted() -> Pod {
        let mut pod = running();
        pod.status
            .get_or_insert_default()
            .conditions
            .get_or_insert_default()
            .push(
                serde_json::from_value(json!({"type": "DisruptionTarget", "status": "True",
                    "reason": crate::node_warnings::NODE_WARNING}))
                .unwrap(),
            );
        pod
    }

    /// A running, ready pod whose deletion cost annotation is `cost`.
    fn costing(cost: &str) -> Pod {
        let mut pod = running();
        pod.metadata.annotations = Some(BTreeMap::from([(
            eto_api::well_known::POD_DELETION_COST_ANNOTATION.to_string(),
            cost.to_string(),
        )]));
        pod
    }

    #[test]
    fn a_new_job_gets_its_desired_workers() {
        let case = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 3,
            previous_desired: None,
            previous_target: vec![],
            pods: vec![],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 0,
        };
        let decision = decide_case(&case);
        assert_eq!(decision.target, [0, 1, 2]);
        assert_eq!(decision.create, [0, 1, 2]);
        assert_eq!(decision.resized, None);
    }

    #[test]
    fn a_failed_worker_is_replaced_under_a_new_index_only_when_its_policy_says_so() {
        for (policy, expected_target, replacement) in [
            (ReplicaRestartPolicy::Never, vec![0, 2], None),
            (ReplicaRestartPolicy::OnFailure, vec![0, 2, 3], Some(3)),
            (ReplicaRestartPolicy::ExitCode, vec![0, 2], None),
            (ReplicaRestartPolicy::Always, vec![0, 2, 3], Some(3)),
        ] {
            let case = Case {
                policy,
                desired: 3,
                previous_desired: Some(3),
                previous_target: vec![0, 1, 2],
                pods: vec![(0, running()), (1, pod("Failed", false)), (2, running())],
                draining: BTreeSet::new(),
                held: BTreeSet::new(),
                add: vec![],
                remove: vec![],
                next_index: 3,
            };
            let decision = decide_case(&case);
            assert_eq!(decision.target, expected_target, "{policy:?}");
            assert_eq!(decision.lost.len(), 1);
            assert_eq!(decision.lost[0].index, 1);
            assert_eq!(decision.lost[0].replacement, replacement);
            assert_eq!(decision.create, replacement.into_iter().collect::<Vec<_>>());
            assert!(
                decision.delete.is_empty(),
                "failed pods are kept for inspection"
            );
        }
    }

    #[test]
    fn a_worker_whose_warning_was_withdrawn_returns_in_place_of_one_not_ready() {
        // Worker 1 was lost to its node's warning and replaced by 3; the warning is gone.
        let pending = pod("Pending", false);
        let starting = pod("Running", false);
        let ready = running();
        // (policy, previous target, pods besides 0, 1 and 2, target, delete, returned)
        type Case<'p> = (
            ReplicaRestartPolicy,
            Vec<u32>,
            Vec<(u32, &'p Pod)>,
            &'static [u32],
            &'static [u32],
            &'static [(u32, Option<u32>)],
        );
        let cases: [Case<'_>; 4] = [
            (
                ReplicaRestartPolicy::OnFailure,
                vec![0, 2, 3],
                vec![(3, &pending)],
                &[0, 1, 2],
                &[3],
                &[(1, Some(3))],
            ),
            (
                ReplicaRestartPolicy::OnFailure,
                vec![0, 2, 3],
                vec![(3, &starting)],
                &[0, 1, 2],
                &[3],
                &[(1, Some(3))],
            ),
            (
                ReplicaRestartPolicy::Never,
                vec![0, 2],
                vec![],
                &[0, 1, 2],
                &[],
                &[(1, None)],
            ),
            (
                ReplicaRestartPolicy::OnFailure,
                vec![0, 2, 3],
                vec![(3, &ready)],
                &[0, 2, 3],
                &[1],
                &[],
            ),
        ];
        for (policy, previous_target, extra, target, delete, returned) in cases {
            let mut pods: BTreeMap<u32, &Pod> =
                BTreeMap::from([(0, &ready), (1, &ready), (2, &ready)]);
            pods.extend(extra);
            let decision = decide(&WorkerInput {
                policy,
                blacklisted: &BTreeSet::from([1]),
                returning: &BTreeSet::from([1]),
                ..input(3, &previous_target, &pods, 4)
            });
            let case = format!("{policy:?} {previous_target:?} {:?}", pods.keys());
            assert_eq!(decision.target, target, "{case}");
            assert_eq!(decision.delete, delete, "{case}");
            assert_eq!(decision.returned, returned, "{case}");
            assert_eq!(decision.create, [] as [u32; 0], "{case}");
        }

        // A ready replacement whose training has not started (it waits at its gate) gives
        // way as one not ready does.
        let pods = BTreeMap::from([(0, &ready), (1, &ready), (2, &ready), (3, &ready)]);
        let decision = decide(&WorkerInput {
            policy: ReplicaRestartPolicy::OnFailure,
            blacklisted: &BTreeSet::from([1]),
            returning: &BTreeSet::from([1]),
            unstarted: &BTreeSet::from([3]),
            ..input(3, &[0, 2, 3], &pods, 4)
        });
        assert_eq!(decision.target, [0, 1, 2]);
        assert_eq!(decision.delete, [3]);
        assert_eq!(decision.returned, [(1, Some(3))]);
    }

    #[test]
    fn a_vanished_worker_is_lost_as_deleted() {
        let case = Case {
            policy: ReplicaRestartPolicy::Always,
            desired: 2,
            previous_desired: Some(2),
            previous_target: vec![0, 1],
            pods: vec![(0, running())],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 2,
        };
        let decision = decide_case(&case);
        assert_eq!(
            decision.lost,
            [LostWorker {
                index: 1,
                loss: Loss::Deleted,
                replacement: Some(2)
            }]
        );
        assert_eq!(decision.target, [0, 2]);
    }

    #[test]
    fn untracked_pods_are_adopted_up_to_the_desired_count_then_deleted() {
        let case = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 2,
            previous_desired: Some(2),
            previous_target: vec![0],
            pods: vec![(0, running()), (1, running()), (2, pod("Pending", false))],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 3,
        };
        let decision = decide_case(&case);
        assert_eq!(decision.target, [0, 1]);
        assert_eq!(decision.adopted, [1]);
        assert_eq!(decision.delete, [2]);
        assert!(decision.create.is_empty());
    }

    #[test]
    fn a_draining_worker_is_neither_adopted_nor_deleted() {
        let case = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 2,
            previous_desired: Some(2),
            previous_target: vec![0],
            pods: vec![(0, running()), (3, running())],
            draining: BTreeSet::from([3]),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 4,
        };
        let decision = decide_case(&case);
        assert_eq!(
            decision.target,
            [0],
            "short of two, yet the draining worker stays out"
        );
        assert!(decision.adopted.is_empty());
        assert!(decision.delete.is_empty());
    }

    #[test]
    fn a_scale_out_adds_its_workers_and_a_scale_in_removes_its_own() {
        let out = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 2,
            previous_desired: Some(2),
            previous_target: vec![0, 1],
            pods: vec![(0, running()), (1, running()), (3, pod("Pending", false))],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            // 3 exists (an earlier reconcile created it), 4 is new.
            add: vec![3, 4],
            remove: vec![],
            next_index: 5,
        };
        let decision = decide_case(&out);
        assert_eq!(decision.target, [0, 1, 3, 4]);
        assert_eq!(decision.create, [4]);
        assert!(
            decision.delete.is_empty(),
            "not excess: the request holds them"
        );

        let into = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 3,
            previous_desired: Some(3),
            previous_target: vec![0, 1, 2],
            pods: vec![(0, running()), (1, running()), (2, running())],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![1],
            next_index: 3,
        };
        let decision = decide_case(&into);
        assert_eq!(decision.target, [0, 2]);
        assert_eq!(decision.delete, [1]);
        assert!(decision.create.is_empty(), "not made up for");
    }

    #[test]
    fn an_added_worker_that_was_lost_is_not_added_again() {
        let case = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 2,
            previous_desired: Some(2),
            previous_target: vec![0, 3],
            pods: vec![(0, running()), (3, pod("Failed", false))],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![3],
            remove: vec![],
            next_index: 4,
        };
        let decision = decide_case(&case);
        assert_eq!(decision.target, [0]);
        assert_eq!(decision.lost.len(), 1);
        assert!(decision.create.is_empty());
    }

    #[test]
    fn an_operator_that_stopped_before_recording_its_workers_adopts_them() {
        // Status never written: no target, no previous desired count, but the pods exist.
        let case = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 2,
            previous_desired: None,
            previous_target: vec![],
            pods: vec![(0, pod("Pending", false)), (1, pod("Pending", false))],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 2,
        };
        let decision = decide_case(&case);
        assert_eq!(decision.target, [0, 1]);
        assert!(decision.create.is_empty(), "no duplicate workers");
        assert!(decision.delete.is_empty(), "no orphans");
    }

    #[test]
    fn a_worker_created_but_not_recorded_is_kept_for_what_it_was_created_for() {
        // An operator created the worker (index 3, or 2) and stopped before writing the
        // job's status: the next reconcile finds it untracked.
        let cases = [
            (
                "the replacement of failed worker 1",
                Case {
                    policy: ReplicaRestartPolicy::OnFailure,
                    desired: 3,
                    previous_desired: Some(3),
                    previous_target: vec![0, 1, 2],
                    pods: vec![
                        (0, running()),
                        (1, pod("Failed", false)),
                        (2, running()),
                        (3, pod("Pending", false)),
                    ],
                    draining: BTreeSet::new(),
                    held: BTreeSet::new(),
                    add: vec![],
                    remove: vec![],
                    next_index: 4,
                },
                vec![0, 2, 3],
            ),
            (
                "growth from 2 to 3 replicas",
                Case {
                    policy: ReplicaRestartPolicy::Never,
                    desired: 3,
                    previous_desired: Some(2),
                    previous_target: vec![0, 1],
                    pods: vec![(0, running()), (1, running()), (2, pod("Pending", false))],
                    draining: BTreeSet::new(),
                    held: BTreeSet::new(),
                    add: vec![],
                    remove: vec![],
                    next_index: 3,
                },
                vec![0, 1, 2],
            ),
        ];
        for (what, case, target) in cases {
            let decision = decide_case(&case);
            assert_eq!(decision.target, target, "{what}");
            assert!(decision.create.is_empty(), "no second worker: {what}");
            assert!(decision.delete.is_empty(), "the worker is kept: {what}");
        }
    }

    #[test]
    fn workers_waiting_on_an_old_template_are_renewed_whatever_their_policy() {
        let waiting = pod("Pending", false);
        let pods: BTreeMap<u32, &Pod> = [(0, &waiting), (1, &waiting)].into_iter().collect();
        let renew = BTreeSet::from([1]);
        let decision = decide(&WorkerInput {
            renew: &renew,
            ..input(2, &[0, 1], &pods, 2)
        });
        assert_eq!(decision.target, [0, 2]);
        assert_eq!(decision.create, [2]);
        assert_eq!(decision.delete, [1]);
        assert_eq!(decision.renewed, [(1, 2)]);
        assert!(decision.lost.is_empty(), "a renewed worker is not lost");
    }

    #[test]
    fn scaling_out_adds_new_indices_and_scaling_in_drops_unready_then_newest() {
        let grow = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 4,
            previous_desired: Some(2),
            previous_target: vec![0, 1],
            pods: vec![(0, running()), (1, running())],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 5,
        };
        let decision = decide_case(&grow);
        assert_eq!(decision.target, [0, 1, 5, 6]);
        assert_eq!(decision.resized, Some((2, 4)));

        let shrink = Case {
            policy: ReplicaRestartPolicy::Never,
            desired: 2,
            previous_desired: Some(4),
            previous_target: vec![0, 1, 2, 3],
            pods: vec![
                (0, running()),
                (1, pod("Pending", false)),
                (2, running()),
                (3, running()),
            ],
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 4,
        };
        let decision = decide_case(&shrink);
        assert_eq!(decision.target, [0, 2]);
        assert_eq!(decision.delete, [1, 3]);
        assert_eq!(decision.resized, Some((4, 2)));
    }

    #[test]
    fn a_shrink_keeps_the_workers_waiting_as_spares() {
        let ready = running();
        let pods: BTreeMap<u32, &Pod> = (0..5).map(|index| (index, &ready)).collect();
        // Five workers: four groups and the spare 4; the job goes to three groups and a spare.
        for (spares, target, delete) in [
            (BTreeSet::from([4]), vec![0, 1, 2, 4], vec![3]),
            (BTreeSet::new(), vec![0, 1, 2, 3], vec![4]),
        ] {
            let decision = decide(&WorkerInput {
                policy: ReplicaRestartPolicy::Always,
                previous_desired: Some(5),
                spares: &spares,
                kept_spares: 1,
                ..input(4, &[0, 1, 2, 3, 4], &pods, 5)
            });
            assert_eq!(
                (decision.target, decision.delete),
                (target, delete),
                "{spares:?}"
            );
        }
    }

    /// Three groups and the spares 3 and 4 (started for the warned groups 1 and 2 held, see
    /// crate::warned_handover, or one of them the job's own), of which `ready` are ready; the
    /// hold ends with `lost` lost and the job keeping `kept_spares` spares of its own.
    fn hold_ends(ready: &[u32], lost: &[u32], kept_spares: u32) -> WorkerDecision {
        let running = running();
        let starting = pod("Pending", false);
        let disrupted = disrupted();
        let pods: BTreeMap<u32, &Pod> = (0..5)
            .map(|index| {
                let pod = if lost.contains(&index) {
                    &disrupted
                } else if index < 3 || ready.contains(&index) {
                    &running
                } else {
                    &starting
                };
                (index, pod)
            })
            .collect();
        decide(&WorkerInput {
            policy: ReplicaRestartPolicy::OnFailure,
            previous_desired: Some(5),
            spares: &BTreeSet::from([3, 4]),
            kept_spares,
            ..input(3 + kept_spares, &[0, 1, 2, 3, 4], &pods, 5)
        })
    }

    fn replacements(decision: &WorkerDecision) -> Vec<(u32, Option<u32>)> {
        decision
            .lost
            .iter()
            .map(|lost| (lost.index, lost.replacement))
            .collect()
    }

    #[test]
    fn spares_started_for_held_groups_take_their_places_when_the_hold_ends() {
        let both_ready = hold_ends(&[3, 4], &[1, 2], 0);
        assert_eq!(
            replacements(&both_ready),
            [(1, Some(3)), (2, Some(4))],
            "each lost group's replacement is a spare started for it, not a new worker"
        );
        assert_eq!(both_ready.target, [0, 3, 4]);
        assert_eq!(
            (both_ready.create, both_ready.delete),
            (vec![], vec![]),
            "nothing created, nothing dropped"
        );

        let one_ready = hold_ends(&[3], &[1, 2], 0);
        assert_eq!(
            replacements(&one_ready),
            [(1, Some(3)), (2, Some(4))],
            "the ready spare replaces the first loss"
        );
        assert_eq!(one_ready.target, [0, 3, 4]);
        assert!(one_ready.create.is_empty());
    }

    #[test]
    fn spares_of_a_hold_that_ends_without_a_loss_go_first() {
        let withdrawn = hold_ends(&[3], &[], 0);
        assert!(withdrawn.lost.is_empty());
        assert_eq!(withdrawn.target, [0, 1, 2], "the groups stay");
        assert_eq!(withdrawn.delete, [3, 4], "both spares started for them go");
    }

    #[test]
    fn a_job_keeps_its_own_spares_after_a_hold() {
        // The job keeps one spare of its own: of the two started for the hold, one takes the
        // lost group's place and the other stays as that spare.
        let decision = hold_ends(&[3, 4], &[1], 1);
        assert_eq!(replacements(&decision), [(1, Some(3))]);
        assert_eq!(decision.target, [0, 2, 3, 4]);
        assert!(decision.create.is_empty() && decision.delete.is_empty());

        // Without a loss, the least useful goes: the one not ready.
        let decision = hold_ends(&[3], &[], 1);
        assert_eq!(decision.delete, [4]);
    }

    #[test]
    fn a_shrink_removes_the_workers_of_the_lowest_deletion_cost_first() {
        let shrink = |pods: Vec<(u32, Pod)>, desired: u32| Case {
            policy: ReplicaRestartPolicy::Never,
            desired,
            previous_desired: Some(3),
            previous_target: vec![0, 1, 2],
            pods,
            draining: BTreeSet::new(),
            held: BTreeSet::new(),
            add: vec![],
            remove: vec![],
            next_index: 3,
        };
        let cases = [
            (
                "a negative cost goes first",
                vec![(0, costing("-1")), (1, running()), (2, running())],
                2,
                vec![0],
            ),
            (
                "a positive cost stays, the newest of the others goes",
                vec![(0, running()), (1, running()), (2, costing("5"))],
                2,
                vec![1],
            ),
            (
                "among equal costs the newest goes",
                vec![(0, costing("-1")), (1, costing("-1")), (2, running())],
                2,
                vec![1],
            ),
            (
                "a cost that is not an int32 counts as 0",
                vec![(0, costing("cheap")), (1, running()), (2, running())],
                2,
                vec![2],
            ),
            (
                "a worker that is not ready goes before a cheap one",
                vec![
                    (0, costing("-10")),
                    (1, pod("Pending", false)),
                    (2, running()),
                ],
                2,
                vec![1],
            ),
            (
                "two go, the cheapest first",
                vec![(0, costing("3")), (1, costing("-2")), (2, costing("1"))],
                1,
                vec![1, 2],
            ),
        ];
        for (what, pods, desired, deleted) in cases {
            let decision = decide_case(&shrink(pods, desired));
            assert_eq!(decision.delete, deleted, "{what}");
        }
    }

    #[test]
    fn workers_of_one_group_come_and_go_together() {
        // Three groups of two: 0 and 1, 2 and 3, 4 and 5.
        let groups = BTreeMap::from([(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (5, 2)]);
        let failed = || pod("Failed", false);
        struct Row {
            what: &'static str,
            policy: ReplicaRestartPolicy,
            desired: u32,
            pods: Vec<(u32, Pod)>,
            returning: BTreeSet<u32>,
            target: Vec<u32>,
            delete: Vec<u32>,
            left_with_group: Vec<LeftWithGroup>,
        }
        let all_running = |changed: Vec<(u32, Pod)>| -> Vec<(u32, Pod)> {
            let mut pods: BTreeMap<u32, Pod> = (0..6).map(|i| (i, running())).collect();
            pods.extend(changed);
            pods.into_iter().collect()
        };
        let left = |index, lost, replacement| LeftWithGroup {
            index,
            lost,
            replacement,
        };
        let rows = [
            Row {
                what: "a failed worker takes its group, both replaced",
                policy: ReplicaRestartPolicy::Always,
                desired: 6,
                pods: all_running(vec![(3, failed())]),
                returning: BTreeSet::new(),
                target: vec![0, 1, 4, 5, 6, 7],
                delete: vec![2],
                left_with_group: vec![left(2, 3, Some(7))],
            },
            Row {
                what: "a failed worker takes its group, neither replaced",
                policy: ReplicaRestartPolicy::Never,
                desired: 6,
                pods: all_running(vec![(0, failed())]),
                returning: BTreeSet::new(),
                target: vec![2, 3, 4, 5],
                delete: vec![1],
                left_with_group: vec![left(1, 0, None)],
            },
            Row {
                what: "a vanished worker takes its group",
                policy: ReplicaRestartPolicy::Always,
                desired: 6,
                pods: all_running(vec![])
                    .into_iter()
                    .filter(|(i, _)| *i != 4)
                    .collect(),
                returning: BTreeSet::new(),
                target: vec![0, 1, 2, 3, 6, 7],
                delete: vec![5],
                left_with_group: vec![left(5, 4, Some(7))],
            },
            Row {
                what: "a shrink drops the group of the cheapest worker",
                policy: ReplicaRestartPolicy::Always,
                desired: 4,
                pods: all_running(vec![(1, costing("-5")), (4, costing("100"))]),
                returning: BTreeSet::new(),
                target: vec![2, 3, 4, 5],
                delete: vec![0, 1],
                left_with_group: vec![],
            },
            Row {
                what: "a shrink drops a group with a worker not ready first",
                policy: ReplicaRestartPolicy::Always,
                desired: 4,
                pods: all_running(vec![(2, pod("Pending", false)), (0, costing("-5"))]),
                returning: BTreeSet::new(),
                target: vec![0, 1, 4, 5],
                delete: vec![2, 3],
                left_with_group: vec![],
            },
            Row {
                what: "a shrink among equals drops the newest group",
                policy: ReplicaRestartPolicy::Always,
                desired: 2,
                pods: all_running(vec![]),
                returning: BTreeSet::new(),
                target: vec![0, 1],
                delete: vec![2, 3, 4, 5],
                left_with_group: vec![],
            },
            Row {
                what: "a worker of a group that left never returns alone",
                policy: ReplicaRestartPolicy::Always,
                desired: 6,
                pods: all_running(vec![(8, running())]),
                returning: BTreeSet::from([8]),
                target: vec![0, 1, 2, 3, 4, 5],
                delete: vec![8],
                left_with_group: vec![],
            },
        ];
        for row in rows {
            let pods: BTreeMap<u32, &Pod> = row.pods.iter().map(|(i, p)| (*i, p)).collect();
            // A pod's labels tell its group: one that is gone tells none.
            let mut groups = groups.clone();
            groups.insert(8, 3);
            groups.retain(|index, _| pods.contains_key(index));
            let previous_desired = if row.what.starts_with("a shrink") {
                6
            } else {
                row.desired
            };
            let decision = decide(&WorkerInput {
                policy: row.policy,
                previous_desired: Some(previous_desired),
                blacklisted: &row.returning,
                returning: &row.returning,
                groups: &groups,
                group_size: 2,
                ..input(row.desired, &[0, 1, 2, 3, 4, 5], &pods, 6)
            });
            assert_eq!(decision.target, row.target, "{}", row.what);
            assert_eq!(decision.delete, row.delete, "{}", row.what);
            assert_eq!(
                decision.left_with_group, row.left_with_group,
                "{}",
                row.what
            );
        }
    }

    #[test]
    fn a_worker_whose_pod_went_is_replaced_when_its_last_state_shows_the_platform_took_it() {
        // The pod garbage collector marks a pod whose node vanished and deletes it at once:
        // the watch may show its deletion alone, with the mark in the object it deletes.
        let mut gone_with_its_node = pod("Failed", false);
        gone_with_its_node
            .status
            .get_or_insert_default()
            .conditions
            .get_or_insert_default()
            .push(
                serde_json::from_value(json!({"type": "DisruptionTarget", "status": "True",
                    "reason": "DeletionByPodGC"}))
                .unwrap(),
            );
        let mut deleted_by_someone = running();
        deleted_by_someone.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        // (case, its last state, the loss, replaced under OnFailure)
        let cases = [
            (
                "gone with its node",
                Some(gone_with_its_node),
                "Disrupted",
                true,
            ),
            (
                "deleted by someone",
                Some(deleted_by_someone),
                "Deleted",
                false,
            ),
            ("last seen running", Some(running()), "Deleted", false),
            ("its deletion unseen", None, "Deleted", false),
        ];
        let live = running();
        for (case, last, kind, replaced) in cases {
            let pods = BTreeMap::from([(1, &live)]);
            let departed: BTreeMap<u32, &Pod> = last.iter().map(|pod| (0, pod)).collect();
            let decision = decide(&WorkerInput {
                policy: ReplicaRestartPolicy::OnFailure,
                departed: &departed,
                ..input(2, &[0, 1], &pods, 2)
            });
            assert_eq!(decision.lost.len(), 1, "{case}");
            assert_eq!(decision.lost[0].loss.kind(), kind, "{case}");
            assert_eq!(decision.lost[0].replacement.is_some(), replaced, "{case}");
            assert_eq!(decision.create.len(), usize::from(replaced), "{case}");
        }
    }
}
