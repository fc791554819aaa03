//! A TrainJob with the runtime it names, resolved into the torch job eto runs: the pod
//! template of the runtime's trainer step with the job's `trainer` and `runtimePatches` over
//! it, the number of nodes, the processes per node and the elastic bounds, as the PyTorchJob
//! shapes of [`crate::kind::pytorch_job`] take them.
//!
//! A static job runs as Trainer's does: every node a pod of one torchrun group of
//! `numNodes`, node 0 (the run's coordinator, which trains) serving the static rendezvous.
//! A job with an `elasticPolicy` runs on eto's elastic engine: every node a Worker of a
//! torchrun group whose rendezvous eto hosts off the nodes, or, with `replicaGroups`, a
//! TorchFT replica group.

use std::collections::BTreeMap;

use eto_api::common::ReplicaRestartPolicy;
use eto_api::kubeflow::SchedulingPolicy;
use eto_api::pytorch_job::{
    MASTER, PORT_NAME, PyTorchElasticPolicy, PyTorchReplicaSpec, RunPolicy, WORKER,
};
use eto_api::train_job::{
    ANCESTOR_LABEL, ContainerPatch, NODE_CONTAINER, PodSpecPatch, RuntimeSpec, TRAINER_STEP,
    TrainJobElasticPolicy,
};
use eto_api::{PyTorchJob, PyTorchJobSpec, TrainJob};
use k8s_openapi::api::core::v1::{Container, ContainerPort, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::initializers::{self, InitializerStep};
use super::labels;
use crate::field_error::FieldError;
use crate::job::{Referenced, StepReached};

/// Trainer's API group, of its runtimes.
pub const GROUP: &str = "trainer.kubeflow.org";
/// The kind of a runtime of every namespace, the default of `runtimeRef.kind`.
pub const CLUSTER_RUNTIME: &str = "ClusterTrainingRuntime";
/// The kind of a runtime of the job's namespace.
pub const NAMESPACED_RUNTIME: &str = "TrainingRuntime";

/// The port the nodes reach node 0 at, as Trainer's torch runtime sets it.
pub const TRAINER_PORT: i32 = 29500;

/// The variables Trainer gives the nodes their place in, which a job cannot set itself.
pub const RESERVED_ENV: [&str; 5] = [
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
];

/// Which runtime `reference` names: its kind and name, if eto serves runtimes of that kind.
pub fn runtime_ref(
    reference: &eto_api::train_job::RuntimeRef,
) -> Result<(&'static str, &str), FieldError> {
    let group = reference.api_group.as_deref().unwrap_or(GROUP);
    let kind = reference.kind.as_deref().unwrap_or(CLUSTER_RUNTIME);
    let kind = match (group, kind) {
        (GROUP, CLUSTER_RUNTIME) => CLUSTER_RUNTIME,
        (GROUP, NAMESPACED_RUNTIME) => NAMESPACED_RUNTIME,
        _ => {
            return Err(field(
                "spec.runtimeRef",
                format!(
                    "{kind}.{group} is not a runtime eto runs: it runs a ClusterTrainingRuntime or TrainingRuntime of {GROUP}"
                ),
            ));
        }
    };
    Ok((kind, reference.name.as_str()))
}

/// A TrainJob resolved with its runtime.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    /// The PyTorchJob eto runs its trainer step as, with the job's metadata.
    pub torch: PyTorchJob,
    /// The initializer steps it runs first (see [`initializers`]).
    pub initializers: Vec<InitializerStep>,
    /// The steps the trainer step waits for.
    pub run_waits_for: Vec<(String, StepReached)>,
}

/// `job` resolved with its runtime, `runtime`: the PyTorchJob eto runs it as (with the job's
/// metadata), and the initializer steps it runs first.
///
/// # Errors
/// Every rule the job and its runtime break, each naming the TrainJob's field (or
/// `spec.runtimeRef` for what is wrong in the runtime): a runtime that is missing or does
/// not decode, an `mlPolicy` other than torch, a runtime without a trainer step or its `node`
/// container, steps the trainer does not wait for, patches naming what the runtime lacks, reserved
/// variables in `trainer.env`, and elastic bounds that contradict each other.
pub fn resolve(job: &TrainJob, runtime: &Referenced) -> Result<Resolution, Vec<FieldError>> {
    let (kind, name) = runtime_ref(&job.spec.runtime_ref).map_err(|error| vec![error])?;
    let spec: RuntimeSpec = match runtime {
        Referenced::Missing => {
            return Err(vec![field(
                "spec.runtimeRef.name",
                format!("{kind} {name} does not exist"),
            )]);
        }
        Referenced::Found(value) => {
            let spec = value.get("spec").cloned().unwrap_or_default();
            crate::parse::parse(spec).map_err(|error| {
                vec![field(
                    "spec.runtimeRef",
                    format!("{kind} {name} does not decode: spec.{error}"),
                )]
            })?
        }
    };
    let runtime_name = format!("{kind} {name}");
    let mut errors = Vec::new();
    let torch = torch_policy(&spec, &runtime_name, &mut errors);
    let steps = &spec.template.spec.replicated_jobs;
    let trainer_step = steps
        .iter()
        .position(|step| step_of(step) == Some(TRAINER_STEP))
        .or_else(|| steps.iter().position(|step| step.name == NODE_CONTAINER));
    let Some(trainer_step) = trainer_step.map(|position| &steps[position]) else {
        errors.push(field(
            "spec.runtimeRef",
            format!(
                "{runtime_name} has no trainer step: a replicated job labelled {ANCESTOR_LABEL}: {TRAINER_STEP}, or named {NODE_CONTAINER}"
            ),
        ));
        return Err(errors);
    };
    let mut template = trainer_step
        .template
        .spec
        .as_ref()
        .map(|spec| spec.template.clone())
        .unwrap_or_default();
    check_patches(job, &spec, &mut errors);
    apply_patches(job, &trainer_step.name, &mut template);
    let initializers = initializers::steps(
        job,
        steps,
        trainer_step,
        &runtime_name,
        |name, template| apply_patches(job, name, template),
        &mut errors,
    );
    let run_waits_for = initializers::waits_for(trainer_step, "spec.runtimeRef", &mut errors);
    let pod = template.spec.get_or_insert_default();
    let Some(node) = pod.containers.iter().position(|c| c.name == NODE_CONTAINER) else {
        errors.push(field(
            "spec.runtimeRef",
            format!(
                "{runtime_name}'s trainer step {} has no container named {NODE_CONTAINER}",
                trainer_step.name
            ),
        ));
        return Err(errors);
    };
    // The container torchrun runs in goes first: where the shapes look for it.
    let node = pod.containers.remove(node);
    pod.containers.insert(0, node);
    let trainer = job.spec.trainer.clone().unwrap_or_default();
    let reserved: Vec<&str> = trainer
        .env
        .iter()
        .filter(|var| RESERVED_ENV.contains(&var.name.as_str()))
        .map(|var| var.name.as_str())
        .collect();
    if !reserved.is_empty() {
        errors.push(field(
            "spec.trainer.env",
            format!(
                "must not set {}: eto sets them, as Trainer does",
                reserved.join(", ")
            ),
        ));
    }
    let node = &mut pod.containers[0];
    override_node(node, &trainer);
    let elastic = elastic_policy(job, torch, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let num_nodes = trainer
        .num_nodes
        .or(spec.ml_policy.as_ref().and_then(|policy| policy.num_nodes))
        .unwrap_or(1);
    let nproc = trainer
        .num_proc_per_node
        .clone()
        .or_else(|| torch.and_then(|torch| torch.num_proc_per_node.clone()));
    let nproc = processes_per_node(nproc, node);
    let restart_policy = match pod.restart_policy.as_deref() {
        Some("Never") => ReplicaRestartPolicy::Never,
        _ => ReplicaRestartPolicy::OnFailure,
    };
    let labels = template
        .metadata
        .get_or_insert_default()
        .labels
        .get_or_insert_default();
    labels.extend(labels::step_labels(
        job.metadata.name.as_deref().unwrap_or_default(),
        labels::NODE_STEP,
    ));
    let replica = |replicas: i32| PyTorchReplicaSpec {
        replicas: Some(replicas),
        template: Some(template.clone()),
        restart_policy: Some(restart_policy),
    };
    let mut replicas = BTreeMap::new();
    if elastic.is_some() {
        replicas.insert(WORKER.to_string(), replica(num_nodes));
    } else {
        replicas.insert(MASTER.to_string(), replica(1));
        if num_nodes > 1 {
            replicas.insert(WORKER.to_string(), replica(num_nodes - 1));
        }
    }
    let backoff_limit = trainer_step
        .template
        .spec
        .as_ref()
        .and_then(|spec| spec.backoff_limit);
    let scheduling_policy = spec
        .pod_group_policy
        .as_ref()
        .and_then(|policy| policy.coscheduling.as_ref())
        .map(|coscheduling| SchedulingPolicy {
            min_available: Some(num_nodes),
            schedule_timeout_seconds: coscheduling.schedule_timeout_seconds,
            ..SchedulingPolicy::default()
        });
    let torch = PyTorchJob {
        metadata: job.metadata.clone(),
        spec: PyTorchJobSpec {
            run_policy: Some(RunPolicy {
                suspend: job.spec.suspend,
                active_deadline_seconds: job.spec.active_deadline_seconds,
                backoff_limit,
                scheduling_policy,
                ..RunPolicy::default()
            }),
            elastic_policy: elastic,
            pytorch_replica_specs: replicas,
            nproc_per_node: Some(nproc),
        },
        status: None,
    };
    Ok(Resolution {
        torch,
        initializers,
        run_waits_for,
    })
}

/// The ancestor step a replicated job's template is labelled with.
fn step_of(step: &eto_api::train_job::ReplicatedJob) -> Option<&str> {
    step.template
        .metadata
        .as_ref()?
        .labels
        .as_ref()?
        .get(ANCESTOR_LABEL)
        .map(String::as_str)
}

/// The runtime's torch policy; an error naming the policy it has instead.
fn torch_policy<'a>(
    spec: &'a RuntimeSpec,
    runtime: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a eto_api::train_job::TorchPolicy> {
    let policy = spec.ml_policy.as_ref();
    let other = policy.and_then(|policy| {
        [
            ("mpi", policy.mpi.is_some()),
            ("jax", policy.jax.is_some()),
            ("xgboost", policy.xgboost.is_some()),
            ("flux", policy.flux.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set)
        .map(|(name, _)| name)
    });
    let torch = policy.and_then(|policy| policy.torch.as_ref());
    if torch.is_none() {
        let has = other.map_or_else(
            || "no mlPolicy.torch".to_string(),
            |other| format!("mlPolicy.{other}"),
        );
        let mpi = if other == Some("mpi") {
            " (an MPIJob runs MPI under eto)"
        } else {
            ""
        };
        errors.push(field(
            "spec.runtimeRef",
            format!("{runtime} has {has}; eto runs TrainJobs of mlPolicy.torch only{mpi}"),
        ));
    }
    torch
}

/// The job's `trainer` over the `node` container: image, command, arguments, environment
/// (by name) and resources.
fn override_node(node: &mut Container, trainer: &eto_api::train_job::Trainer) {
    if let Some(image) = &trainer.image {
        node.image = Some(image.clone());
    }
    if let Some(command) = &trainer.command {
        node.command = Some(command.clone());
    }
    if let Some(args) = &trainer.args {
        node.args = Some(args.clone());
    }
    upsert_into(&mut node.env, &trainer.env, |var| &var.name);
    if let Some(resources) = &trainer.resources_per_node {
        node.resources = Some(resources.clone());
    }
    let ports = node.ports.get_or_insert_default();
    if !ports
        .iter()
        .any(|port| port.name.as_deref() == Some(PORT_NAME))
    {
        ports.push(ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: TRAINER_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        });
    }
}

/// `PET_NPROC_PER_NODE` as Trainer's torch runtime sets it: the job's number, else `auto`,
/// which becomes the node's CPUs (at least 1) when it asks for no GPU.
fn processes_per_node(nproc: Option<IntOrString>, node: &Container) -> String {
    match nproc {
        Some(IntOrString::Int(count)) => count.to_string(),
        Some(IntOrString::String(text)) if text != "auto" => text,
        _ => {
            let resources = node.resources.as_ref();
            let amounts = resources
                .into_iter()
                .flat_map(|r| r.limits.iter().flatten().chain(r.requests.iter().flatten()));
            let gpus = amounts
                .clone()
                .any(|(name, quantity)| name.ends_with("/gpu") && quantity.0 != "0");
            if gpus {
                return "auto".into();
            }
            let cpu = |list: Option<
                &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >| {
                list.and_then(|list| list.get("cpu"))
                    .and_then(|quantity| crate::quantity::parse(&quantity.0))
                    .filter(|milli| *milli > 0)
            };
            let milli = cpu(resources.and_then(|r| r.requests.as_ref()))
                .or_else(|| cpu(resources.and_then(|r| r.limits.as_ref())))
                .unwrap_or(0);
            // Rounded up, as the API server's whole value of a quantity.
            ((milli + 999) / 1000).max(1).to_string()
        }
    }
}

/// The job's elastic policy over the runtime's, field by field, as the PyTorchJob shape takes
/// it; `None` for a static job.
fn elastic_policy(
    job: &TrainJob,
    torch: Option<&eto_api::train_job::TorchPolicy>,
    errors: &mut Vec<FieldError>,
) -> Option<PyTorchElasticPolicy> {
    let runtime = torch.and_then(|torch| torch.elastic_policy.as_ref());
    let own = job
        .spec
        .trainer
        .as_ref()
        .and_then(|trainer| trainer.elastic_policy.as_ref());
    let merged = match (runtime, own) {
        (None, None) => return None,
        (Some(policy), None) | (None, Some(policy)) => policy.clone(),
        (Some(runtime), Some(own)) => over(runtime, own),
    };
    if let (Some(min), Some(max)) = (merged.min_nodes, merged.max_nodes)
        && min > max
    {
        let path = if own.is_some_and(|own| own.min_nodes.is_some() || own.max_nodes.is_some()) {
            "spec.trainer.elasticPolicy.minNodes"
        } else {
            "spec.runtimeRef"
        };
        errors.push(field(
            path,
            format!("minNodes ({min}) must not be greater than maxNodes ({max})"),
        ));
    }
    Some(PyTorchElasticPolicy {
        min_replicas: merged.min_nodes,
        max_replicas: merged.max_nodes,
        spare_replicas: merged.spare_nodes,
        replica_groups: merged.replica_groups,
        max_restarts: merged.max_restarts,
        metrics: merged.metrics,
        eto: merged.eto,
        ..PyTorchElasticPolicy::default()
    })
}

/// `own`'s fields over `runtime`'s.
fn over(runtime: &TrainJobElasticPolicy, own: &TrainJobElasticPolicy) -> TrainJobElasticPolicy {
    let eto_value =
        |policy: &TrainJobElasticPolicy| serde_json::to_value(&policy.eto).unwrap_or_default();
    let mut eto = eto_value(runtime);
    if let (Some(base), serde_json::Value::Object(set)) = (eto.as_object_mut(), eto_value(own)) {
        base.extend(set);
    }
    TrainJobElasticPolicy {
        min_nodes: own.min_nodes.or(runtime.min_nodes),
        max_nodes: own.max_nodes.or(runtime.max_nodes),
        metrics: own.metrics.clone().or_else(|| runtime.metrics.clone()),
        max_restarts: own.max_restarts.or(runtime.max_restarts),
        spare_nodes: own.spare_nodes.or(runtime.spare_nodes),
        replica_groups: own
            .replica_groups
            .clone()
            .or_else(|| runtime.replica_groups.clone()),
        eto: serde_json::from_value(eto).unwrap_or_default(),
    }
}

/// Reports the patches that name a replicated job or container the runtime lacks, and the
/// environment of the `node` container set through a patch (`spec.trainer.env` sets it).
fn check_patches(job: &TrainJob, spec: &RuntimeSpec, errors: &mut Vec<FieldError>) {
    let steps = &spec.template.spec.replicated_jobs;
    for (p, patch) in job.spec.runtime_patches.iter().enumerate() {
        let Some(jobs) = patch
            .training_runtime_spec
            .as_ref()
            .and_then(|spec| spec.template.as_ref())
            .and_then(|template| template.spec.as_ref())
        else {
            continue;
        };
        for (j, patched) in jobs.replicated_jobs.iter().enumerate() {
            let path = format!(
                "spec.runtimePatches[{p}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
            );
            let Some(step) = steps.iter().find(|step| step.name == patched.name) else {
                let names: Vec<&str> = steps.iter().map(|step| step.name.as_str()).collect();
                errors.push(field(
                    format!("{path}.name"),
                    format!(
                        "the runtime has no replicated job {}; it has {}",
                        patched.name,
                        names.join(", ")
                    ),
                ));
                continue;
            };
            let Some(pod) = pod_patch(patched).and_then(|pod| pod.spec.as_ref()) else {
                continue;
            };
            let pod_spec = step
                .template
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref());
            let lists = [
                (
                    "containers",
                    &pod.containers,
                    pod_spec.map(|s| &s.containers),
                ),
                (
                    "initContainers",
                    &pod.init_containers,
                    pod_spec.and_then(|s| s.init_containers.as_ref()),
                ),
            ];
            for (list, patches, present) in lists {
                for (c, container) in patches.iter().enumerate() {
                    let exists = present
                        .is_some_and(|present| present.iter().any(|c| c.name == container.name));
                    let at = format!("{path}.template.spec.template.spec.{list}[{c}]");
                    if !exists {
                        errors.push(field(
                            format!("{at}.name"),
                            format!(
                                "replicated job {} has no container {}",
                                patched.name, container.name
                            ),
                        ));
                    } else if container.name == NODE_CONTAINER && !container.env.is_empty() {
                        errors.push(field(
                            format!("{at}.env"),
                            "the node container's environment is set in spec.trainer.env",
                        ));
                    }
                }
            }
        }
    }
}

/// The pod patch of one replicated job's patch.
fn pod_patch(
    patched: &eto_api::train_job::ReplicatedJobPatch,
) -> Option<&eto_api::train_job::PodTemplatePatch> {
    patched.template.as_ref()?.spec.as_ref()?.template.as_ref()
}

/// Applies every patch of `job` naming the replicated job `step` to its pod template, in the
/// order of the patches.
fn apply_patches(job: &TrainJob, step: &str, template: &mut PodTemplateSpec) {
    let patches = job
        .spec
        .runtime_patches
        .iter()
        .filter_map(|patch| {
            patch
                .training_runtime_spec
                .as_ref()?
                .template
                .as_ref()?
                .spec
                .as_ref()
        })
        .flat_map(|spec| spec.replicated_jobs.iter())
        .filter(|patched| patched.name == step)
        .filter_map(pod_patch);
    for patch in patches {
        if let Some(metadata) = &patch.metadata {
            let own = template.metadata.get_or_insert_default();
            if let Some(labels) = &metadata.labels {
                own.labels.get_or_insert_default().extend(labels.clone());
            }
            if let Some(annotations) = &metadata.annotations {
                own.annotations
                    .get_or_insert_default()
                    .extend(annotations.clone());
            }
        }
        if let Some(spec) = &patch.spec {
            patch_pod(template.spec.get_or_insert_default(), spec);
        }
    }
}

/// `patch` over `pod` (see [`PodSpecPatch`]).
fn patch_pod(pod: &mut k8s_openapi::api::core::v1::PodSpec, patch: &PodSpecPatch) {
    if let Some(account) = &patch.service_account_name {
        pod.service_account_name = Some(account.clone());
    }
    upsert_into(&mut pod.volumes, &patch.volumes, |v| &v.name);
    patch_containers(&mut pod.containers, &patch.containers);
    if let Some(init) = pod.init_containers.as_mut() {
        patch_containers(init, &patch.init_containers);
    }
    upsert_into(
        &mut pod.image_pull_secrets,
        &patch.image_pull_secrets,
        |s| &s.name,
    );
    if let Some(context) = &patch.security_context {
        pod.security_context = Some(context.clone());
    }
    if let Some(selector) = &patch.node_selector {
        pod.node_selector
            .get_or_insert_default()
            .extend(selector.clone());
    }
    if let Some(affinity) = &patch.affinity {
        pod.affinity = Some(affinity.clone());
    }
    if !patch.tolerations.is_empty() {
        pod.tolerations
            .get_or_insert_default()
            .extend(patch.tolerations.iter().cloned());
    }
    upsert_into(&mut pod.scheduling_gates, &patch.scheduling_gates, |g| {
        &g.name
    });
    if let Some(grace) = patch.termination_grace_period_seconds {
        pod.termination_grace_period_seconds = Some(grace);
    }
}

/// The container patches over the containers of the same names.
fn patch_containers(containers: &mut [Container], patches: &[ContainerPatch]) {
    for patch in patches {
        let Some(container) = containers.iter_mut().find(|c| c.name == patch.name) else {
            continue;
        };
        upsert_into(&mut container.env, &patch.env, |var| &var.name);
        upsert_into(
            &mut container.volume_mounts,
            &patch.volume_mounts,
            |mount| &mount.name,
        );
        if let Some(context) = &patch.security_context {
            container.security_context = Some(context.clone());
        }
    }
}

/// `items` over `list`: an item replaces the one of the same key, or is added; a list
/// without items is left as it is.
fn upsert_into<T: Clone>(list: &mut Option<Vec<T>>, items: &[T], key: impl Fn(&T) -> &String) {
    if items.is_empty() {
        return;
    }
    let list = list.get_or_insert_default();
    for item in items {
        match list.iter_mut().find(|present| key(present) == key(item)) {
            Some(present) => *present = item.clone(),
            None => list.push(item.clone()),
        }
    }
}

fn field(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{torch_distributed, train_job};

    fn job(patch: Value) -> TrainJob {
        let mut value = serde_json::to_value(train_job()).unwrap();
        json_patch::merge(&mut value, &patch);
        serde_json::from_value(value).unwrap()
    }

    fn runtime(patch: Value) -> Referenced {
        let mut value = torch_distributed();
        json_patch::merge(&mut value, &patch);
        Referenced::Found(value)
    }

    fn errors(job_patch: Value, runtime_patch: Value) -> Vec<String> {
        match resolve(&job(job_patch), &runtime(runtime_patch)) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn each_rule_names_its_field() {
        let cases = [
            (
                json!({"spec": {"runtimeRef": {"kind": "JobSet", "apiGroup": "jobset.x-k8s.io"}}}),
                json!({}),
                "spec.runtimeRef: JobSet.jobset.x-k8s.io is not a runtime eto runs",
            ),
            (
                json!({}),
                json!({"spec": {"mlPolicy": {"torch": null, "mpi": {"numProcPerNode": 1}}}}),
                "spec.runtimeRef: ClusterTrainingRuntime torch-distributed has mlPolicy.mpi; eto runs TrainJobs of mlPolicy.torch only (an MPIJob runs MPI under eto)",
            ),
            (
                json!({"spec": {"trainer": {"env": [{"name": "PET_NNODES", "value": "9"}]}}}),
                json!({}),
                "spec.trainer.env: must not set PET_NNODES",
            ),
            (
                json!({"spec": {"trainer": {"elasticPolicy": {"minNodes": 4, "maxNodes": 2}}}}),
                json!({}),
                "spec.trainer.elasticPolicy.minNodes: minNodes (4) must not be greater than maxNodes (2)",
            ),
            (
                json!({"spec": {"runtimePatches": [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {
                    "replicatedJobs": [{"name": "launcher"}]}}}}]}}),
                json!({}),
                "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name: the runtime has no replicated job launcher; it has node",
            ),
            (
                json!({"spec": {"runtimePatches": [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": {
                    "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                        "containers": [{"name": "sidecar"}]}}}}}]}}}}]}}),
                json!({}),
                "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].name: replicated job node has no container sidecar",
            ),
        ];
        for (job_patch, runtime_patch, expected) in cases {
            let found = errors(job_patch.clone(), runtime_patch);
            assert!(
                found.iter().any(|error| error.starts_with(expected)),
                "{job_patch}: {found:?}"
            );
        }
        assert_eq!(errors(json!({}), json!({})), Vec::<String>::new());
        let missing = resolve(&job(json!({})), &Referenced::Missing).unwrap_err();
        assert_eq!(
            missing[0].to_string(),
            "spec.runtimeRef.name: ClusterTrainingRuntime torch-distributed does not exist"
        );
    }

    /// Trainer's runtime with initializers, as its `torch-distributed-with-cache` and torchtune
    /// runtimes have them: the nodes wait for both to complete, the model's for the dataset's.
    fn with_initializers(extra: Value) -> Value {
        let step = |name: &str, depends: Value| {
            json!({"name": name, "dependsOn": depends, "template": {"metadata": {"labels": {
                "trainer.kubeflow.org/trainjob-ancestor-step": name}},
                "spec": {"template": {"spec": {"containers": [{"name": name, "image": "init"}]}}}}})
        };
        let mut steps = vec![
            step("dataset-initializer", json!([])),
            step(
                "model-initializer",
                json!([{"name": "dataset-initializer", "status": "Complete"}]),
            ),
            json!({"name": "node", "dependsOn": [
                {"name": "dataset-initializer", "status": "Complete"},
                {"name": "model-initializer", "status": "Complete"}],
                "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "torch"}]}}}}}),
        ];
        if !extra.is_null() {
            steps.push(extra);
        }
        json!({"spec": {"template": {"spec": {"replicatedJobs": steps}}}})
    }

    #[test]
    fn initializer_steps_resolve_with_the_jobs_settings_in_the_order_they_wait() {
        let job = job(json!({"spec": {"initializer": {
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "secretRef": {"name": "hf-token"}},
            "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B", "env": [{"name": "X", "value": "1"}]}
        }}}));
        let resolution = resolve(&job, &runtime(with_initializers(Value::Null))).unwrap();
        let names: Vec<&str> = resolution
            .initializers
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["dataset-initializer", "model-initializer"]);
        assert_eq!(
            resolution.run_waits_for,
            [
                ("dataset-initializer".to_string(), StepReached::Complete),
                ("model-initializer".to_string(), StepReached::Complete)
            ]
        );
        let model = &resolution.initializers[1];
        assert_eq!(
            model.waits_for,
            [("dataset-initializer".to_string(), StepReached::Complete)]
        );
        let container =
            |step: &InitializerStep| step.template.spec.clone().unwrap().containers[0].clone();
        let dataset = container(&resolution.initializers[0]);
        assert_eq!(
            dataset.env.unwrap()[0].value.as_deref(),
            Some("hf://tatsu-lab/alpaca")
        );
        assert_eq!(
            dataset.env_from.unwrap()[0]
                .secret_ref
                .as_ref()
                .unwrap()
                .name,
            "hf-token"
        );
        let model_env = container(model).env.unwrap();
        assert_eq!(
            model_env
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>(),
            ["STORAGE_URI", "X"]
        );
        let unwaited = json!({"name": "sidecar", "template": {"spec": {"template": {"spec": {
            "containers": [{"name": "s", "image": "s"}]}}}}});
        let errors = resolve(&job, &runtime(with_initializers(unwaited))).unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "spec.runtimeRef: ClusterTrainingRuntime torch-distributed has steps the trainer does not wait for (sidecar): eto runs a runtime's trainer step and the steps it depends on"
        );
    }

    #[test]
    fn the_job_and_its_patches_override_the_runtime_and_the_job_narrows_its_elastic_policy() {
        let runtime = runtime(
            json!({"spec": {"mlPolicy": {"numNodes": 4, "torch": {"elasticPolicy": {
            "minNodes": 1, "maxNodes": 8, "spareNodes": 1, "drainSeconds": 30}}}}}),
        );
        let job = job(json!({"spec": {
            "trainer": {
                "numNodes": null,
                "numProcPerNode": 2,
                "env": [{"name": "EPOCHS", "value": "3"}],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}},
                "elasticPolicy": {"maxNodes": 4, "drainSeconds": 5}
            },
            "runtimePatches": [{"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                    "metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}},
                    "spec": {"nodeSelector": {"pool": "spot"}, "tolerations": [{"key": "spot", "operator": "Exists"}]}
                }}}}]}}}}]
        }}));
        let torch = resolve(&job, &runtime).unwrap().torch;
        let elastic = torch.spec.elastic_policy.clone().unwrap();
        assert_eq!(
            (
                elastic.min_replicas,
                elastic.max_replicas,
                elastic.spare_replicas
            ),
            (Some(1), Some(4), Some(1))
        );
        assert_eq!(
            (
                elastic.eto.drain_seconds,
                torch.spec.nproc_per_node.as_deref()
            ),
            (Some(5), Some("2"))
        );
        let worker = &torch.spec.pytorch_replica_specs[WORKER];
        assert_eq!(
            worker.replicas,
            Some(4),
            "numNodes from the runtime's mlPolicy"
        );
        assert!(!torch.spec.pytorch_replica_specs.contains_key(MASTER));
        let template = worker.template.as_ref().unwrap();
        let labels = template.metadata.as_ref().unwrap().labels.as_ref().unwrap();
        assert_eq!(labels["kueue.x-k8s.io/podset"], "node");
        let pod = template.spec.as_ref().unwrap();
        assert_eq!(pod.node_selector.as_ref().unwrap()["pool"], "spot");
        assert_eq!(pod.tolerations.as_ref().unwrap().len(), 1);
        let node = &pod.containers[0];
        assert_eq!(node.env.as_ref().unwrap()[0].name, "EPOCHS");
        assert_eq!(node.ports.as_ref().unwrap()[0].container_port, TRAINER_PORT);
    }

    #[test]
    fn auto_processes_are_the_nodes_cpus_without_a_gpu() {
        let cases = [
            (json!(null), "1"),
            (json!({"requests": {"cpu": "3"}}), "3"),
            (json!({"limits": {"cpu": "1500m"}}), "2"),
            (
                json!({"limits": {"nvidia.com/gpu": "4", "cpu": "8"}}),
                "auto",
            ),
        ];
        for (resources, expected) in cases {
            let torch = resolve(
                &job(json!({"spec": {"trainer": {"resourcesPerNode": resources}}})),
                &runtime(json!({})),
            )
            .unwrap()
            .torch;
            assert_eq!(
                torch.spec.nproc_per_node.as_deref(),
                Some(expected),
                "{resources}"
            );
        }
    }
}
