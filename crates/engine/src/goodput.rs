//! The goodput ledger: where each moment of a job's life went.
//!
//! A job's time is split into buckets ([`GoodputBucket`]): productive (steps reached for the
//! first time), waiting for capacity or admission, a run's start-up, a group's re-formation,
//! checkpoints, steps trained twice, and other. The ledger lives in the job's status, so that
//! it survives the operator: the totals hold the time up to `currentSince`, and the time since
//! then belongs to `current`. [`advance`] moves it on from what one reconcile saw, and only
//! when the bucket changes or a step report is worth recording ([`RECORD_EVERY`]), so that a
//! job that trains steadily is not written to at every reconcile.
//!
//! Two things tell the ledger what the job does:
//! - its [`Activity`], from the pods' and the group's states (the plan decides it): training,
//!   idle for a reason (a bucket), or finished;
//! - where the training reports its steps ([`ProgressReport`]), the steps themselves. Time
//!   between two reports of one stretch of training is training: productive for steps past
//!   the highest reached, retrained for the others (split in proportion where a stretch
//!   crosses the highest step). Time outside the stretches is the bucket the states gave
//!   while it passed; a stretch's first step ends a start-up or re-formation, so the import,
//!   the process group and the checkpoint load count there, not as training. A report of a
//!   new stretch may tell where the one before ended ([`EndedStretch`]): the ledger takes that
//!   end first, so that the steps after its last record of that stretch count as training.
//!
//! Without reports the states alone decide: training time is productive, and the status says
//! so (`source: PodStates`).
//!
//! The same time never lands in two buckets: each step of the ledger moves `currentSince`
//! forward by the time it adds to the totals, and never backwards. A job found without a
//! ledger starts one at its creation, in the bucket the plan gives ([`Sighting::begins_as`]:
//! waiting for a new job, `other` for one that ran before eto kept ledgers).

use std::time::Duration;

pub use eto_api::job_status::{
    Goodput, GoodputBucket, GoodputSeconds, ProgressSource, StepReport, UnreportedTime,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde::Deserialize;

/// How old the recorded step report may grow, while the job trains, before a newer one is
/// recorded: the status shows the highest step at most this late, and a job that trains
/// writes its status no more often than this for it.
pub const RECORD_EVERY: Duration = Duration::from_secs(30);

/// How often eto reads the steps while the job trains, where the training's own pods serve
/// them (see [`crate::job::JobRef::progress_served_by_pods`]): every pod that serves them may
/// go at once (a node's loss, a whole group restarting), and then the steps since the last
/// read are lost to the ledger ([`Sighting::earlier`] keeps those up to it). A read is not
/// a record: the status is still written only as [`RECORD_EVERY`] says.
pub const READ_EVERY: Duration = Duration::from_secs(5);

/// A pause between two steps longer than this many times the usual step, and longer than
/// [`MIN_PAUSE`], ends a stretch of training (eto's helper decides it as it reports: a
/// re-formation that kept the processes alive).
pub const PAUSE_FACTOR: f64 = 5.0;

/// The shortest pause that ends a stretch of training.
pub const MIN_PAUSE: Duration = Duration::from_secs(2);

/// What the job was doing, as its pods and group show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Its run's pods run and its group is formed: it trains, or is about to.
    Training,
    /// It does not train, for the reason the bucket names.
    Idle(GoodputBucket),
    /// It succeeded or failed: the ledger closes.
    Finished,
}

/// The latest step the training reached, as a coordinator's report says it (see
/// [`crate::group_report::GroupReport::progress`]): eto's helper sends every field; a
/// coordinator that knows only the step leaves the rest out (see [`ProgressReport::read_at`]).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ReportedProgress {
    /// The step.
    pub step: i64,
    /// When it was reached; absent: when the report was read.
    #[serde(default)]
    pub at: Option<jiff::Timestamp>,
    /// The first step of its stretch of training; absent: the stretch goes on while the step
    /// does not go back.
    #[serde(default)]
    pub first_step: Option<i64>,
    /// When that first step was reached.
    #[serde(default)]
    pub first_at: Option<jiff::Timestamp>,
    /// The steps the whole training takes, when the training says.
    #[serde(default)]
    pub total: Option<i64>,
    /// When the training loaded a checkpoint before the stretch, if it said.
    #[serde(default)]
    pub restored: Option<Restored>,
    /// The last step of the stretch before this one, when the reporter saw it: the steps
    /// that stretch reached after the ledger last recorded it still count as trained.
    #[serde(default)]
    pub ended: Option<EndedStretch>,
    /// Who reports it: the training itself unless the kind's reader says otherwise.
    #[serde(skip, default = "training_reports")]
    pub source: ProgressSource,
}

fn training_reports() -> ProgressSource {
    ProgressSource::TrainingReports
}

impl ReportedProgress {
    /// The report as the ledger takes it, read at `now`, with the ledger's `latest` step
    /// record for what it leaves out: its time is `now`, and its stretch goes on from
    /// `latest` while the step does not go back within `run`, else begins with it. Its times
    /// are cut to the microsecond, as the status keeps them, so that a report read again is
    /// the same report as the one recorded.
    pub fn read_at(
        &self,
        latest: Option<&StepReport>,
        run: i32,
        now: jiff::Timestamp,
    ) -> ProgressReport {
        let at = to_microsecond(self.at.unwrap_or(now));
        let (first_step, first_at) = match (self.first_step, self.first_at) {
            (Some(step), Some(first_at)) => (step, to_microsecond(first_at)),
            _ => match latest {
                Some(latest) if latest.run == run && self.step >= latest.step => {
                    (latest.first_step, latest.first_at.0)
                }
                _ => (self.step, at),
            },
        };
        ProgressReport {
            step: self.step,
            at,
            first_step,
            first_at,
            total: self.total,
            restored: self.restored,
            ended: self.ended.map(|ended| EndedStretch {
                step: ended.step,
                at: to_microsecond(ended.at),
                first_step: ended.first_step,
                first_at: to_microsecond(ended.first_at),
            }),
        }
    }
}

/// The stretch of training before the one a report tells, as it ended: its first and last
/// steps, and when each was reached.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
pub struct EndedStretch {
    /// Its last step.
    pub step: i64,
    /// When that step was reached.
    pub at: jiff::Timestamp,
    /// Its first step.
    pub first_step: i64,
    /// When that first step was reached.
    pub first_at: jiff::Timestamp,
}

/// `time` without its nanoseconds: the precision of a status's `MicroTime`.
fn to_microsecond(time: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_microsecond(time.as_microsecond()).unwrap_or(time)
}

/// The latest step the training reached, as the ledger takes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressReport {
    /// The step.
    pub step: i64,
    /// When it was reached.
    pub at: jiff::Timestamp,
    /// The first step of its stretch of training: the processes started there, or the steps
    /// went back (a checkpoint loaded), or training went on after a pause.
    pub first_step: i64,
    /// When that first step was reached.
    pub first_at: jiff::Timestamp,
    /// The steps the whole training takes, when the training says.
    pub total: Option<i64>,
    /// When the training loaded a checkpoint before the stretch, if it said (`from`, `to`).
    pub restored: Option<Restored>,
    /// The stretch before this one, as it ended, when the reporter saw it.
    pub ended: Option<EndedStretch>,
}

impl ProgressReport {
    /// The report the stretch before this one gave at its last step, if the reporter told it.
    fn of_ended_stretch(&self) -> Option<Self> {
        self.ended.map(|ended| Self {
            step: ended.step,
            at: ended.at,
            first_step: ended.first_step,
            first_at: ended.first_at,
            total: self.total,
            restored: None,
            ended: None,
        })
    }
}

/// When the training loaded a checkpoint.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
pub struct Restored {
    /// It began.
    pub from: jiff::Timestamp,
    /// It ended.
    pub to: jiff::Timestamp,
}

/// What one reconcile saw, for the ledger.
#[derive(Clone, Debug)]
pub struct Sighting<'a> {
    /// Where steps are learned.
    pub source: ProgressSource,
    /// When the job was created: the ledger's beginning.
    pub created: jiff::Timestamp,
    /// What the pods and the group show.
    pub activity: Activity,
    /// The training's latest report, when one was read.
    pub report: Option<&'a ProgressReport>,
    /// The latest report read before this reconcile (the controller keeps it in memory; not
    /// every read is recorded, see [`RECORD_EVERY`]). Taken only when [`Self::report`] is
    /// absent or tells a stretch that began after it: the training that told it has ended,
    /// or its pods are gone with their word, and it trained at least up to that report.
    pub earlier: Option<&'a ProgressReport>,
    /// The job's current run.
    pub run: i32,
    /// The bucket a new ledger counts the job's past in.
    pub begins_as: GoodputBucket,
    /// Whether the job has a place its training may report steps to (a coordinator's report,
    /// a pod serving its progress), answered yet or not: until the first report, the time the
    /// states count as productive is kept aside as unconfirmed ([`Goodput::unreported`]).
    pub readable: bool,
}

/// The ledger after `seen` at `now`, from the ledger before (`None`: the job has none yet).
pub fn advance(before: Option<&Goodput>, seen: &Sighting<'_>, now: jiff::Timestamp) -> Goodput {
    let mut ledger = before.cloned().unwrap_or_else(|| begin(seen, now));
    ledger.source = seen.source;
    if ledger.current.is_none() {
        return ledger;
    }
    let ended_unseen = seen.earlier.filter(|earlier| {
        seen.report
            .is_none_or(|report| report.first_at > earlier.at)
    });
    if let Some(earlier) = ended_unseen {
        take_report(&mut ledger, earlier, seen, now, Recording::Final);
    }
    if let Some(report) = seen.report {
        // A stretch that ended since the ledger last recorded it trained until its last
        // step, not until that record: its end is taken first, as final.
        if let Some(ended) = report.of_ended_stretch() {
            take_report(&mut ledger, &ended, seen, now, Recording::Final);
        }
        take_report(&mut ledger, report, seen, now, Recording::WhenWorthIt);
    }
    take_activity(&mut ledger, seen, now);
    ledger.percent = percent(&ledger.seconds);
    ledger
}

/// A new ledger, counting from the job's creation in [`Sighting::begins_as`].
fn begin(seen: &Sighting<'_>, now: jiff::Timestamp) -> Goodput {
    let created = seen.created.min(now);
    Goodput {
        source: seen.source,
        since: MicroTime(created),
        seconds: GoodputSeconds::default(),
        current: Some(seen.begins_as),
        current_since: MicroTime(created),
        percent: None,
        highest_step: None,
        retrained_steps: 0,
        latest: None,
        trained_run: None,
        unreported: None,
    }
}

/// Whether a report that goes on with the recorded stretch is recorded at once.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recording {
    /// Only when it is worth a status write: it crosses the highest step, the job stopped
    /// training or trains again, or the record is [`RECORD_EVERY`] old.
    WhenWorthIt,
    /// Always: it is the last step of its stretch.
    Final,
}

/// Takes a step report into the ledger, when it says something new worth recording.
fn take_report(
    ledger: &mut Goodput,
    report: &ProgressReport,
    seen: &Sighting<'_>,
    now: jiff::Timestamp,
    recording: Recording,
) {
    let since = ledger.current_since.0;
    let at = report.at.min(now);
    let first_at = report.first_at.min(at);
    let recorded = ledger.latest.as_ref().map(|latest| latest.at.0);
    if at < since || recorded.is_some_and(|recorded| at <= recorded) {
        // Nothing it says is newer than what the ledger holds: a coordinator that outlives
        // the run still tells the last step of the run before until the new one reports.
        return;
    }
    // A stretch that began no later than the recorded step is training already under way:
    // the same stretch, the same training told by another pod (the one read before is gone;
    // each pod's helper tells the stretches it saw itself), even a step behind, or the last
    // steps of a run read in the reconcile that starts the next (its pods still train). It
    // goes on from the recorded step, in the run it was recorded in. Only a stretch that
    // began after it is new.
    let new_stretch = ledger
        .latest
        .as_ref()
        .is_none_or(|latest| report.first_at > latest.at.0);
    let run = match &ledger.latest {
        Some(latest) if !new_stretch => latest.run,
        _ => seen.run,
    };
    if ledger.latest.is_none() {
        confirm_unreported(ledger, first_at);
    }
    if new_stretch {
        // The time before the stretch's first step was not training: it goes to the bucket
        // the states gave, or, after a stretch that ended unseen, to the start of a run or
        // the re-formation of its group.
        if let Some(current) = ledger.current
            && is_training(current)
        {
            ledger.current = Some(stretch_bucket(ledger, run));
        }
        if first_at > since {
            close_with_restore(ledger, first_at, report.restored);
        }
        if report.first_step <= ledger.highest_step.unwrap_or(i64::MIN) {
            ledger.retrained_steps += 1;
        }
        train(
            ledger,
            first_at.max(ledger.current_since.0),
            at,
            report.first_step,
            report.step,
        );
    } else {
        let latest = ledger.latest.as_ref().map_or(report.first_step, |l| l.step);
        if report.step <= latest {
            return;
        }
        let recorded_at = ledger.latest.as_ref().map_or(since, |l| l.at.0);
        let crosses = ledger
            .highest_step
            .is_some_and(|highest| latest < highest && report.step >= highest);
        let idle = !matches!(seen.activity, Activity::Training);
        // The states say the job trains again and the steps went on in the same stretch (a
        // group that re-formed without restarting its processes): training since.
        let resumed = !idle && ledger.current.is_some_and(|current| !is_training(current));
        let stale = at.duration_since(recorded_at).unsigned_abs() >= RECORD_EVERY;
        let last = recording == Recording::Final;
        if !(crosses || idle || resumed || stale || last) {
            return;
        }
        train(ledger, since, at, latest, report.step);
    }
    ledger.latest = Some(StepReport {
        step: report.step,
        at: MicroTime(at),
        first_step: report.first_step,
        first_at: MicroTime(first_at),
        run,
        total: report.total,
    });
    ledger.trained_run = Some(run);
}

/// The training's first report ever says its first step came at `first_at`: the productive
/// time the states counted before then, kept aside as unreported, was its start-up.
fn confirm_unreported(ledger: &mut Goodput, first_at: jiff::Timestamp) {
    let Some(unreported) = ledger.unreported.take() else {
        return;
    };
    let after_first_step = seconds_between(first_at, unreported.until.0);
    let before = (unreported.seconds - after_first_step).clamp(0.0, ledger.seconds.productive);
    ledger.seconds.productive = round_ms(ledger.seconds.productive - before);
    add(ledger, GoodputBucket::StartUp, before);
}

/// Closes the current bucket at `to` (see [`close`]), keeping productive time aside as
/// unreported while the job's training may report steps and has reported none.
fn close_seen(ledger: &mut Goodput, seen: &Sighting<'_>, to: jiff::Timestamp) {
    let since = ledger.current_since.0;
    if seen.readable
        && ledger.latest.is_none()
        && ledger.current == Some(GoodputBucket::Productive)
        && to > since
    {
        let kept = ledger.unreported.as_ref().map_or(0.0, |u| u.seconds);
        ledger.unreported = Some(UnreportedTime {
            seconds: round_ms(kept + seconds_between(since, to)),
            until: MicroTime(to),
        });
    }
    close(ledger, to);
}

/// Steps `from_step` (exclusive) to `to_step` trained from `from` to `to`: productive past the
/// highest step, retrained up to it, split in proportion where they cross it. Training goes on
/// from `to` in the bucket its last step was in.
fn train(
    ledger: &mut Goodput,
    from: jiff::Timestamp,
    to: jiff::Timestamp,
    from_step: i64,
    to_step: i64,
) {
    let seconds = seconds_between(from, to);
    let steps = to_step - from_step;
    let highest = ledger.highest_step.unwrap_or(i64::MIN);
    let retrained = if steps <= 0 {
        0
    } else {
        (highest.saturating_sub(from_step)).clamp(0, steps)
    };
    let retrained_share = if steps <= 0 {
        0.0
    } else {
        retrained as f64 / steps as f64
    };
    add(ledger, GoodputBucket::Retrained, seconds * retrained_share);
    add(
        ledger,
        GoodputBucket::Productive,
        seconds * (1.0 - retrained_share),
    );
    ledger.retrained_steps += retrained;
    ledger.highest_step = Some(highest.max(to_step));
    ledger.current = Some(if to_step < highest {
        GoodputBucket::Retrained
    } else {
        GoodputBucket::Productive
    });
    ledger.current_since = MicroTime(to.max(ledger.current_since.0));
}

/// Takes what the states show into the ledger.
fn take_activity(ledger: &mut Goodput, seen: &Sighting<'_>, now: jiff::Timestamp) {
    let Some(current) = ledger.current else {
        return;
    };
    let reported = seen.source != ProgressSource::PodStates;
    match seen.activity {
        Activity::Finished => {
            close_seen(ledger, seen, now);
            ledger.current = None;
        }
        Activity::Idle(bucket) if is_training(current) => {
            // Training ended after its last step: the time since goes to the reason. Without
            // reports, it trained until now as far as anyone can tell.
            if !reported {
                close_seen(ledger, seen, now);
            }
            ledger.current = Some(bucket);
        }
        Activity::Idle(bucket) => {
            if bucket != current {
                close(ledger, now);
                ledger.current = Some(bucket);
            }
        }
        Activity::Training if is_training(current) => {}
        Activity::Training if !reported => {
            close(ledger, now);
            ledger.current = Some(GoodputBucket::Productive);
            ledger.trained_run = Some(seen.run);
        }
        Activity::Training => {
            // Until the first step is reported, the run starts up or its group re-forms.
            let bucket = stretch_bucket(ledger, seen.run);
            if !matches!(current, GoodputBucket::StartUp | GoodputBucket::Reformation)
                && bucket != current
            {
                close(ledger, now);
                ledger.current = Some(bucket);
            }
        }
    }
}

/// The bucket of the time before a run's next reported stretch of training: the re-formation
/// of a group that reported steps in the run before, else the run's start-up (also when
/// the states alone had taken it for training until the first report).
fn stretch_bucket(ledger: &Goodput, run: i32) -> GoodputBucket {
    if ledger
        .latest
        .as_ref()
        .is_some_and(|latest| latest.run == run)
    {
        GoodputBucket::Reformation
    } else {
        GoodputBucket::StartUp
    }
}

/// Whether time in `bucket` is training.
fn is_training(bucket: GoodputBucket) -> bool {
    matches!(bucket, GoodputBucket::Productive | GoodputBucket::Retrained)
}

/// Adds the time from `currentSince` to `to` to the current bucket, and moves on to `to`.
fn close(ledger: &mut Goodput, to: jiff::Timestamp) {
    let since = ledger.current_since.0;
    if to <= since {
        return;
    }
    if let Some(current) = ledger.current {
        add(ledger, current, seconds_between(since, to));
    }
    ledger.current_since = MicroTime(to);
}

/// [`close`], with the part of the time a checkpoint was being loaded (when the training said)
/// as checkpoint time.
fn close_with_restore(ledger: &mut Goodput, to: jiff::Timestamp, restored: Option<Restored>) {
    let since = ledger.current_since.0;
    let Some(restored) = restored else {
        return close(ledger, to);
    };
    let from = restored.from.clamp(since, to);
    let until = restored.to.clamp(from, to);
    close(ledger, from);
    let current = ledger.current;
    ledger.current = Some(GoodputBucket::Checkpoint);
    close(ledger, until);
    ledger.current = current;
    close(ledger, to);
}

fn add(ledger: &mut Goodput, bucket: GoodputBucket, seconds: f64) {
    if seconds > 0.0 {
        let total = ledger.seconds.get_mut(bucket);
        *total = round_ms(*total + seconds);
    }
}

fn seconds_between(from: jiff::Timestamp, to: jiff::Timestamp) -> f64 {
    if to <= from {
        return 0.0;
    }
    to.duration_since(from).as_secs_f64()
}

fn round_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

/// The productive share of `seconds`, in percent with one decimal; `None` before any time.
fn percent(seconds: &GoodputSeconds) -> Option<String> {
    ratio(seconds).map(|ratio| format!("{:.1}", 100.0 * ratio))
}

/// The ledger as it stands at `now`: its totals with the time since `currentSince` added to
/// the current bucket (what `kubectl eto get` and eto's metrics show).
pub fn at(ledger: &Goodput, now: jiff::Timestamp) -> GoodputSeconds {
    let mut seconds = ledger.seconds.clone();
    if let Some(current) = ledger.current {
        let total = seconds.get_mut(current);
        *total = round_ms(*total + seconds_between(ledger.current_since.0, now));
    }
    seconds
}

/// The productive share of `seconds` as a fraction; `None` before any time.
pub fn ratio(seconds: &GoodputSeconds) -> Option<f64> {
    let total = seconds.total();
    (total > 0.0).then(|| seconds.productive / total)
}

/// The buckets of lost time (all but productive) that hold at least half a second, the
/// largest first: what a reader lists as where the rest of the time went.
pub fn losses(seconds: &GoodputSeconds) -> Vec<GoodputBucket> {
    let mut lost: Vec<GoodputBucket> = GoodputBucket::ALL
        .into_iter()
        .filter(|&bucket| bucket != GoodputBucket::Productive && seconds.get(bucket) >= 0.5)
        .collect();
    lost.sort_by(|a, b| seconds.get(*b).total_cmp(&seconds.get(*a)));
    lost
}

/// The bucket of `seconds` other than productive with the most time, if any has some.
pub fn largest_loss(seconds: &GoodputSeconds) -> Option<GoodputBucket> {
    GoodputBucket::ALL
        .into_iter()
        .filter(|&bucket| bucket != GoodputBucket::Productive)
        .filter(|&bucket| seconds.get(bucket) > 0.0)
        .max_by(|a, b| seconds.get(*a).total_cmp(&seconds.get(*b)))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    use super::*;

    const CREATED: i64 = 1_800_000_000;

    fn t(second: f64) -> jiff::Timestamp {
        jiff::Timestamp::from_millisecond(CREATED * 1000 + (second * 1000.0) as i64).unwrap()
    }

    fn report(step: i64, at: f64, first_step: i64, first_at: f64) -> ProgressReport {
        ProgressReport {
            step,
            at: t(at),
            first_step,
            first_at: t(first_at),
            total: None,
            restored: None,
            ended: None,
        }
    }

    /// One reconcile: at `at` seconds, the job does `activity` in `run`, with `report` read.
    struct Seen {
        at: f64,
        activity: Activity,
        report: Option<ProgressReport>,
        earlier: Option<ProgressReport>,
        run: i32,
    }

    fn seen(at: f64, activity: Activity) -> Seen {
        Seen {
            at,
            activity,
            report: None,
            earlier: None,
            run: 0,
        }
    }

    fn with(mut seen: Seen, report: ProgressReport) -> Seen {
        seen.report = Some(report);
        seen
    }

    fn idle(bucket: GoodputBucket) -> Activity {
        Activity::Idle(bucket)
    }

    fn live(sightings: &[Seen], source: ProgressSource) -> Goodput {
        let mut ledger: Option<Goodput> = None;
        for seen in sightings {
            let next = advance(
                ledger.as_ref(),
                &Sighting {
                    source,
                    created: t(0.0),
                    activity: seen.activity,
                    report: seen.report.as_ref(),
                    earlier: seen.earlier.as_ref(),
                    run: seen.run,
                    begins_as: GoodputBucket::Waiting,
                    readable: source != ProgressSource::PodStates,
                },
                t(seen.at),
            );
            ledger = Some(next);
        }
        ledger.unwrap()
    }

    fn buckets(seconds: &GoodputSeconds) -> Vec<(&'static str, f64)> {
        GoodputBucket::ALL
            .into_iter()
            .map(|bucket| (bucket.name(), seconds.get(bucket)))
            .filter(|(_, seconds)| *seconds > 0.0)
            .collect()
    }

    #[test]
    fn pod_states_alone_count_the_time_the_run_trains_as_productive() {
        use GoodputBucket::*;
        let ledger = live(
            &[
                seen(0.0, idle(Waiting)),
                seen(30.0, idle(StartUp)),
                seen(50.0, Activity::Training),
                seen(150.0, idle(Reformation)),
                seen(160.0, Activity::Training),
                seen(200.0, Activity::Finished),
            ],
            ProgressSource::PodStates,
        );
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 140.0),
                ("waiting", 30.0),
                ("startUp", 20.0),
                ("reformation", 10.0)
            ]
        );
        assert_eq!(ledger.current, None, "a finished job's ledger is closed");
        assert_eq!(ledger.percent.as_deref(), Some("70.0"));
        assert_eq!(at(&ledger, t(900.0)), ledger.seconds, "and stays so");
    }

    #[test]
    fn reported_steps_place_the_first_step_and_the_last_one_where_they_happened() {
        use GoodputBucket::*;
        let ledger = live(
            &[
                seen(0.0, idle(Waiting)),
                seen(10.0, Activity::Training),
                // The processes import and load for 12 s; eto reads the first steps later.
                with(seen(25.0, Activity::Training), report(3, 24.0, 1, 22.0)),
                // A worker is lost at 95 s; the report read then says step 73 came at 94 s.
                with(seen(95.0, idle(Reformation)), report(73, 94.0, 1, 22.0)),
                // torchrun restarts every worker: back to checkpoint 50, first step at 110 s.
                seen(100.0, Activity::Training),
                with(
                    seen(112.0, Activity::Training),
                    report(51, 110.0, 51, 110.0),
                ),
                // Steps 52..=73 again, then new ones: step 95 at 154 s.
                with(seen(155.0, idle(Waiting)), report(95, 154.0, 51, 110.0)),
                seen(160.0, Activity::Finished),
            ],
            ProgressSource::TrainingReports,
        );
        // 22..94 new (72 s); 110..154: 44 steps, 22 retrained (22 s), 22 new (22 s).
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 94.0),
                ("waiting", 16.0),
                ("startUp", 12.0),
                ("reformation", 16.0),
                ("retrained", 22.0)
            ]
        );
        assert_eq!(ledger.highest_step, Some(95));
        assert_eq!(ledger.retrained_steps, 23, "52..=73, and 51 itself");
    }

    #[test]
    fn the_last_report_of_a_run_read_again_in_the_next_run_changes_nothing() {
        use GoodputBucket::*;
        let run = |run: i32, seen: Seen| Seen { run, ..seen };
        let ledger = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
                // Below its minimum at 100 s: the job checkpoints, then suspends in a new run
                // while its rendezvous store still tells the last report of run 0.
                with(seen(100.0, idle(Checkpoint)), report(97, 99.0, 1, 4.0)),
                run(
                    1,
                    with(seen(120.0, idle(Waiting)), report(97, 99.0, 1, 4.0)),
                ),
                run(
                    1,
                    with(seen(130.0, idle(StartUp)), report(97, 99.0, 1, 4.0)),
                ),
            ],
            ProgressSource::TrainingReports,
        );
        assert_eq!(ledger.retrained_steps, 0, "{ledger:?}");
        assert_eq!(ledger.highest_step, Some(97));
        assert_eq!(ledger.latest.as_ref().map(|latest| latest.run), Some(0));
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 95.0),
                ("waiting", 10.0),
                ("startUp", 4.0),
                ("checkpoint", 21.0)
            ]
        );
        assert_eq!(ledger.current, Some(StartUp));
    }

    #[test]
    fn the_last_steps_of_a_run_read_as_the_next_run_starts_are_not_trained_twice() {
        use GoodputBucket::*;
        let run = |run: i32, seen: Seen| Seen { run, ..seen };
        let ledger = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
                with(seen(60.0, Activity::Training), report(113, 59.0, 1, 4.0)),
                // A worker is lost at 100 s and the job starts run 1 (v1's wiring restarts
                // every pod); the reconcile that starts it reads the old pods, which still
                // trained until 99 s.
                run(
                    1,
                    with(seen(100.0, idle(Reformation)), report(193, 99.0, 1, 4.0)),
                ),
                run(1, seen(110.0, idle(StartUp))),
                // Run 1 loads checkpoint 190: its first step, 191, at 129 s.
                run(
                    1,
                    with(
                        seen(131.0, Activity::Training),
                        report(195, 130.0, 191, 129.0),
                    ),
                ),
            ],
            ProgressSource::TrainingReports,
        );
        assert_eq!(ledger.retrained_steps, 3, "191, 192 and 193: {ledger:?}");
        assert_eq!(ledger.highest_step, Some(195));
        assert_eq!(ledger.latest.as_ref().map(|latest| latest.run), Some(1));
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 95.5),
                ("startUp", 23.0),
                ("reformation", 11.0),
                ("retrained", 0.5)
            ]
        );
    }

    #[test]
    fn another_pod_telling_the_same_training_goes_on_from_the_recorded_step() {
        // Replica groups: the pod read first trains from step 1 at 4 s; a group that joined
        // at step 60 (it healed from the others, at 64 s) is read once the first pod is gone.
        let ledger = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
                with(seen(100.0, Activity::Training), report(97, 99.0, 1, 4.0)),
                // Read a step behind the last one recorded (pods are read one at a time).
                with(seen(101.0, Activity::Training), report(96, 100.5, 60, 64.0)),
                with(
                    seen(131.0, Activity::Training),
                    report(128, 130.0, 60, 64.0),
                ),
                // Its own helper saw a pause of 8 s after step 128: a stretch of its own.
                with(
                    seen(150.0, Activity::Training),
                    report(145, 149.0, 129, 138.0),
                ),
            ],
            ProgressSource::TrainingReports,
        );
        assert_eq!(ledger.retrained_steps, 0, "{ledger:?}");
        assert_eq!(ledger.highest_step, Some(145));
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 137.0),
                ("startUp", 4.0),
                ("reformation", 8.0)
            ],
            "4..130 and 138..149 trained; 130..138 re-formed (the states saw training, the \
             steps a pause)"
        );
    }

    #[test]
    fn productive_time_before_the_first_report_ever_is_start_up_up_to_its_first_step() {
        use GoodputBucket::*;
        // The store answers from the start; the training reports its first step only once
        // its processes imported torch and formed a group, which re-formed before that.
        let sightings = [
            (0.0, idle(Waiting), None),
            (2.0, Activity::Training, None),
            (32.0, idle(Reformation), None),
            (34.0, Activity::Training, None),
            (40.0, Activity::Training, Some(report(3, 40.0, 1, 36.0))),
            (70.0, Activity::Training, Some(report(63, 70.0, 1, 36.0))),
        ];
        let mut ledger: Option<Goodput> = None;
        for (at, activity, report) in &sightings {
            let source = if ledger.as_ref().is_some_and(|l| l.latest.is_some()) || report.is_some()
            {
                ProgressSource::TrainingReports
            } else {
                ProgressSource::PodStates
            };
            ledger = Some(advance(
                ledger.as_ref(),
                &Sighting {
                    source,
                    created: t(0.0),
                    activity: *activity,
                    report: report.as_ref(),
                    earlier: None,
                    run: 0,
                    begins_as: Waiting,
                    readable: true,
                },
                t(*at),
            ));
            if *at == 34.0 {
                let kept = ledger.as_ref().and_then(|l| l.unreported.clone());
                assert_eq!(kept.map(|u| u.seconds), Some(30.0), "kept aside");
            }
        }
        let ledger = ledger.unwrap();
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 34.0),
                ("waiting", 2.0),
                ("startUp", 32.0),
                ("reformation", 2.0)
            ],
            "2..32 and 34..36 were its start-up, 36..70 trained"
        );
        assert_eq!(ledger.unreported, None);
    }

    #[test]
    fn a_report_with_nanoseconds_read_again_is_the_report_recorded() {
        let wire: ReportedProgress = serde_json::from_value(serde_json::json!({
            "step": 40,
            "at": "2027-01-15T08:00:20.123456789Z",
            "first_step": 1,
            "first_at": "2027-01-15T08:00:00.987654321Z",
        }))
        .unwrap();
        let now: jiff::Timestamp = "2027-01-15T08:00:21Z".parse().unwrap();
        fn seen(report: &ProgressReport) -> Sighting<'_> {
            Sighting {
                source: ProgressSource::TrainingReports,
                created: "2027-01-15T07:59:50Z".parse().unwrap(),
                activity: Activity::Training,
                report: Some(report),
                earlier: None,
                run: 0,
                begins_as: GoodputBucket::Waiting,
                readable: true,
            }
        }
        let once = advance(None, &seen(&wire.read_at(None, 0, now)), now);
        let later = now + jiff::SignedDuration::from_secs(5);
        let again = wire.read_at(once.latest.as_ref(), 0, later);
        let twice = advance(Some(&once), &seen(&again), later);
        assert_eq!(twice, once, "nothing new");
        assert_eq!(once.retrained_steps, 0);
        assert_eq!(
            once.latest.map(|latest| latest.at.0.to_string()),
            Some("2027-01-15T08:00:20.123456Z".into())
        );
    }

    #[test]
    fn where_the_stretch_before_ended_is_read_to_the_microsecond() {
        let wire: ReportedProgress = serde_json::from_value(serde_json::json!({
            "step": 40,
            "first_step": 13,
            "first_at": "2027-01-15T08:00:00Z",
            "ended": {
                "step": 12,
                "at": "2027-01-15T07:59:58.000001999Z",
                "first_step": 1,
                "first_at": "2027-01-15T07:59:55Z",
            },
        }))
        .unwrap();
        let now: jiff::Timestamp = "2027-01-15T08:00:21Z".parse().unwrap();
        let ended = wire.read_at(None, 0, now).ended.expect("read");
        assert_eq!(
            (ended.step, ended.at.to_string(), ended.first_step),
            (12, "2027-01-15T07:59:58.000001Z".to_string(), 1)
        );
    }

    #[test]
    fn a_read_never_recorded_counts_once_nothing_tells_its_stretch_any_more() {
        use GoodputBucket::*;
        // Step 31 is read at 20 s, too soon after the record of step 1 to be written; then
        // every pod that served the steps goes at once. The steps up to that read trained.
        let read = report(31, 19.0, 1, 4.0);
        let trained = [
            with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
            with(seen(20.0, Activity::Training), read.clone()),
        ];
        // The reconcile after the loss, at `at`, with `now_read` read and `read` kept.
        let after = |at: f64, activity: Activity, now_read: Option<ProgressReport>| Seen {
            at,
            activity,
            report: now_read,
            earlier: Some(read.clone()),
            run: 0,
        };
        type Buckets = &'static [(&'static str, f64)];
        let cases: [(&str, Seen, Buckets); 3] = [
            (
                "nothing answers",
                after(22.0, idle(Reformation), None),
                &[("productive", 15.0), ("reformation", 3.0), ("startUp", 4.0)],
            ),
            (
                "the training started again from its checkpoint, at step 30",
                after(59.0, Activity::Training, Some(report(35, 59.0, 30, 50.0))),
                &[
                    ("productive", 22.2),
                    ("reformation", 31.0),
                    ("retrained", 1.8),
                    ("startUp", 4.0),
                ],
            ),
            (
                "the same stretch, told by another pod",
                after(22.0, Activity::Training, Some(report(33, 21.5, 1, 3.5))),
                &[("productive", 18.0), ("startUp", 4.0)],
            ),
        ];
        for (case, last, expected) in cases {
            let (at, now_read) = (last.at, last.report.clone());
            let mut sightings = vec![seen(0.0, Activity::Training)];
            sightings.extend(trained.iter().map(|seen| Seen {
                report: seen.report.clone(),
                earlier: None,
                ..*seen
            }));
            sightings.push(last);
            let ledger = live(&sightings, ProgressSource::TrainingReports);
            let mut counted = buckets(&super::at(&ledger, t(at)));
            counted.sort_by(|a, b| a.0.cmp(b.0));
            assert_eq!(counted, expected, "{case}");
            let without = live(
                &sightings
                    .iter()
                    .map(|seen| Seen {
                        report: seen.report.clone(),
                        earlier: None,
                        ..*seen
                    })
                    .collect::<Vec<_>>(),
                ProgressSource::TrainingReports,
            );
            let gone = now_read.is_none_or(|report| report.first_at > read.at);
            assert_eq!(
                without.seconds.productive < ledger.seconds.productive,
                gone,
                "{case}: the earlier read is what counts its steps"
            );
        }
    }

    #[test]
    fn an_earlier_read_of_the_stretch_a_report_still_tells_writes_nothing() {
        let recorded = [
            seen(0.0, Activity::Training),
            with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
        ];
        let start = live(&recorded, ProgressSource::TrainingReports);
        let read_again = Seen {
            at: 20.0,
            activity: Activity::Training,
            report: Some(report(36, 19.5, 1, 4.0)),
            earlier: Some(report(31, 15.0, 1, 4.0)),
            run: 0,
        };
        let [first, second] = recorded;
        assert_eq!(
            live(
                &[first, second, read_again],
                ProgressSource::TrainingReports
            ),
            start,
            "read every few seconds, recorded only every so often"
        );
    }

    #[test]
    fn a_job_that_trains_steadily_is_recorded_only_every_so_often() {
        let start = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
            ],
            ProgressSource::TrainingReports,
        );
        let step = |ledger: &Goodput, at: f64, step: i64| {
            advance(
                Some(ledger),
                &Sighting {
                    source: ProgressSource::TrainingReports,
                    created: t(0.0),
                    activity: Activity::Training,
                    report: Some(&report(step, at - 0.5, 1, 4.0)),
                    earlier: None,
                    run: 0,
                    begins_as: GoodputBucket::Waiting,
                    readable: true,
                },
                t(at),
            )
        };
        assert_eq!(
            step(&start, 20.0, 16),
            start,
            "15 s later: nothing to write"
        );
        let recorded = step(&start, 40.0, 36);
        assert_eq!(recorded.latest.as_ref().unwrap().step, 36);
        assert_eq!(recorded.seconds.productive, 35.5);
        assert_eq!(recorded.highest_step, Some(36));
    }

    #[test]
    fn steps_that_went_on_through_a_change_the_states_saw_count_as_training_at_once() {
        use GoodputBucket::*;
        // A worker is added; the states show the group re-forming for a while, but the
        // processes were not restarted and the steps of the stretch went on.
        let ledger = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(10.0, Activity::Training), report(10, 9.0, 1, 0.0)),
                with(seen(20.0, idle(Reformation)), report(20, 19.0, 1, 0.0)),
                with(seen(25.0, Activity::Training), report(25, 24.5, 1, 0.0)),
            ],
            ProgressSource::TrainingReports,
        );
        assert_eq!(ledger.current, Some(Productive), "not 30 s later");
        assert_eq!(buckets(&ledger.seconds), [("productive", 24.5)]);
    }

    fn after(ended: (i64, f64, i64, f64), mut report: ProgressReport) -> ProgressReport {
        let (step, at, first_step, first_at) = ended;
        report.ended = Some(EndedStretch {
            step,
            at: t(at),
            first_step,
            first_at: t(first_at),
        });
        report
    }

    #[test]
    fn a_stretch_trains_until_its_last_step_when_the_next_one_tells_where_it_ended() {
        // Horovod: the training is recorded at 5 s and read again at 20 s (not worth a
        // write). A host joins: the processes reset after step 25 at 27 s, go back to the
        // commit at step 23 and train step 24 at 33 s.
        let sightings = [
            seen(0.0, Activity::Training),
            with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
            with(seen(20.0, Activity::Training), report(16, 19.0, 1, 4.0)),
            with(
                seen(40.0, Activity::Training),
                after((25, 27.0, 1, 4.0), report(30, 39.0, 24, 33.0)),
            ),
        ];
        let ledger = live(&sightings, ProgressSource::TrainingReports);
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 28.0),
                ("startUp", 4.0),
                ("reformation", 6.0),
                ("retrained", 1.0)
            ],
            "4..27 and five of the six steps of 33..39 trained; 27..33 re-formed"
        );
        assert_eq!(ledger.retrained_steps, 2, "24 and 25");
        assert_eq!(ledger.highest_step, Some(30));

        // Untold, the steps after the record at 4 s would count as re-formation.
        let mut untold = sightings;
        untold[3].report.as_mut().unwrap().ended = None;
        let ledger = live(&untold, ProgressSource::TrainingReports);
        assert_eq!(ledger.seconds.reformation, 29.0);
    }

    #[test]
    fn a_stretch_that_began_and_ended_between_two_reads_is_trained_and_re_formed_before() {
        use GoodputBucket::*;
        let ledger = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
                // A worker is lost at 30 s: the report then is recorded (step 26 at 29 s).
                with(seen(30.0, idle(Reformation)), report(26, 29.0, 1, 4.0)),
                // The survivors train steps 27..=36 from 40 s to 49 s, unread, and reset
                // again as the replacement joins; step 37 comes at 55 s.
                with(
                    seen(60.0, Activity::Training),
                    after((36, 49.0, 27, 40.0), report(41, 59.0, 37, 55.0)),
                ),
            ],
            ProgressSource::TrainingReports,
        );
        assert_eq!(
            buckets(&ledger.seconds),
            [
                ("productive", 38.0),
                ("startUp", 4.0),
                ("reformation", 17.0)
            ],
            "4..29, 40..49 and 55..59 trained; 29..40 and 49..55 re-formed"
        );
        assert_eq!(ledger.retrained_steps, 0);
    }

    #[test]
    fn an_ended_stretch_the_ledger_recorded_to_its_end_changes_nothing() {
        let recorded = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
                with(
                    seen(30.0, idle(GoodputBucket::Reformation)),
                    report(26, 29.0, 1, 4.0),
                ),
                with(seen(41.0, Activity::Training), report(27, 40.0, 27, 40.0)),
            ],
            ProgressSource::TrainingReports,
        );
        let told = live(
            &[
                seen(0.0, Activity::Training),
                with(seen(5.0, Activity::Training), report(1, 4.0, 1, 4.0)),
                with(
                    seen(30.0, idle(GoodputBucket::Reformation)),
                    report(26, 29.0, 1, 4.0),
                ),
                with(
                    seen(41.0, Activity::Training),
                    after((26, 29.0, 1, 4.0), report(27, 40.0, 27, 40.0)),
                ),
            ],
            ProgressSource::TrainingReports,
        );
        assert_eq!(told, recorded);
    }

    #[test]
    fn time_the_training_said_it_loaded_a_checkpoint_is_checkpoint_time() {
        let mut first = report(51, 30.0, 51, 30.0);
        first.restored = Some(Restored {
            from: t(20.0),
            to: t(26.0),
        });
        let ledger = live(
            &[
                seen(0.0, idle(GoodputBucket::StartUp)),
                with(seen(31.0, Activity::Training), first),
            ],
            ProgressSource::TrainingReports,
        );
        assert_eq!(
            buckets(&ledger.seconds),
            [("startUp", 24.0), ("checkpoint", 6.0)]
        );
        assert_eq!(ledger.current, Some(GoodputBucket::Productive));
    }

    #[test]
    fn a_ledger_read_back_from_the_status_goes_on_as_if_the_operator_never_left() {
        use GoodputBucket::*;
        let sightings = [
            seen(0.0, idle(Waiting)),
            seen(20.0, Activity::Training),
            with(seen(30.0, Activity::Training), report(2, 29.0, 1, 28.0)),
            with(seen(100.0, idle(Reformation)), report(60, 99.0, 1, 28.0)),
            with(
                seen(130.0, Activity::Training),
                report(40, 125.0, 40, 125.0),
            ),
            seen(190.0, Activity::Finished),
        ];
        let whole = live(&sightings, ProgressSource::TrainingReports);
        // The operator stops after the loss and starts 25 s later: the ledger it wrote is
        // read back from the job's status.
        let written =
            serde_json::to_value(live(&sightings[..4], ProgressSource::TrainingReports)).unwrap();
        let mut ledger: Goodput = serde_json::from_value(written).unwrap();
        for seen in &sightings[4..] {
            ledger = advance(
                Some(&ledger),
                &Sighting {
                    source: ProgressSource::TrainingReports,
                    created: t(0.0),
                    activity: seen.activity,
                    report: seen.report.as_ref(),
                    earlier: seen.earlier.as_ref(),
                    run: seen.run,
                    begins_as: Waiting,
                    readable: true,
                },
                t(seen.at),
            );
        }
        assert_eq!(ledger, whole);
        assert_eq!(ledger.seconds.total(), 190.0, "every second once");
    }

    #[test]
    fn the_largest_loss_is_the_bucket_with_most_time_but_productive() {
        let seconds = GoodputSeconds {
            productive: 500.0,
            waiting: 3.0,
            reformation: 12.5,
            ..GoodputSeconds::default()
        };
        assert_eq!(largest_loss(&seconds), Some(GoodputBucket::Reformation));
        assert_eq!(largest_loss(&GoodputSeconds::default()), None);
        assert_eq!(ratio(&seconds), Some(500.0 / 515.5));
    }

    fn any_activity() -> impl Strategy<Value = Activity> {
        prop_oneof![
            Just(Activity::Training),
            Just(Activity::Training),
            prop::sample::select(GoodputBucket::ALL.to_vec()).prop_map(Activity::Idle),
        ]
    }

    proptest! {
        /// Whatever the job does and the training reports, and however late eto looks, every
        /// moment since the job's creation lands in exactly one bucket, and no total shrinks
        /// but productive time the first report shows was start-up.
        #[test]
        fn every_moment_lands_in_one_bucket(
            steps in prop::collection::vec(
                (
                    1_u32..40_000,
                    any_activity(),
                    prop::option::of((0_i64..200, 0_u32..30_000, 0_i64..20, 0_u32..60_000)),
                    prop::option::of((0_i64..200, 0_i64..20, 0_u32..30_000, 0_u32..60_000)),
                ),
                1..40,
            ),
            finish in any::<bool>(),
            readable in any::<bool>(),
        ) {
            let mut now = 0.0;
            let mut ledger: Option<Goodput> = None;
            let mut run = 0;
            // The controller's memory of the last report read.
            let mut last_read: Option<ProgressReport> = None;
            for (gap_ms, activity, said, ended) in steps {
                now += f64::from(gap_ms) / 1000.0;
                if activity == Activity::Idle(GoodputBucket::Other) {
                    run += 1;
                }
                let reported = said.map(|(step, back_ms, stretch, length_ms)| {
                    let at = (now - f64::from(back_ms) / 1000.0).max(0.0);
                    let first_at = (at - f64::from(length_ms) / 1000.0).max(0.0);
                    let mut report = report(step + stretch, at, step, first_at);
                    // The stretch before it, ended some time before it began.
                    report.ended = ended.map(|(first_step, steps, gap_ms, length_ms)| {
                        let at = (first_at - f64::from(gap_ms) / 1000.0).max(0.0);
                        EndedStretch {
                            step: first_step + steps,
                            at: t(at),
                            first_step,
                            first_at: t((at - f64::from(length_ms) / 1000.0).max(0.0)),
                        }
                    });
                    report
                });
                // As the plan says it: the states alone until the training's first report.
                let reports_seen = reported.is_some()
                    || ledger.as_ref().is_some_and(|l| l.latest.is_some());
                let source = if readable && reports_seen {
                    ProgressSource::TrainingReports
                } else {
                    ProgressSource::PodStates
                };
                let reported = reported.filter(|_| readable);
                let next = advance(
                    ledger.as_ref(),
                    &Sighting {
                        source,
                        created: t(0.0),
                        activity,
                        report: reported.as_ref(),
                        earlier: last_read.as_ref(),
                        run,
                        begins_as: GoodputBucket::Waiting,
                        readable,
                    },
                    t(now),
                );
                if reported.is_some() {
                    last_read.clone_from(&reported);
                }
                if let Some(before) = &ledger {
                    let confirmed = before.unreported.is_some() && next.unreported.is_none();
                    for bucket in GoodputBucket::ALL {
                        let may_shrink = confirmed && bucket == GoodputBucket::Productive;
                        prop_assert!(may_shrink || next.seconds.get(bucket) >= before.seconds.get(bucket));
                    }
                    prop_assert!(next.seconds.total() >= before.seconds.total() - 0.001);
                    prop_assert!(next.current_since.0 >= before.current_since.0);
                }
                prop_assert!(next.current_since.0 <= t(now));
                let total = at(&next, t(now)).total();
                prop_assert!((total - now).abs() < 0.01 * 40.0, "{total} s accounted of {now} s");
                ledger = Some(next);
            }
            if finish {
                now += 1.0;
                let closed = advance(
                    ledger.as_ref(),
                    &Sighting {
                        source: ProgressSource::TrainingReports,
                        created: t(0.0),
                        activity: Activity::Finished,
                        report: None,
                        earlier: None,
                        run,
                        begins_as: GoodputBucket::Waiting,
                        readable,
                    },
                    t(now),
                );
                prop_assert!((closed.seconds.total() - now).abs() < 0.01 * 40.0);
                prop_assert_eq!(closed.current, None);
            }
        }
    }
}
