//! Make-before-break for a warned node's replica groups: they train on until spares wait to
//! take their places.
//!
//! A worker on a node that announced it goes away is seen as disrupted at once (see
//! [`crate::node_warnings`]): it leaves its group and is replaced elsewhere. For a job of
//! TorchFT replica groups that costs the other groups about a second, unless the warned groups
//! are so many that the groups left number fewer than `minReplicas`: then the job would
//! suspend, checkpoint and resume, and nothing trains until new groups start.
//!
//! Such groups are *held* instead: they train on, in their quorum, while eto starts one spare
//! per held group on other nodes at once (beside any `spareReplicas`; see
//! `plan/run/workers.rs`). Once enough spares wait that the groups on unwarned nodes and the
//! waiting spares together reach the minimum, the hold ends: the warned groups are seen as
//! disrupted, as without it (their `Reclaim` notices, their leaving), each replaced by one of
//! the spares started for it, and the waiting spares take the groups' ids (see
//! `kind::pytorch_job::replica_groups::seat`) while the others train on. The job never drops
//! below its minimum and does not suspend.
//!
//! A group is held until half its node's warning is left, or until `checkpointGraceSeconds`
//! are left if that is less: spares that do not wait by then (no capacity elsewhere) end the
//! hold, and the job suspends as it would have at the warning, with that time left to save
//! its checkpoint, having trained in the meantime. A warning withdrawn during the hold ends it
//! too, and costs nothing: the spares started for it go.
//!
//! A spare waits once its pod is ready: with the readiness probe eto's helper serves (the file
//! `eto_notice.replica_group()` creates), once its training is set up and waits for an id.
//! Without a probe that is as soon as its container runs, before the interpreter, `import
//! torch` and the model: the held groups then leave while the spares still start, and the
//! others wait for them in a quorum below the minimum for that long, still far less than a
//! suspend.
//!
//! Groups of several pods, and workers that do not train in replica groups, are not held:
//! there no spare can take a place without a restart of its group. A group that re-forms (an
//! elastic PyTorchJob whose rendezvous eto hosts) restarts at every change anyway, and is
//! held for another reason ([`hold_reforming`]): its warned members leaving first, their
//! replacements joining later, would re-form it twice, the second time after the
//! replacements' whole start. There every warned member is held while a Worker started for
//! it waits at its shut gate (see [`crate::joining`]), whatever the minimum; then the members
//! save and leave (see [`crate::reforming_group`]) and the waiting Workers, standing in for
//! them, start their training as they go: one re-formation, with them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eto_api::job_status::WarnedNode;
use k8s_openapi::api::core::v1::Pod;

use crate::job::JobRef;
use crate::spares::KeptWhen;
use crate::{joining, names, pods};

/// The reason of the event that says a warned node's groups train on while spares start.
pub const HANDING_OVER: &str = "WarnedGroupsHandingOver";

/// The warned groups of a job that train on, and until when at the latest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hold {
    /// The held workers' pod names.
    pub workers: BTreeSet<String>,
    /// When the hold ends at the latest (see [`ends`]), for the earliest of their nodes.
    pub until: Option<jiff::Timestamp>,
}

/// What the hold is decided from.
#[derive(Clone, Copy, Debug)]
pub struct HoldInput<'a> {
    /// The job.
    pub job: JobRef<'a>,
    /// The job's pods.
    pub pods: &'a [&'a Pod],
    /// The warned nodes, by node.
    pub warnings: &'a BTreeMap<&'a str, &'a WarnedNode>,
    /// The job's target workers (`status.targetWorkers`): the workers of its current run.
    pub target: &'a [String],
    /// The fewest groups the job trains with.
    pub min: u32,
    /// The spares the job keeps of its own (`spareReplicas`).
    pub spares: u32,
    /// In a group that re-forms, the Workers whose agents its coordinator reports as members
    /// of its round, when it reports a round: one beside it (a spare, or waiting) has nothing
    /// to save and is not held.
    pub round_members: Option<&'a [&'a str]>,
    /// The time its training gets to save a checkpoint before a suspend deletes its pods
    /// (`checkpointGraceSeconds`).
    pub grace: Duration,
    /// Now.
    pub now: jiff::Timestamp,
}

/// The warned groups held (see the module documentation): none for a job whose spares do not
/// take a group's place of their own (groups of several pods, workers outside replica groups),
/// but for a group that re-forms (see [`hold_reforming`]).
pub fn hold(input: &HoldInput<'_>) -> Hold {
    let job = input.job;
    if job.pods_per_group() != 1 {
        return Hold::default();
    }
    if job.coordinator().group_reforms {
        return hold_reforming(input);
    }
    if job.spares_kept() != KeptWhen::Always {
        return Hold::default();
    }
    // The live, ready workers of the target, by index.
    let workers: BTreeMap<u32, &Pod> = target_workers(input)
        .filter(|(_, pod)| pods::is_ready(pod))
        .collect();
    let spares = job.waiting_spares(&workers);
    let keeping = workers
        .values()
        .filter(|pod| warning_of(input, pod).is_none())
        .count();
    if keeping >= input.min as usize {
        return Hold::default();
    }
    held(
        input,
        workers
            .iter()
            .filter(|(index, _)| !spares.contains(index))
            .map(|(_, pod)| *pod),
    )
}

/// The warned Workers held in a group that re-forms (an elastic PyTorchJob whose rendezvous
/// eto hosts), which keeps no spares of its own: every warned member of the group, while
/// fewer Workers wait at their shut gate to join it (see [`crate::joining`]) on other nodes
/// than there are warned members, or while another Worker that joins with them still starts
/// on its node (one that waits for capacity is not waited for). Such a Worker, started for
/// the hold, joins when the warned ones have saved and left (see [`crate::reforming_group`]):
/// the group re-forms once, with every Worker that joins, instead of once without the warned
/// Workers and again when their replacements come (or, where the warned ones are too many to
/// keep the minimum, instead of a suspend).
pub fn hold_reforming(input: &HoldInput<'_>) -> Hold {
    if input.spares > 0 {
        // A spare of the job's own takes a leaving member's place already.
        return Hold::default();
    }
    let workers: Vec<&Pod> = target_workers(input).map(|(_, pod)| pod).collect();
    let in_round = |pod: &Pod| {
        input.round_members.is_none_or(|members| {
            pod.metadata
                .name
                .as_deref()
                .is_some_and(|name| members.contains(&name))
        })
    };
    let members = workers
        .iter()
        .copied()
        .filter(|pod| pods::is_ready(pod) && joining::is_open(pod) && in_round(pod));
    // The Workers off warned nodes that join at the group's next re-formation: those at
    // their shut gate, and those still starting on a node (the others wait for capacity).
    let (at_gate, starting): (Vec<&Pod>, Vec<&Pod>) = workers
        .iter()
        .copied()
        .filter(|pod| !joining::is_open(pod) && warning_of(input, pod).is_none())
        .filter(|pod| pods::node(pod).is_some())
        .partition(|pod| joining::waits_at_gate(pod));
    let warned: Vec<&Pod> = members
        .filter(|pod| warning_of(input, pod).is_some())
        .collect();
    if warned.len() <= at_gate.len() && starting.is_empty() {
        return Hold::default();
    }
    held(input, warned.into_iter())
}

/// The live workers of the target (neither disrupted, nor being deleted, nor finished), by
/// index.
fn target_workers<'p>(input: &HoldInput<'p>) -> impl Iterator<Item = (u32, &'p Pod)> {
    input
        .pods
        .iter()
        .copied()
        .filter(|pod| {
            pod.metadata
                .name
                .as_ref()
                .is_some_and(|name| input.target.contains(name))
        })
        .filter(|pod| {
            !pods::is_disrupted(pod) && !pods::is_terminating(pod) && !pods::is_finished(pod)
        })
        .filter_map(|pod| {
            let index = names::worker_index(input.job.name(), pod.metadata.name.as_deref()?)?;
            Some((index, pod))
        })
}

/// The warning of the node `pod` runs on, if it announced it goes.
fn warning_of<'w>(input: &HoldInput<'w>, pod: &Pod) -> Option<&'w WarnedNode> {
    input.warnings.get(pods::node(pod)?).copied()
}

/// The hold of those of `candidates` whose node is warned, but for those whose hold would
/// have ended already.
fn held<'p>(input: &HoldInput<'_>, candidates: impl Iterator<Item = &'p Pod>) -> Hold {
    let mut hold = Hold::default();
    for pod in candidates {
        let Some(warning) = warning_of(input, pod) else {
            continue;
        };
        let ends = ends(warning, input.grace);
        if ends <= input.now {
            continue;
        }
        hold.workers.extend(pod.metadata.name.clone());
        hold.until = Some(hold.until.map_or(ends, |until| until.min(ends)));
    }
    hold
}

/// When a hold of groups on the node of `warning` ends at the latest: half-way through the
/// warning, or `grace` before the node goes if that is later.
pub fn ends(warning: &WarnedNode, grace: Duration) -> jiff::Timestamp {
    let lead = warning
        .deadline
        .0
        .duration_since(warning.since.0)
        .unsigned_abs();
    crate::time::before(warning.deadline.0, grace.min(lead / 2))
}

/// How the start of a hold reads in its event: `workers` held, as many spares or joining
/// Workers started for them (those of a group that `reforms`), until `until` at the latest.
pub fn describe(workers: &BTreeSet<String>, until: jiff::Timestamp, reforms: bool) -> String {
    let names: Vec<&str> = workers.iter().map(String::as_str).collect();
    let until = crate::time::as_stored(until);
    if reforms {
        return format!(
            "{} {} on nodes that announced they go away: {} on while {} Worker(s) start on \
             other nodes and wait to join, then save and leave, and the group re-forms once, \
             with the new Workers; by {until} at the latest (without them by then, the \
             warned Workers save and leave without waiting for them)",
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" },
            if names.len() == 1 {
                "it trains"
            } else {
                "they train"
            },
            names.len()
        );
    }
    format!(
        "the replica groups of {} are on nodes that announced they go away, and the job would \
         have too few groups without them: they train on while {} spare(s) start on other \
         nodes, and leave once enough spares wait to keep the minimum of groups, by {until} at \
         the latest (without enough spares by then, the job suspends and saves its checkpoint)",
        names.join(", "),
        workers.len()
    )
}
