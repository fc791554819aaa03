//! A training's own record of its steps, read as the ground truth of its goodput: the
//! benchmarks' training code appends a line per step it finished to a file the test can read,
//! `step=<n> at=<unix seconds> who=<process>`, and a line when its processes re-formed their
//! group without restarting (Horovod's reset callback; a replica group whose quorum changed
//! under a step), `reset at=<unix seconds>`; [`truth`]
//! tells from those lines alone, without eto's ledger, how much of a window of time trained.
//!
//! The rule: the time from a process's print of step `n - 1` to its print of step `n` is
//! productive when that print is the first of step `n` anywhere (several replica groups print
//! the same step at once: the time counts once) and no reset came between the two; it begins
//! at the first print of step `n - 1` anywhere when that was the same training of it (within
//! [`SAME_STEP_WITHIN`]), so that groups taking turns at printing first leave no gaps. A
//! process's first step after its start, after a reset, or after steps that went back ends
//! time spent outside training (start-up, re-formation, restore), which is not productive. A
//! step printed again more than [`SAME_STEP_WITHIN`] after its first print was trained twice.

/// Prints of one step this close to each other are one training of it (replica groups step
/// together); later ones train it again.
pub const SAME_STEP_WITHIN: f64 = 1.0;

/// Now, on the clock step logs use: seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is past the epoch")
        .as_secs_f64()
}

/// One step a process finished.
#[derive(Clone, Debug, PartialEq)]
pub struct StepLine {
    /// The step.
    pub step: i64,
    /// When it was finished, in seconds since the Unix epoch.
    pub at: f64,
    /// The process that printed it (its host and process id).
    pub who: String,
}

/// What a step log holds: the steps, and when the training re-formed its group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepLog {
    /// The steps finished, in the log's order.
    pub steps: Vec<StepLine>,
    /// When the processes re-formed their group without restarting, in seconds since the
    /// Unix epoch.
    pub resets: Vec<f64>,
}

/// The step and reset lines of `text`; other lines are skipped.
pub fn parse(text: &str) -> StepLog {
    let mut log = StepLog::default();
    for line in text.lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix(key))
        };
        let Some(at) = field("at=").and_then(|at| at.parse().ok()) else {
            continue;
        };
        if line.split_whitespace().next() == Some("reset") {
            log.resets.push(at);
        } else if let (Some(step), Some(who)) = (
            field("step=").and_then(|step| step.parse().ok()),
            field("who="),
        ) {
            log.steps.push(StepLine {
                step,
                at,
                who: who.to_string(),
            });
        }
    }
    log
}

/// What a step log says of a window of a job's time.
#[derive(Clone, Debug, PartialEq)]
pub struct Truth {
    /// Seconds of the window in which steps were trained for the first time.
    pub productive: f64,
    /// The window's length in seconds.
    pub elapsed: f64,
    /// Steps trained again after their first training.
    pub retrained_steps: u64,
    /// The highest step reached in the window.
    pub highest: Option<i64>,
}

impl Truth {
    /// The productive share of the window (0 to 1); `None` for an empty window.
    pub fn ratio(&self) -> Option<f64> {
        (self.elapsed > 0.0).then(|| self.productive / self.elapsed)
    }
}

/// What `log` says of the window from `from` to `to` (Unix seconds).
pub fn truth(log: &StepLog, from: f64, to: f64) -> Truth {
    let mut seen: Vec<&StepLine> = log
        .steps
        .iter()
        .filter(|line| line.at >= from && line.at <= to)
        .collect();
    seen.sort_by(|a, b| a.at.total_cmp(&b.at));
    let mut first = std::collections::BTreeMap::new();
    for line in &seen {
        first.entry(line.step).or_insert(line.at);
    }
    let reset_between =
        |from: f64, to: f64| log.resets.iter().any(|reset| from < *reset && *reset < to);
    let mut previous: std::collections::BTreeMap<&str, &StepLine> = Default::default();
    let mut trained: Vec<(f64, f64)> = Vec::new();
    for line in &seen {
        if let Some(before) = previous.insert(&line.who, line)
            && line.step == before.step + 1
            && first.get(&line.step) == Some(&line.at)
            && !reset_between(before.at, line.at)
        {
            let start = first
                .get(&before.step)
                .copied()
                .filter(|&first| {
                    before.at - first <= SAME_STEP_WITHIN && !reset_between(first, line.at)
                })
                .unwrap_or(before.at);
            trained.push((start, line.at));
        }
    }
    Truth {
        productive: union_length(trained),
        elapsed: (to - from).max(0.0),
        retrained_steps: retrained(&seen),
        highest: first.keys().next_back().copied(),
    }
}

/// The length of the union of the intervals `spans`.
fn union_length(mut spans: Vec<(f64, f64)>) -> f64 {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut open: Option<(f64, f64)> = None;
    for (start, end) in spans {
        match open {
            Some((_, until)) if start <= until => {
                open = open.map(|(from, until)| (from, until.max(end)));
            }
            _ => {
                total += open.map_or(0.0, |(from, until)| until - from);
                open = Some((start, end));
            }
        }
    }
    total + open.map_or(0.0, |(from, until)| until - from)
}

/// How many times steps of `seen` (in time order) were trained again: each print of a step
/// more than [`SAME_STEP_WITHIN`] after the previous training of that step is another.
fn retrained(seen: &[&StepLine]) -> u64 {
    let mut latest: std::collections::BTreeMap<i64, f64> = Default::default();
    let mut again = 0;
    for line in seen {
        match latest.get(&line.step) {
            Some(trained_at) if line.at - trained_at > SAME_STEP_WITHIN => {
                again += 1;
                latest.insert(line.step, line.at);
            }
            Some(_) => {}
            None => {
                latest.insert(line.step, line.at);
            }
        }
    }
    again
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(list: &[(i64, f64, &str)]) -> StepLog {
        StepLog {
            steps: list
                .iter()
                .map(|(step, at, who)| StepLine {
                    step: *step,
                    at: *at,
                    who: who.to_string(),
                })
                .collect(),
            resets: Vec::new(),
        }
    }

    fn with_resets(log: StepLog, resets: &[f64]) -> StepLog {
        StepLog {
            resets: resets.to_vec(),
            ..log
        }
    }

    #[test]
    fn step_and_reset_lines_are_read_and_other_lines_skipped() {
        let text = "step=3 at=10.5 who=a-1\nnoise\nstep=x at=1 who=a\nreset at=10.7 who=a-1\n\
                    reset\nstep=4 at=11.0 who=a-1 extra=1\n";
        assert_eq!(
            parse(text),
            with_resets(lines(&[(3, 10.5, "a-1"), (4, 11.0, "a-1")]), &[10.7])
        );
    }

    #[test]
    fn the_log_tells_productive_time_and_steps_trained_twice() {
        // (name, lines, window, productive seconds, steps trained twice)
        type Case = (&'static str, StepLog, (f64, f64), f64, u64);
        let cases: [Case; 9] = [
            (
                "one process stepping every second: the first step ends its start-up",
                lines(&[(1, 5.0, "a"), (2, 6.0, "a"), (3, 7.0, "a")]),
                (0.0, 10.0),
                2.0,
                0,
            ),
            (
                "a new process resuming from an older checkpoint trains steps twice",
                lines(&[
                    (1, 1.0, "a"),
                    (2, 2.0, "a"),
                    (3, 3.0, "a"),
                    (2, 8.0, "b"),
                    (3, 9.0, "b"),
                    (4, 10.0, "b"),
                ]),
                (0.0, 10.0),
                3.0,
                2,
            ),
            (
                "replica groups printing the same steps together count the time once",
                lines(&[
                    (1, 1.0, "a"),
                    (1, 1.01, "b"),
                    (2, 2.0, "a"),
                    (2, 2.02, "b"),
                    (3, 3.0, "b"),
                    (3, 3.05, "a"),
                ]),
                (0.0, 4.0),
                // step 2 from step 1's first print; step 3, first printed by b, from step 2's
                // first print (a's), not from b's own: no gap
                2.0,
                0,
            ),
            (
                "a group that stalls between two steps counts the stall as the step's time",
                lines(&[(1, 1.0, "a"), (2, 2.0, "a"), (3, 6.0, "a")]),
                (0.0, 6.0),
                5.0,
                0,
            ),
            (
                "a process that re-forms its group between two steps did not train meanwhile",
                with_resets(
                    lines(&[(1, 1.0, "a"), (2, 2.0, "a"), (3, 6.0, "a"), (4, 7.0, "a")]),
                    &[5.5],
                ),
                (0.0, 7.0),
                2.0,
                0,
            ),
            (
                "a reset ends the stretch of every process, not only the one that wrote it",
                with_resets(
                    lines(&[(1, 1.0, "a"), (2, 2.0, "b"), (3, 6.0, "b"), (4, 7.0, "b")]),
                    &[3.0],
                ),
                (0.0, 7.0),
                1.0,
                0,
            ),
            (
                "a reset after the first print of the step before starts the time at the own",
                with_resets(
                    lines(&[(1, 1.0, "a"), (1, 1.5, "b"), (2, 2.5, "b")]),
                    &[1.2],
                ),
                (0.0, 3.0),
                1.0,
                0,
            ),
            (
                "lines outside the window are left out",
                lines(&[(1, 1.0, "a"), (2, 2.0, "a"), (3, 3.0, "a"), (4, 12.0, "a")]),
                (1.5, 10.0),
                1.0,
                0,
            ),
            (
                "a step skipped in the log is not training time",
                lines(&[(1, 1.0, "a"), (5, 2.0, "a")]),
                (0.0, 2.0),
                0.0,
                0,
            ),
        ];
        for (name, log, (from, to), productive, twice) in cases {
            let truth = truth(&log, from, to);
            assert!(
                (truth.productive - productive).abs() < 1e-9,
                "{name}: {truth:?}"
            );
            assert_eq!(truth.retrained_steps, twice, "{name}");
            assert_eq!(truth.elapsed, to - from, "{name}");
        }
    }

    #[test]
    fn the_ratio_is_productive_time_over_the_window() {
        let log = lines(&[(1, 1.0, "a"), (2, 3.0, "a")]);
        assert_eq!(truth(&log, 0.0, 4.0).ratio(), Some(0.5));
        assert_eq!(truth(&log, 4.0, 4.0).ratio(), None);
    }
}
