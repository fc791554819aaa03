//! The latest progress read of each job, kept in memory between reconciles.
//!
//! Not every read is written to the job's ledger (see [`eto_engine::goodput::RECORD_EVERY`]),
//! and where the training's own pods serve the steps, every one of them may go at once with
//! its word. The next reconcile then passes the read kept here (see
//! [`eto_engine::plan::Observed::earlier_progress`]), so that the steps up to it still count
//! as trained. A job is known by its uid: a job created again under the same name starts with
//! nothing. The memory is only a help: an operator that restarts starts with nothing, and the
//! ledger is then as exact as its last record.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use eto_engine::goodput::ReportedProgress;

/// How long a read is kept: a job that trains is read every few seconds, so an older read
/// belongs to a job that no longer trains, or is gone.
pub const KEPT_FOR: Duration = Duration::from_secs(10 * 60);

/// The latest progress read of each job, by the job's uid.
#[derive(Debug, Default)]
pub struct ProgressReads {
    reads: Mutex<HashMap<String, ReportedProgress>>,
}

impl ProgressReads {
    /// The progress last read of the job `uid`, if it is kept.
    pub fn latest(&self, uid: &str) -> Option<ReportedProgress> {
        self.lock().get(uid).cloned()
    }

    /// Keeps `progress`, read of the job `uid` at `now` (its time, where it gives none). A
    /// job not kept yet first drops the reads older than [`KEPT_FOR`]: only a new job grows
    /// the memory, so a job read again every few seconds does not walk it each time.
    pub fn keep(&self, uid: &str, progress: &ReportedProgress, now: jiff::Timestamp) {
        let mut kept = progress.clone();
        kept.at = Some(kept.at.unwrap_or(now));
        let mut reads = self.lock();
        if !reads.contains_key(uid) {
            reads.retain(|_, read| {
                read.at
                    .is_some_and(|at| now.duration_since(at).unsigned_abs() < KEPT_FOR)
            });
        }
        reads.insert(uid.to_string(), kept);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ReportedProgress>> {
        self.reads.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    fn progress(step: i64, when: Option<jiff::Timestamp>) -> ReportedProgress {
        serde_json::from_value(serde_json::json!({"step": step, "at": when})).unwrap()
    }

    #[test]
    fn a_read_is_kept_per_job_with_its_time_until_it_is_old() {
        let reads = ProgressReads::default();
        reads.keep("a", &progress(7, None), at(0));
        reads.keep("b", &progress(3, Some(at(-1))), at(0));
        let kept = reads.latest("a").expect("kept");
        assert_eq!(
            (kept.step, kept.at),
            (7, Some(at(0))),
            "a read without its time took the time it was read"
        );
        assert_eq!(reads.latest("b").map(|read| read.at), Some(Some(at(-1))));
        reads.keep("a", &progress(9, None), at(5));
        assert_eq!(
            reads.latest("a").map(|read| read.step),
            Some(9),
            "the latest"
        );
        reads.keep("c", &progress(99, None), at(KEPT_FOR.as_secs() as i64));
        assert!(
            reads.latest("b").is_none(),
            "a job no longer read is forgotten"
        );
        assert_eq!(
            reads.latest("a").map(|read| read.step),
            Some(9),
            "read lately"
        );
        assert_eq!(reads.latest("c").map(|read| read.step), Some(99));
    }
}
