//! A TrainJob's initializer steps: the replicated jobs of its runtime that the trainer step
//! waits for (`dependsOn`), such as Trainer's `dataset-initializer` and `model-initializer`.
//! eto runs each as one pod before the nodes, in the order they wait for each other (see
//! [`crate::job::Preparation`]), with the job's `initializer` over the runtime's: the storage
//! URI as `STORAGE_URI`, the environment by name, and the Secret's keys as environment.

use eto_api::TrainJob;
use eto_api::train_job::{ANCESTOR_LABEL, ReplicatedJob, StepInitializer};
use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, PodTemplateSpec, SecretEnvSource};

use crate::field_error::FieldError;
use crate::job::StepReached;

/// The variable an initializer reads its storage URI from, as Trainer sets it.
pub const STORAGE_URI_ENV: &str = "STORAGE_URI";

/// An initializer step of a resolved TrainJob: its pod template, with the job's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct InitializerStep {
    /// The replicated job's name.
    pub name: String,
    /// Its pod template.
    pub template: PodTemplateSpec,
    /// The steps it waits for.
    pub waits_for: Vec<(String, StepReached)>,
}

/// What `dependsOn` entries say a step waits for; an error names an unknown status.
pub fn waits_for(
    step: &ReplicatedJob,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<(String, StepReached)> {
    step.depends_on
        .iter()
        .enumerate()
        .filter_map(|(i, dependency)| {
            let reached = match dependency.status.as_str() {
                "Ready" => StepReached::Ready,
                "Complete" => StepReached::Complete,
                other => {
                    errors.push(FieldError {
                        field: format!("{path}.dependsOn[{i}].status"),
                        message: format!("must be Ready or Complete, not {other:?}"),
                    });
                    return None;
                }
            };
            Some((dependency.name.clone(), reached))
        })
        .collect()
}

/// The steps of `steps` that `trainer` waits for, directly or through another, each with the
/// job's initializer settings and `patch` (the job's runtime patches of that step) applied.
/// A step that names one the runtime lacks, or that the trainer does not wait for, is an
/// error naming `spec.runtimeRef`.
pub fn steps(
    job: &TrainJob,
    steps: &[ReplicatedJob],
    trainer: &ReplicatedJob,
    runtime: &str,
    patch: impl Fn(&str, &mut PodTemplateSpec),
    errors: &mut Vec<FieldError>,
) -> Vec<InitializerStep> {
    let mut wanted: Vec<&str> = Vec::new();
    let mut queue: Vec<&str> = trainer.depends_on.iter().map(|d| d.name.as_str()).collect();
    while let Some(name) = queue.pop() {
        if wanted.contains(&name) {
            continue;
        }
        let Some(step) = steps.iter().find(|step| step.name == name) else {
            errors.push(FieldError {
                field: "spec.runtimeRef".into(),
                message: format!("{runtime}: a step waits for {name}, which it does not have"),
            });
            continue;
        };
        wanted.push(name);
        queue.extend(step.depends_on.iter().map(|d| d.name.as_str()));
    }
    let unwaited: Vec<&str> = steps
        .iter()
        .map(|step| step.name.as_str())
        .filter(|name| *name != trainer.name && !wanted.contains(name))
        .collect();
    if !unwaited.is_empty() {
        errors.push(FieldError {
            field: "spec.runtimeRef".into(),
            message: format!(
                "{runtime} has steps the trainer does not wait for ({}): eto runs a runtime's trainer step and the steps it depends on",
                unwaited.join(", ")
            ),
        });
    }
    steps
        .iter()
        .enumerate()
        .filter(|(_, step)| wanted.contains(&step.name.as_str()))
        .map(|(position, step)| {
            let path = format!("spec.runtimeRef (its replicatedJobs[{position}])");
            let mut template = step
                .template
                .spec
                .as_ref()
                .map(|spec| spec.template.clone())
                .unwrap_or_default();
            let ancestor = step
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref())
                .and_then(|labels| labels.get(ANCESTOR_LABEL))
                .map(String::as_str);
            let settings = job
                .spec
                .initializer
                .as_ref()
                .and_then(|init| match ancestor {
                    Some("dataset-initializer") => init.dataset.as_ref(),
                    Some("model-initializer") => init.model.as_ref(),
                    _ => None,
                });
            if let Some(settings) = settings {
                apply(&mut template, ancestor.unwrap_or_default(), settings);
            }
            patch(&step.name, &mut template);
            let pod = template.spec.get_or_insert_default();
            if !matches!(pod.restart_policy.as_deref(), Some("Never" | "OnFailure")) {
                pod.restart_policy = Some("OnFailure".into());
            }
            InitializerStep {
                name: step.name.clone(),
                template,
                waits_for: waits_for(step, &path, errors),
            }
        })
        .collect()
}

/// The job's `settings` for the initializer whose container is named `container` (else the
/// first): its storage URI, environment and Secret.
fn apply(template: &mut PodTemplateSpec, container: &str, settings: &StepInitializer) {
    let Some(pod) = template.spec.as_mut() else {
        return;
    };
    let position = pod
        .containers
        .iter()
        .position(|c| c.name == container)
        .unwrap_or(0);
    let Some(target) = pod.containers.get_mut(position) else {
        return;
    };
    let env = target.env.get_or_insert_default();
    let mut set = |var: EnvVar| match env.iter_mut().find(|present| present.name == var.name) {
        Some(present) => *present = var,
        None => env.push(var),
    };
    if let Some(uri) = &settings.storage_uri {
        set(EnvVar {
            name: STORAGE_URI_ENV.into(),
            value: Some(uri.clone()),
            value_from: None,
        });
    }
    for var in &settings.env {
        set(var.clone());
    }
    if let Some(secret) = &settings.secret_ref {
        target.env_from.get_or_insert_default().push(EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: secret.name.clone(),
                optional: None,
            }),
            ..EnvFromSource::default()
        });
    }
}
