//! The blacklist of lost workers, and the rule that a worker's index is never used again.
//!
//! A worker that is lost (see [`crate::loss`]) goes on `status.blacklist` once, with its node,
//! reason, exit code and the time eto saw it; the list keeps the latest
//! [`BLACKLIST_LIMIT`] entries. Horovod blacklists hosts by name, and so does eto: a worker's
//! index is never used again for another worker, neither the index of a worker on the
//! blacklist, nor of one whose pod exists, nor of one in the target, nor any below the highest
//! index the job ever used (`status.nextWorkerIndex`), whose pods may be long gone.

use std::collections::BTreeSet;

use eto_api::job_status::{BLACKLIST_LIMIT, BlacklistEntry};

use crate::names;

/// Puts `entry` on `blacklist` unless its pod is there already, then drops the oldest entries
/// beyond [`BLACKLIST_LIMIT`].
pub fn record(blacklist: &mut Vec<BlacklistEntry>, entry: BlacklistEntry) {
    if !blacklist.iter().any(|listed| listed.pod == entry.pod) {
        blacklist.push(entry);
    }
    let overflow = blacklist.len().saturating_sub(BLACKLIST_LIMIT);
    blacklist.drain(..overflow);
}

/// The indices of job `job`'s workers on `blacklist`.
pub fn indices(job: &str, blacklist: &[BlacklistEntry]) -> BTreeSet<u32> {
    blacklist
        .iter()
        .filter_map(|entry| names::worker_index(job, &entry.pod))
        .collect()
}

/// The smallest index a new worker may take: past every index in `used` (the job's worker
/// pods, its blacklist and its target) and at least `recorded` (`status.nextWorkerIndex`).
pub fn next_index(used: impl IntoIterator<Item = u32>, recorded: Option<i32>) -> u32 {
    let recorded = recorded
        .and_then(|next| u32::try_from(next).ok())
        .unwrap_or(0);
    after(recorded, used)
}

/// `next`, or past the highest of `taken` when that is higher: what a new worker may take once
/// `taken` are used too.
pub fn after(next: u32, taken: impl IntoIterator<Item = u32>) -> u32 {
    taken
        .into_iter()
        .map(|index| index + 1)
        .fold(next, u32::max)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use pretty_assertions::assert_eq;

    use super::*;

    fn entry(pod: &str) -> BlacklistEntry {
        BlacklistEntry {
            pod: pod.into(),
            node: None,
            reason: "Error".into(),
            exit_code: Some(1),
            time: Time(jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn a_worker_is_listed_once_and_the_oldest_entries_go_past_the_limit() {
        let mut blacklist = vec![entry("job-worker-0")];
        record(&mut blacklist, entry("job-worker-0"));
        assert_eq!(blacklist.len(), 1, "once");
        for index in 1..=BLACKLIST_LIMIT {
            record(&mut blacklist, entry(&format!("job-worker-{index}")));
        }
        assert_eq!(blacklist.len(), BLACKLIST_LIMIT);
        assert_eq!(blacklist[0].pod, "job-worker-1", "the oldest went");
        assert_eq!(
            indices("job", &blacklist).last(),
            Some(&u32::try_from(BLACKLIST_LIMIT).unwrap())
        );
    }

    #[test]
    fn an_index_is_never_used_again() {
        // (indices in use, status.nextWorkerIndex, next)
        let cases: [(&[u32], Option<i32>, u32); 5] = [
            (&[], None, 0),
            (&[0, 1], None, 2),
            (&[3], Some(1), 4),
            (&[], Some(7), 7),
            (&[2], Some(-1), 3),
        ];
        for (used, recorded, next) in cases {
            assert_eq!(
                next_index(used.iter().copied(), recorded),
                next,
                "{used:?} {recorded:?}"
            );
        }
        assert_eq!(after(4, [1, 6]), 7);
        assert_eq!(after(4, []), 4);
    }
}
