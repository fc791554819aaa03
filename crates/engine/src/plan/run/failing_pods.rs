//! Saying on the job why its pods fail: the condition `PodsFailing`, a Warning event when what
//! it says changes, and `Stalled` (with `Ready`'s reason) while the job cannot train because of
//! it.
//!
//! The condition holds while a pod of the run waits for good (an image that is never pulled,
//! a missing Secret, a container crash-looping in place; see [`crate::own_failure`]) or a role
//! backs off (its pods failed on their own twice in a row or more, see [`crate::backoff`]).
//! Its reason is the kubelet's (`ImagePullBackOff`, `CreateContainerConfigError`, ...) or
//! `CrashLoopBackOff` for a role eto backs off; its message names the role, the pod, the
//! container and the cause, and when the next pod comes. A first failure, replaced at once,
//! says so in its `WorkerLost` event and sets no condition. The condition turns false once
//! nothing waits and no role backs off: the pods run again, or a new template fixed them.

use eto_api::well_known::WORKER_ROLE;

use super::Run;
use super::worker_backoff::WORKER;
use crate::conditions;
use crate::own_failure::OwnFailure;
use crate::pods;

/// The condition's type.
pub const PODS_FAILING: &str = "PodsFailing";

/// The condition's reason while a role backs off.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";

/// The condition's reason once nothing fails.
pub const PODS_RUN: &str = "PodsRun";

/// The most pods one line of the message names; the others are counted.
const NAMED: usize = 1;

impl Run<'_, '_> {
    /// Sets `PodsFailing` from the backing-off roles and the waiting pods of the run, and
    /// records a Warning event when it says something new; returns its reason and message
    /// while it holds, for `Stalled` and `Ready` while the job does not train.
    pub(super) fn report_failing_pods(&mut self) -> Option<(String, String)> {
        let now = self.planner.now;
        // (reason, line, the role of a waiting pod)
        let mut lines: Vec<(String, String, Option<&'static str>)> = Vec::new();
        for record in &self.planner.status.backoff {
            if record.failures < 2 {
                continue;
            }
            let next = if crate::backoff::waits(record, now) {
                format!(
                    "its next pods wait until {} ({})",
                    record.retry_at.0,
                    waiting_pods(&record.waiting)
                )
            } else {
                "the back-off ends once a new pod runs for 10 minutes".to_string()
            };
            lines.push((
                CRASH_LOOP_BACK_OFF.to_string(),
                format!(
                    "{}; {} failures of {} pods in a row: {next}",
                    record.cause, record.failures, record.role
                ),
                None,
            ));
        }
        let role_label = self.context.kind().vocabulary().role_label;
        let coordinator = self.context.job_ref.coordinator().role;
        let mut waiting: Vec<(&str, String, OwnFailure)> = self
            .observed
            .pods
            .iter()
            .filter(|pod| !self.is_stale(pod) && !pods::is_terminating(pod))
            .filter_map(|pod| {
                let failure = OwnFailure::of(pod).filter(|f| f.waits)?;
                let role = if pods::label(pod, role_label) == Some(WORKER_ROLE) {
                    WORKER
                } else {
                    coordinator
                };
                Some((role, pod.metadata.name.clone().unwrap_or_default(), failure))
            })
            .collect();
        waiting.sort_by(|a, b| (a.0, &a.2.reason).cmp(&(b.0, &b.2.reason)));
        for same in waiting.chunk_by(|a, b| a.0 == b.0 && a.2.reason == b.2.reason) {
            let (role, pod, failure) = &same[0];
            let more = match same.len().saturating_sub(NAMED) {
                0 => String::new(),
                others => format!(" (and {others} more)"),
            };
            lines.push((
                failure.reason.clone(),
                format!("{role} {pod}{more}: {}", failure.describe()),
                Some(*role),
            ));
        }
        let old = conditions::find(&self.planner.status_before.conditions, PODS_FAILING);
        let Some((reason, ..)) = lines.first().cloned() else {
            if old.is_some() {
                self.planner.condition(
                    PODS_FAILING,
                    false,
                    PODS_RUN,
                    "no pod of the job fails on its own",
                );
            }
            return None;
        };
        let message = lines
            .iter()
            .map(|(_, line, _)| line.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let said = old.is_some_and(|old| {
            old.status == eto_api::common::ConditionStatus::True
                && old.reason.as_deref() == Some(reason.as_str())
                && old.message.as_deref() == Some(message.as_str())
        });
        if !said {
            self.planner
                .event(true, &reason, "Observe", message.clone());
            // Failures are counted as they are seen (see worker_backoff.rs); pods that wait,
            // as they are said.
            for (reason, _, role) in &lines {
                if let Some(role) = role {
                    self.planner
                        .plan
                        .tallies
                        .pod_failures
                        .push((role, reason.clone()));
                }
            }
        }
        self.planner
            .condition(PODS_FAILING, true, &reason, &message);
        Some((reason, message))
    }
}

/// The pods a back-off holds, in words.
fn waiting_pods(waiting: &[String]) -> String {
    match waiting {
        [] => "none held".to_string(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    }
}
