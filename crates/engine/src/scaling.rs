//! ScaleIn and ScaleOut requests, as `arena scalein etjob` and `arena scaleout etjob` create
//! them.
//!
//! # Life of a request
//! 1. **Queued** (phase `Created`). A job carries out one request at a time, the newest
//!    unfinished one first, and only while its launcher runs.
//! 2. **Checked** when its turn comes. It fails, changing nothing, when it sets `spec.script`
//!    (running a script on the launcher needs `pods/exec`, which eto never uses), names pods
//!    that are not workers of the job, would leave fewer than `worker.minReplicas` workers or
//!    make more than `worker.maxReplicas`, or does not decode.
//! 3. **Carried out** (phase `Scaling`; the job's phase is `Scaling` and its `currentScaler`
//!    names it). A ScaleOut adds workers under new indices (`status.addPods`); a ScaleIn takes
//!    its workers (`status.toDeletePods`: the named pods, or for a count those not ready first,
//!    then the newest) out of host discovery at once, and they drain before their pods go (see
//!    [`crate::drain`]).
//! 4. **Finished.** A ScaleOut succeeds once every worker it added is ready, and fails at
//!    `spec.timeout` (60 s by default), removing the workers it added. A ScaleIn succeeds once
//!    the pods of its workers are gone. When a request succeeds, the job holds to its new
//!    number of workers (`status.workers.desired`) until `worker.replicas` changes.
//!
//! A request is abandoned (`Failed`) when its job finishes or restarts; a ScaleOut also when
//! `worker.replicas` changes while it is carried out. The phase of a finished request is
//! final, so it is never carried out again, after an operator restart too. Deleting a request
//! never deletes workers: what it did belongs to the job.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use eto_api::common::{JobCondition, ScalerPhase};
use eto_api::scale_in::{ScaleIn, ScaleInStatus};
use eto_api::scale_out::{ScaleOut, ScaleOutStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::conditions::{self as c, Observation};
use crate::effective_spec::WorkerCounts;
use crate::loss::Loss;
use crate::parse::parse;
use crate::validation::FieldError;
use crate::{names, pods};

/// Default of a request's `spec.timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a request naming a TrainingJob that does not exist is given for the job to show
/// up (watch caches may show a request before the job created just before it).
pub const JOB_GRACE: Duration = Duration::from_secs(10);

/// Condition of a request: succeeded.
pub const SCALE_SUCCEEDED: &str = "ScaleSucceeded";
/// Condition of a request: failed.
pub const SCALE_FAILED: &str = "ScaleFailed";

/// The two kinds of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScalerKind {
    /// Remove workers.
    ScaleIn,
    /// Add workers.
    ScaleOut,
}

impl ScalerKind {
    /// The kind's name, as in `apiVersion`/`kind` and `status.currentScaler`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ScaleIn => "ScaleIn",
            Self::ScaleOut => "ScaleOut",
        }
    }
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Remove workers.
    Remove(Removal),
    /// Add this many workers.
    Add(u32),
}

/// Which workers a ScaleIn removes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removal {
    /// This many: those not ready first, then the newest.
    Count(u32),
    /// These pods.
    Pods(Vec<String>),
}

/// The status of a request, common to both kinds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScalerState {
    /// Where the request is.
    pub phase: Option<ScalerPhase>,
    /// Its conditions.
    pub conditions: Vec<JobCondition>,
    /// `status.toDeletePods` of a ScaleIn, `status.addPods` of a ScaleOut.
    pub pods: Vec<String>,
    /// When it was started.
    pub start_time: Option<Time>,
    /// When it finished.
    pub completion_time: Option<Time>,
}

/// A ScaleIn or ScaleOut, as the engine reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Scaler {
    /// Its kind.
    pub kind: ScalerKind,
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its `metadata.generation`.
    pub generation: Option<i64>,
    /// When it was created.
    pub created: Option<jiff::Timestamp>,
    /// The uids of its owners.
    pub owners: Vec<String>,
    /// `spec.selector.name`: the TrainingJob it is for; empty when unset.
    pub job: String,
    /// What it asks for, or why it cannot be understood.
    pub request: Result<Request, FieldError>,
    /// `spec.script`.
    pub script: Option<String>,
    /// `spec.timeout`, defaulted.
    pub timeout: Duration,
    /// Its status.
    pub state: ScalerState,
}

impl Scaler {
    /// Reads a request of `kind` from its JSON form. A request that does not decode is still
    /// read (name, job, status), with the field that does not decode as its request.
    pub fn read(kind: ScalerKind, value: &serde_json::Value) -> Self {
        let metadata: ObjectMeta =
            serde_json::from_value(value["metadata"].clone()).unwrap_or_default();
        let job = value["spec"]["selector"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (request, script, timeout, state) = match kind {
            ScalerKind::ScaleIn => match parse::<ScaleIn>(value.clone()) {
                Ok(scaler) => (
                    removal(&scaler.spec.to_delete),
                    scaler.spec.script,
                    scaler.spec.timeout,
                    scaler.status.map(ScalerState::of_scale_in),
                ),
                Err(error) => (Err(error), None, None, None),
            },
            ScalerKind::ScaleOut => match parse::<ScaleOut>(value.clone()) {
                Ok(scaler) => (
                    addition(scaler.spec.to_add.count),
                    scaler.spec.script,
                    scaler.spec.timeout,
                    scaler.status.map(ScalerState::of_scale_out),
                ),
                Err(error) => (Err(error), None, None, None),
            },
        };
        // An undecodable request keeps the status it shows, as far as that decodes.
        let state = state.unwrap_or_else(|| lenient_state(kind, &value["status"]));
        Self {
            kind,
            name: metadata.name.unwrap_or_default(),
            namespace: metadata.namespace.unwrap_or_default(),
            generation: metadata.generation,
            created: metadata.creation_timestamp.map(|time| time.0),
            owners: metadata
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .map(|owner| owner.uid)
                .collect(),
            job,
            request,
            script: script.filter(|s| !s.is_empty()),
            timeout: timeout
                .and_then(|seconds| u64::try_from(seconds).ok())
                .filter(|seconds| *seconds > 0)
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
            state,
        }
    }

    /// `Kind:namespace/name`, as `status.currentScaler` names it.
    pub fn reference(&self) -> String {
        format!("{}:{}/{}", self.kind.as_str(), self.namespace, self.name)
    }

    /// Whether it succeeded or failed.
    pub fn is_finished(&self) -> bool {
        matches!(
            self.state.phase,
            Some(ScalerPhase::Succeeded | ScalerPhase::Failed)
        )
    }

    fn update(&self, state: ScalerState) -> ScalerUpdate {
        ScalerUpdate {
            kind: self.kind,
            name: self.name.clone(),
            status: (state != self.state).then(|| ScalerStatus::of(self.kind, state)),
            adopt: false,
        }
    }
}

fn removal(to_delete: &eto_api::scale_in::ToDelete) -> Result<Request, FieldError> {
    let invalid = |field: &str, message: &str| {
        Err(FieldError {
            field: field.into(),
            message: message.into(),
        })
    };
    match (to_delete.count, &to_delete.pod_names) {
        (Some(count), None) => match u32::try_from(count) {
            Ok(count) if count > 0 => Ok(Request::Remove(Removal::Count(count))),
            _ => invalid("spec.toDelete.count", "must be at least 1"),
        },
        (None, Some(names)) if !names.is_empty() => {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            Ok(Request::Remove(Removal::Pods(names)))
        }
        _ => invalid(
            "spec.toDelete",
            "set exactly one of count and podNames (with at least one name)",
        ),
    }
}

fn addition(count: i32) -> Result<Request, FieldError> {
    match u32::try_from(count) {
        Ok(count) if count > 0 => Ok(Request::Add(count)),
        _ => Err(FieldError {
            field: "spec.toAdd.count".into(),
            message: "must be at least 1".into(),
        }),
    }
}

fn lenient_state(kind: ScalerKind, status: &serde_json::Value) -> ScalerState {
    match kind {
        ScalerKind::ScaleIn => serde_json::from_value::<ScaleInStatus>(status.clone())
            .map(ScalerState::of_scale_in)
            .unwrap_or_default(),
        ScalerKind::ScaleOut => serde_json::from_value::<ScaleOutStatus>(status.clone())
            .map(ScalerState::of_scale_out)
            .unwrap_or_default(),
    }
}

impl ScalerState {
    fn of_scale_in(status: ScaleInStatus) -> Self {
        Self {
            phase: status.phase,
            conditions: status.conditions,
            pods: status.to_delete_pods,
            start_time: status.start_time,
            completion_time: status.completion_time,
        }
    }

    fn of_scale_out(status: ScaleOutStatus) -> Self {
        Self {
            phase: status.phase,
            conditions: status.conditions,
            pods: status.add_pods,
            start_time: status.start_time,
            completion_time: status.completion_time,
        }
    }
}

/// The new status of a request, of its kind.
#[derive(Clone, Debug, PartialEq)]
pub enum ScalerStatus {
    /// Of a ScaleIn.
    In(ScaleInStatus),
    /// Of a ScaleOut.
    Out(ScaleOutStatus),
}

impl ScalerStatus {
    /// The status, common to both kinds.
    pub fn state(&self) -> ScalerState {
        match self.clone() {
            Self::In(status) => ScalerState::of_scale_in(status),
            Self::Out(status) => ScalerState::of_scale_out(status),
        }
    }

    fn of(kind: ScalerKind, state: ScalerState) -> Self {
        match kind {
            ScalerKind::ScaleIn => Self::In(ScaleInStatus {
                phase: state.phase,
                conditions: state.conditions,
                to_delete_pods: state.pods,
                start_time: state.start_time,
                completion_time: state.completion_time,
            }),
            ScalerKind::ScaleOut => Self::Out(ScaleOutStatus {
                phase: state.phase,
                conditions: state.conditions,
                add_pods: state.pods,
                start_time: state.start_time,
                completion_time: state.completion_time,
            }),
        }
    }
}

/// A write to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalerUpdate {
    /// Its kind.
    pub kind: ScalerKind,
    /// Its name, in the job's namespace.
    pub name: String,
    /// Its new status, when it changed.
    pub status: Option<ScalerStatus>,
    /// Whether to add the job to its owners, so that it goes with the job.
    pub adopt: bool,
}

/// How a request that finished in this reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// `Kind:namespace/name`.
    pub reference: String,
    /// Whether it succeeded.
    pub succeeded: bool,
    /// What happened.
    pub message: String,
}

/// An event about the job, from its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalingEvent {
    /// Warning rather than Normal.
    pub warning: bool,
    /// CamelCase reason.
    pub reason: &'static str,
    /// What happened.
    pub note: String,
}

/// The job, as its requests need it.
#[derive(Clone, Copy, Debug)]
pub struct JobSide<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its uid.
    pub uid: &'a str,
    /// The indices of `status.targetWorkers` at the start of the reconcile.
    pub target: &'a [u32],
    /// The worker pods of the current run, by index.
    pub pods: &'a BTreeMap<u32, &'a Pod>,
    /// Indices of workers on the blacklist.
    pub blacklisted: &'a BTreeSet<u32>,
    /// The smallest index never used by the job.
    pub next_index: u32,
    /// Its minimum and maximum.
    pub counts: WorkerCounts,
    /// Whether its launcher runs (a request may start).
    pub running: bool,
    /// Whether `worker.replicas` changed since the last reconcile.
    pub resizing: bool,
    /// The time.
    pub now: jiff::Timestamp,
}

impl<'a> JobSide<'a> {
    /// A job whose requests wait: it has no workers to scale and does not run.
    pub fn idle(name: &'a str, uid: &'a str, now: jiff::Timestamp) -> Self {
        const NO_PODS: &BTreeMap<u32, &Pod> = &BTreeMap::new();
        const NO_INDICES: &BTreeSet<u32> = &BTreeSet::new();
        Self {
            name,
            uid,
            target: &[],
            pods: NO_PODS,
            blacklisted: NO_INDICES,
            next_index: 0,
            counts: WorkerCounts {
                desired: 0,
                min: 0,
                max: None,
            },
            running: false,
            resizing: false,
            now,
        }
    }
}

/// What the job's requests decided in this reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    /// Indices that belong to the target (the workers of a ScaleOut under way).
    pub add: Vec<u32>,
    /// Indices to take out of the target (the workers of a ScaleIn, or of a failed ScaleOut).
    pub remove: Vec<u32>,
    /// Writes to requests.
    pub updates: Vec<ScalerUpdate>,
    /// The request under way after this reconcile, as `Kind:namespace/name`, and what it does.
    pub under_way: Option<(String, String)>,
    /// The request that finished in this reconcile.
    pub finished: Option<Finished>,
    /// Events about the job.
    pub events: Vec<ScalingEvent>,
    /// When to look again (a ScaleOut's timeout).
    pub requeue_at: Option<jiff::Timestamp>,
}

impl Step {
    /// Records that worker `lost` of the ScaleOut under way was replaced by `replacement`:
    /// the replacement is what the request waits for now.
    pub fn replaced(&mut self, scalers: &[Scaler], job: &str, lost: u32, replacement: u32) {
        let Some((reference, _)) = &self.under_way else {
            return;
        };
        let Some(scaler) = scalers
            .iter()
            .find(|s| s.kind == ScalerKind::ScaleOut && s.reference() == *reference)
        else {
            return;
        };
        let written = self
            .updates
            .iter()
            .find(|u| u.kind == scaler.kind && u.name == scaler.name)
            .and_then(|u| match &u.status {
                Some(ScalerStatus::Out(status)) => Some(ScalerState::of_scale_out(status.clone())),
                _ => None,
            });
        let mut state = written.unwrap_or_else(|| scaler.state.clone());
        let (lost, replacement) = (names::worker(job, lost), names::worker(job, replacement));
        if !state.pods.contains(&lost) {
            return;
        }
        for pod in state.pods.iter_mut().filter(|pod| **pod == lost) {
            pod.clone_from(&replacement);
        }
        push(self, scaler.update(state));
    }
}

/// A transition of a request's status.
struct Transition<'a> {
    scaler: &'a Scaler,
    state: ScalerState,
    now: jiff::Timestamp,
}

impl<'a> Transition<'a> {
    fn of(scaler: &'a Scaler, now: jiff::Timestamp) -> Self {
        Self {
            scaler,
            state: scaler.state.clone(),
            now,
        }
    }

    fn condition(mut self, type_: &str, holds: bool, reason: &str, message: &str) -> Self {
        c::set(
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
        let mut transition = self.condition(c::CREATED, true, "Queued", message);
        transition.state.phase = Some(ScalerPhase::Created);
        transition.done()
    }

    fn started(self, pods: Vec<String>, message: &str) -> ScalerUpdate {
        let mut transition = self
            .condition(c::CREATED, true, "Started", "the request is carried out")
            .condition(c::SCALING, true, "ScalingStart", message);
        transition.state.phase = Some(ScalerPhase::Scaling);
        transition.state.start_time = Some(Time(transition.now));
        transition.state.pods = pods;
        transition.done()
    }

    fn finished(self, succeeded: bool, reason: &str, message: &str) -> ScalerUpdate {
        let (type_, phase) = if succeeded {
            (SCALE_SUCCEEDED, ScalerPhase::Succeeded)
        } else {
            (SCALE_FAILED, ScalerPhase::Failed)
        };
        let mut transition = self.condition(type_, true, reason, message);
        if c::find(&transition.state.conditions, c::SCALING).is_some() {
            transition = transition.condition(c::SCALING, false, reason, message);
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
fn of_job<'a>(job: &str, scalers: &'a [Scaler]) -> Vec<&'a Scaler> {
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

fn adopt(uid: &str, mine: &[&Scaler], step: &mut Step) {
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
fn push(step: &mut Step, update: ScalerUpdate) {
    match step
        .updates
        .iter_mut()
        .find(|u| u.kind == update.kind && u.name == update.name)
    {
        Some(existing) => existing.status = update.status,
        None => step.updates.push(update),
    }
}

fn fail(job: &JobSide<'_>, scaler: &Scaler, reason: &str, message: &str, step: &mut Step) {
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
fn live(job: &JobSide<'_>) -> Vec<u32> {
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

fn is_ready(job: &JobSide<'_>, index: u32) -> bool {
    job.pods
        .get(&index)
        .is_some_and(|pod| pods::is_ready(pod) && !pods::is_disrupted(pod))
}

fn start(job: &JobSide<'_>, scaler: &Scaler, step: &mut Step) {
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

fn begin(job: &JobSide<'_>, scaler: &Scaler, pods: Vec<String>, message: String, step: &mut Step) {
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
fn victims(job: &JobSide<'_>, live: &[u32], removal: &Removal) -> Result<Vec<u32>, String> {
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

fn deadline(scaler: &Scaler, now: jiff::Timestamp) -> jiff::Timestamp {
    let started = scaler.state.start_time.as_ref().map_or(now, |time| time.0);
    crate::time::after(started, scaler.timeout)
}

fn progress(job: &JobSide<'_>, scaler: &Scaler, step: &mut Step) {
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

fn succeed(job: &JobSide<'_>, scaler: &Scaler, message: &str, step: &mut Step) {
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

/// A request failed because no TrainingJob takes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Orphaned {
    /// The write that fails it.
    pub update: ScalerUpdate,
    /// Why it failed.
    pub message: String,
}

/// What becomes of a request that no existing TrainingJob takes: it fails when its
/// `spec.selector.name` names no TrainingJob of its namespace ([`JOB_GRACE`] after its
/// creation, in case the job is only about to show up), and is left alone otherwise (the
/// job's own reconcile carries it out). Returns the failure, if any, and when to look again.
pub fn orphan(
    scaler: &Scaler,
    job_exists: bool,
    now: jiff::Timestamp,
) -> (Option<Orphaned>, Option<jiff::Timestamp>) {
    if scaler.is_finished() {
        return (None, None);
    }
    let namespace = &scaler.namespace;
    if scaler.job.is_empty() || !names::is_dns1123_subdomain(&scaler.job) {
        let message = format!(
            "spec.selector.name: {:?} is not the name of a TrainingJob; a {} acts on a TrainingJob of its own namespace ({namespace}), named without a namespace",
            scaler.job,
            scaler.kind.as_str()
        );
        let update = Transition::of(scaler, now).finished(false, "InvalidSelector", &message);
        return (Some(Orphaned { update, message }), None);
    }
    if job_exists {
        return (None, None);
    }
    let grace_over = scaler
        .created
        .map_or(now, |created| crate::time::after(created, JOB_GRACE));
    if now < grace_over {
        return (None, Some(grace_over));
    }
    let message = format!(
        "spec.selector.name: TrainingJob {} does not exist in namespace {namespace}",
        scaler.job
    );
    let update = Transition::of(scaler, now).finished(false, "JobNotFound", &message);
    (Some(Orphaned { update, message }), None)
}

/// The `Scaling` condition of the job, when a request is under way or just finished.
pub fn job_condition(step: &Step) -> Option<(bool, &str, String)> {
    if let Some((reference, what)) = &step.under_way {
        return Some((true, "ScalingStart", format!("{reference}: {what}")));
    }
    step.finished.as_ref().map(|finished| {
        let reason = if finished.succeeded {
            SCALE_SUCCEEDED
        } else {
            SCALE_FAILED
        };
        (
            false,
            reason,
            format!("{}: {}", finished.reference, finished.message),
        )
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

    fn object(kind: ScalerKind, spec: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": kind.as_str(),
            "metadata": {"name": "req", "namespace": "team", "generation": 1,
                "creationTimestamp": at(0).to_string()},
            "spec": spec,
        })
    }

    #[test]
    fn requests_are_read_with_their_defaults() {
        let scale_in = Scaler::read(
            ScalerKind::ScaleIn,
            &object(
                ScalerKind::ScaleIn,
                json!({"selector": {"name": "mnist"}, "toDelete": {"podNames": ["b", "a", "b"]}}),
            ),
        );
        assert_eq!(scale_in.job, "mnist");
        assert_eq!(scale_in.reference(), "ScaleIn:team/req");
        assert_eq!(
            scale_in.request,
            Ok(Request::Remove(Removal::Pods(vec!["a".into(), "b".into()])))
        );
        assert_eq!(scale_in.timeout, DEFAULT_TIMEOUT);
        assert_eq!(scale_in.created, Some(at(0)));

        let scale_out = Scaler::read(
            ScalerKind::ScaleOut,
            &object(
                ScalerKind::ScaleOut,
                json!({"selector": {"name": "mnist"}, "toAdd": {"count": 3}, "timeout": 600, "script": ""}),
            ),
        );
        assert_eq!(scale_out.request, Ok(Request::Add(3)));
        assert_eq!(scale_out.timeout, Duration::from_secs(600));
        assert_eq!(scale_out.script, None, "an empty script is no script");
    }

    #[test]
    fn a_request_that_does_not_decode_is_read_with_the_field_that_does_not() {
        let cases = [
            (
                ScalerKind::ScaleIn,
                json!({"selector": {"name": "mnist"}, "toDelete": {"count": "two"}}),
                "spec.toDelete.count",
            ),
            (
                ScalerKind::ScaleIn,
                json!({"selector": {"name": "mnist"}, "toDelete": {"count": 1, "podNames": ["a"]}}),
                "spec.toDelete",
            ),
            (
                ScalerKind::ScaleIn,
                json!({"selector": {"name": "mnist"}, "toDelete": {"podNames": []}}),
                "spec.toDelete",
            ),
            (
                ScalerKind::ScaleOut,
                json!({"selector": {"name": "mnist"}, "toAdd": {"count": 0}}),
                "spec.toAdd.count",
            ),
            (
                ScalerKind::ScaleOut,
                json!({"selector": {"name": "mnist"}}),
                "spec",
            ),
        ];
        for (kind, spec, field) in cases {
            let scaler = Scaler::read(kind, &object(kind, spec.clone()));
            assert_eq!(scaler.job, "mnist");
            assert_eq!(
                scaler.request.as_ref().map_err(|e| e.field.as_str()),
                Err(field),
                "{spec}"
            );
        }
        let missing = Scaler::read(
            ScalerKind::ScaleOut,
            &object(ScalerKind::ScaleOut, json!({"selector": {"name": "mnist"}})),
        );
        assert!(missing.request.unwrap_err().message.contains("toAdd"));
    }

    fn orphan_at(
        spec: serde_json::Value,
        job_exists: bool,
        now: i64,
    ) -> (Option<String>, Option<jiff::Timestamp>) {
        let scaler = Scaler::read(ScalerKind::ScaleOut, &object(ScalerKind::ScaleOut, spec));
        let (orphaned, requeue) = orphan(&scaler, job_exists, at(now));
        let message = orphaned.map(|orphaned| {
            let state = orphaned.update.status.expect("a status").state();
            assert_eq!(state.phase, Some(ScalerPhase::Failed));
            let condition =
                c::find(&state.conditions, SCALE_FAILED).and_then(|c| c.message.clone());
            assert_eq!(condition.as_ref(), Some(&orphaned.message));
            orphaned.message
        });
        (message, requeue)
    }

    #[test]
    fn a_request_for_a_job_that_does_not_exist_fails_after_a_grace_period() {
        let spec = json!({"selector": {"name": "gone"}, "toAdd": {"count": 1}});
        assert_eq!(orphan_at(spec.clone(), false, 5), (None, Some(at(10))));
        assert_eq!(
            orphan_at(spec.clone(), false, 10),
            (
                Some(
                    "spec.selector.name: TrainingJob gone does not exist in namespace team".into()
                ),
                None
            )
        );
        assert_eq!(
            orphan_at(spec, true, 10),
            (None, None),
            "the job's reconcile takes it"
        );
    }

    #[test]
    fn a_request_naming_a_job_of_another_namespace_fails_at_once() {
        let spec = json!({"selector": {"name": "other/mnist"}, "toAdd": {"count": 1}});
        let (message, requeue) = orphan_at(spec, false, 0);
        assert!(
            message
                .unwrap()
                .contains("a ScaleOut acts on a TrainingJob of its own namespace (team)")
        );
        assert_eq!(requeue, None);
    }

    #[test]
    fn a_finished_request_is_left_alone() {
        let mut value = object(
            ScalerKind::ScaleOut,
            json!({"selector": {"name": "gone"}, "toAdd": {"count": 1}}),
        );
        value["status"] = json!({"phase": "Succeeded"});
        let scaler = Scaler::read(ScalerKind::ScaleOut, &value);
        assert_eq!(orphan(&scaler, false, at(3600)), (None, None));
    }
}
