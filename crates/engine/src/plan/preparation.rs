//! The steps a job runs before its first run (a TrainJob's dataset and model initializers,
//! see [`crate::job::Preparation`]): each step's pod is created once the steps it waits for
//! are far enough, the run starts once the steps it waits for are, and a step whose pod fails
//! fails the job, as JobSet's default failure policy does. Once the run may start, the
//! `Prepared` condition records it: the steps never run again in the job's life (a suspended
//! job resumes without them), and their pods stay as they ended, with their logs. Each step's
//! state is kept in the status as last seen (a TrainJob shows it in `jobsStatus`).

use k8s_openapi::api::core::v1::Pod;

use super::{Child, Observed, Planner};
use crate::conditions;
use crate::job::{JobContext, StepReached};
use crate::pods;
use crate::status::StepState;

impl Planner {
    /// Runs `job`'s preparation as far as it goes now; returns whether its run may start.
    pub(super) fn prepared(&mut self, observed: &Observed<'_>, job: JobContext<'_>) -> bool {
        if conditions::is_true(&self.status.conditions, conditions::PREPARED) {
            return true;
        }
        let preparation = job.job_ref.preparation(job);
        if preparation.steps.is_empty() {
            return true;
        }
        let pod_of = |name: &str| {
            preparation
                .steps
                .iter()
                .find(|step| step.name == name)
                .and_then(|step| step.pod.metadata.name.as_deref())
                .and_then(|pod| {
                    observed
                        .pods
                        .iter()
                        .find(|found| found.metadata.name.as_deref() == Some(pod))
                })
        };
        let reached = |waits_for: &[(String, StepReached)]| {
            waits_for.iter().all(|(name, reached)| {
                pod_of(name).is_some_and(|pod| match reached {
                    StepReached::Ready => pods::is_ready(pod) || succeeded(pod),
                    StepReached::Complete => succeeded(pod),
                })
            })
        };
        for step in &preparation.steps {
            let pod = pod_of(&step.name);
            let state = pod.map_or_else(StepState::default, |pod| StepState {
                active: !pods::is_finished(pod),
                ready: pods::is_ready(pod),
                succeeded: succeeded(pod),
                failed: pods::phase(pod) == "Failed",
            });
            self.status.steps.insert(step.name.clone(), state);
            match pod {
                Some(pod) if pods::phase(pod) == "Failed" => {
                    let message = format!(
                        "step {} failed (pod {}): the run does not start",
                        step.name,
                        pod.metadata.name.as_deref().unwrap_or_default()
                    );
                    self.fail(observed, job, "PreparationFailed", &message, true);
                    return false;
                }
                Some(_) => {}
                None if reached(&step.waits_for) => {
                    self.plan.apply.push(Child::Pod(Box::new(step.pod.clone())));
                }
                None => {}
            }
        }
        let ready = reached(&preparation.run_waits_for);
        let waiting: Vec<&str> = preparation
            .run_waits_for
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        if ready {
            self.condition(
                conditions::PREPARED,
                true,
                "StepsDone",
                &format!("{} done; the run starts", waiting.join(", ")),
            );
        } else {
            self.condition(
                conditions::PREPARED,
                false,
                "StepsRunning",
                &format!("waiting for {} before the run starts", waiting.join(", ")),
            );
        }
        ready
    }
}

fn succeeded(pod: &Pod) -> bool {
    pods::phase(pod) == "Succeeded"
}
