//! The life of a request: checked when its turn comes, carried out, finished or abandoned (see
//! the module documentation of [`super`]).

use eto_api::common::ScalerPhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::conditions::{self, Observation};
use crate::loss::Loss;
use crate::{names, pods};

/// A transition of a request's status.
pub(super) struct Transition<'a> {
    scaler: &'a Scaler,
    state: ScalerState,
    now: jiff::Timestamp,
}

impl<'a> Transition<'a> {
    pub(super) fn of(scaler: &'a Scaler, now: jiff::Timestamp) -> Self {
        Self {
            scaler,
            state: scaler.state.clone(),
            now,
        }
    }

    fn condition(mut self, type_: &str, holds: bool, reason: &str, message: &str) -> Self {
        conditions::set(
            &mut self.state.conditions,
            type_,
            Observation {
                holds,
                reason,
                message,
            },
            self.scaler.generation,
            self.now,
        );
        self
    }

    fn queued(self, message: &str) -> ScalerUpdate {
        let mut transition = self.condition(conditions::CREATED, true, "Queued", message);
        transition.state.phase = Some(ScalerPhase::Created);
        transition.done()
    }

    fn started(self, pods: Vec<String>, message: &str) -> ScalerUpdate {
        let mut transition = self
            .condition(
                conditions::CREATED,
                true,
                "Started",
                "the request is carried out",
            )
            .condition(conditions::SCALING, true, "ScalingStart", message);
        transition.state.phase = Some(ScalerPhase::Scaling);
        transition.state.start_time = Some(Time(transition.now));
        transition.state.pods = pods;
        transition.done()
    }

    pub(super) fn finished(self, succeeded: bool, reason: &str, message: &str) -> ScalerUpdate {
        let (type_, phase) = if succeeded {
            (SCALE_SUCCEEDED, ScalerPhase::Succeeded)
        } else {
            (SCALE_FAILED, ScalerPhase::Failed)
        };
        let mut transition = self.condition(type_, true, reason, message);
        if conditions::find(&transition.state.conditions, conditions::SCALING).is_some() {
            transition = transition.condition(conditions::SCALING, false, reason, message);
        }
        transition.state.phase = Some(phase);
        transition.state.completion_time = Some(Time(transition.now));
        transition.done()
    }

    fn done(self) -> ScalerUpdate {
        self.scaler.update(self.state)
    }
}

/// The requests of the job named `job`, newest first.
pub(super) fn of_job<'a>(job: &str, scalers: &'a [Scaler]) -> Vec<&'a Scaler> {
    let mut mine: Vec<&Scaler> = scalers.iter().filter(|s| s.job == job).collect();
    mine.sort_by(|a, b| (b.created, &b.name).cmp(&(a.created, &a.name)));
    mine
}

/// Carries the job's requests one step; see the module documentation.
pub fn step(job: &JobSide<'_>, scalers: &[Scaler]) -> Step {
    let mut step = Step::default();
    let mine = of_job(job.name, scalers);
    adopt(job.uid, &mine, &mut step);
    let unfinished: Vec<&Scaler> = mine.into_iter().filter(|s| !s.is_finished()).collect();
    let under_way = unfinished
        .iter()
        .copied()
        .find(|s| s.state.phase == Some(ScalerPhase::Scaling));
    let mut turn = under_way;
    match under_way {
        Some(scaler) => progress(job, scaler, &mut step),
        None if job.running && !job.resizing => {
            if let Some(next) = unfinished.first().copied() {
                turn = Some(next);
                start(job, next, &mut step);
            }
        }
        None => {}
    }
    let waiting_for = match &step.under_way {
        Some((reference, _)) => format!("waiting for {reference} to finish"),
        None => format!("waiting for TrainingJob {} to run", job.name),
    };
    for scaler in unfinished {
        if turn.is_some_and(|t| std::ptr::eq(t, scaler)) {
            continue;
        }
        let update = Transition::of(scaler, job.now).queued(&waiting_for);
        step.updates.push(update);
    }
    step.updates.retain(|u| u.status.is_some() || u.adopt);
    step
}

/// Fails every unfinished request of the job: it `ended` (finished, restarted).
pub fn abandon(
    job: &str,
    uid: &str,
    scalers: &[Scaler],
    ended: &str,
    now: jiff::Timestamp,
) -> Step {
    let mut step = Step::default();
    let mine = of_job(job, scalers);
    adopt(uid, &mine, &mut step);
    for scaler in mine.into_iter().filter(|s| !s.is_finished()) {
        let message = format!("abandoned: {ended}");
        if scaler.state.phase == Some(ScalerPhase::Scaling) {
            step.finished = Some(Finished {
                reference: scaler.reference(),
                succeeded: false,
                message: message.clone(),
            });
        }
        step.updates
            .push(Transition::of(scaler, now).finished(false, "JobEnded", &message));
    }
    step.updates.retain(|u| u.status.is_some() || u.adopt);
    step
}

pub(super) fn adopt(uid: &str, mine: &[&Scaler], step: &mut Step) {
    for scaler in mine {
        if !scaler.owners.iter().any(|owner| owner == uid) {
            step.updates.push(ScalerUpdate {
                kind: scaler.kind,
                name: scaler.name.clone(),
                status: None,
                adopt: true,
            });
        }
    }
}

/// Adds `update` to the step, merging it with an adoption of the same request.
pub(super) fn push(step: &mut Step, update: ScalerUpdate) {
    match step
        .updates
        .iter_mut()
        .find(|u| u.kind == update.kind && u.name == update.name)
    {
        Some(existing) => existing.status = update.status,
        None => step.updates.push(update),
    }
}

pub(super) fn fail(
    job: &JobSide<'_>,
    scaler: &Scaler,
    reason: &str,
    message: &str,
    step: &mut Step,
) {
    let reference = scaler.reference();
    step.events.push(ScalingEvent {
        warning: true,
        reason: SCALE_FAILED,
        note: format!("{reference} failed: {message}"),
    });
    if scaler.state.phase == Some(ScalerPhase::Scaling) {
        step.finished = Some(Finished {
            reference,
            succeeded: false,
            message: message.to_string(),
        });
    }
    push(
        step,
        Transition::of(scaler, job.now).finished(false, reason, message),
    );
}

/// The live workers of the target: indices whose pods exist and are not lost.
pub(super) fn live(job: &JobSide<'_>) -> Vec<u32> {
    job.target
        .iter()
        .copied()
        .filter(|index| {
            job.pods
                .get(index)
                .is_some_and(|pod| Loss::of(Some(pod)).is_none())
        })
        .collect()
}

pub(super) fn is_ready(job: &JobSide<'_>, index: u32) -> bool {
    job.pods
        .get(&index)
        .is_some_and(|pod| pods::is_ready(pod) && !pods::is_disrupted(pod))
}

pub(super) fn start(job: &JobSide<'_>, scaler: &Scaler, step: &mut Step) {
    if let Some(script) = &scaler.script {
        let message = format!(
            "spec.script: eto does not run scripts on the launcher ({script:?}): that needs pods/exec, which eto never uses. Without a script the workers simply join or leave host discovery, which is what Horovod reads; create the request without spec.script"
        );
        return fail(job, scaler, "ScriptNotSupported", &message, step);
    }
    let request = match &scaler.request {
        Ok(request) => request,
        Err(error) => {
            return fail(job, scaler, "InvalidSpec", &error.to_string(), step);
        }
    };
    let live = live(job);
    let have = live.len();
    match request {
        Request::Add(count) => {
            let count = *count as usize;
            if let Some(max) = job.counts.max.filter(|max| have + count > *max as usize) {
                let message = format!(
                    "spec.toAdd.count: adding {count} to {have} workers would make {}, more than worker.maxReplicas ({max})",
                    have + count
                );
                return fail(job, scaler, "AboveMaxReplicas", &message, step);
            }
            let indices: Vec<u32> = (job.next_index..).take(count).collect();
            let pods: Vec<String> = indices
                .iter()
                .map(|i| names::worker(job.name, *i))
                .collect();
            let message = format!("adding {count} workers: {}", pods.join(", "));
            begin(job, scaler, pods, message, step);
            step.add = indices;
            step.requeue_at = Some(deadline(scaler, job.now));
        }
        Request::Remove(removal) => {
            let victims = match victims(job, &live, removal) {
                Ok(victims) => victims,
                Err(message) => return fail(job, scaler, "UnknownPods", &message, step),
            };
            let left = have - victims.len();
            if left < job.counts.min as usize {
                let field = match removal {
                    Removal::Count(_) => "spec.toDelete.count",
                    Removal::Pods(_) => "spec.toDelete.podNames",
                };
                let message = format!(
                    "{field}: removing {} of {have} workers would leave {left}, fewer than worker.minReplicas ({})",
                    victims.len(),
                    job.counts.min
                );
                return fail(job, scaler, "BelowMinReplicas", &message, step);
            }
            let pods: Vec<String> = victims
                .iter()
                .map(|i| names::worker(job.name, *i))
                .collect();
            let message = format!(
                "removing {} workers: {}; they leave host discovery now and their pods go after their drain",
                pods.len(),
                pods.join(", ")
            );
            begin(job, scaler, pods, message, step);
            step.remove = victims;
        }
    }
}

pub(super) fn begin(
    job: &JobSide<'_>,
    scaler: &Scaler,
    pods: Vec<String>,
    message: String,
    step: &mut Step,
) {
    let reference = scaler.reference();
    step.events.push(ScalingEvent {
        warning: false,
        reason: "ScalingStarted",
        note: format!("{reference}: {message}"),
    });
    push(
        step,
        Transition::of(scaler, job.now).started(pods, &message),
    );
    step.under_way = Some((reference, message));
}

/// The workers a ScaleIn removes, from the live ones.
pub(super) fn victims(
    job: &JobSide<'_>,
    live: &[u32],
    removal: &Removal,
) -> Result<Vec<u32>, String> {
    match removal {
        Removal::Pods(names) => {
            let mut victims = Vec::new();
            let mut unknown = Vec::new();
            for name in names {
                match names::worker_index(job.name, name).filter(|i| live.contains(i)) {
                    Some(index) => victims.push(index),
                    None => unknown.push(name.as_str()),
                }
            }
            if unknown.is_empty() {
                victims.sort_unstable();
                Ok(victims)
            } else {
                Err(format!(
                    "spec.toDelete.podNames: {} {} not a worker of TrainingJob {}; nothing was removed",
                    unknown.join(", "),
                    if unknown.len() == 1 { "is" } else { "are" },
                    job.name
                ))
            }
        }
        Removal::Count(count) => {
            // Workers that are not ready cost nothing to drop; among equals, the newest go.
            let mut candidates = live.to_vec();
            candidates.sort_by_key(|index| (is_ready(job, *index), std::cmp::Reverse(*index)));
            let mut victims: Vec<u32> = candidates.into_iter().take(*count as usize).collect();
            victims.sort_unstable();
            Ok(victims)
        }
    }
}

pub(super) fn deadline(scaler: &Scaler, now: jiff::Timestamp) -> jiff::Timestamp {
    let started = scaler.state.start_time.as_ref().map_or(now, |time| time.0);
    crate::time::after(started, scaler.timeout)
}

pub(super) fn progress(job: &JobSide<'_>, scaler: &Scaler, step: &mut Step) {
    let indices: Vec<u32> = scaler
        .state
        .pods
        .iter()
        .filter_map(|pod| names::worker_index(job.name, pod))
        .collect();
    let reference = scaler.reference();
    match scaler.kind {
        ScalerKind::ScaleOut => {
            if job.resizing {
                return fail(
                    job,
                    scaler,
                    "ReplicasChanged",
                    "worker.replicas changed while the request was carried out; the job follows worker.replicas",
                    step,
                );
            }
            let ready = indices.iter().filter(|i| is_ready(job, **i)).count();
            if ready == indices.len() {
                let message = format!("{ready} workers added and ready");
                succeed(job, scaler, &message, step);
            } else if job.now >= deadline(scaler, job.now) {
                let message = format!(
                    "{ready} of {} added workers were ready within spec.timeout ({}s); the workers it added are removed",
                    indices.len(),
                    scaler.timeout.as_secs()
                );
                fail(job, scaler, "Timeout", &message, step);
                step.remove = indices;
            } else {
                step.add = indices
                    .into_iter()
                    .filter(|index| !job.blacklisted.contains(index))
                    .collect();
                step.requeue_at = Some(deadline(scaler, job.now));
                let message = format!("{ready} of {} added workers ready", scaler.state.pods.len());
                step.under_way = Some((reference, message));
            }
        }
        ScalerKind::ScaleIn => {
            if indices.iter().all(|index| !job.pods.contains_key(index)) {
                let message = format!("{} workers removed", indices.len());
                succeed(job, scaler, &message, step);
            } else {
                step.remove = indices;
                let message = format!(
                    "removing {}; waiting for their pods to go",
                    scaler.state.pods.join(", ")
                );
                step.under_way = Some((reference, message));
            }
        }
    }
}

pub(super) fn succeed(job: &JobSide<'_>, scaler: &Scaler, message: &str, step: &mut Step) {
    let reference = scaler.reference();
    step.events.push(ScalingEvent {
        warning: false,
        reason: SCALE_SUCCEEDED,
        note: format!("{reference} succeeded: {message}"),
    });
    step.finished = Some(Finished {
        reference,
        succeeded: true,
        message: message.to_string(),
    });
    push(
        step,
        Transition::of(scaler, job.now).finished(true, SCALE_SUCCEEDED, message),
    );
}
