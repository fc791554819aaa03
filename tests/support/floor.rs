//! The floor the benchmarks measure eto against: the objects eto writes for a job, written by
//! a plain `kube::Client` in the same order and batches, with nothing decided in between.

use eto_api::TrainingJob;
use eto_controller::apply::{Step, batches, steps};
use eto_engine::job::JobRef;
use eto_engine::plan::{Child, Observed, Plan, plan};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The field manager of the floor's writes.
const MANAGER: &str = "floor";

/// Applies `object` in the client's default namespace, under the floor's field manager.
///
/// # Panics
/// The write fails: the floor is only meaningful when every write succeeds.
pub async fn apply<K>(client: &Client, object: &K)
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let api: Api<K> = Api::default_namespaced(client.clone());
    let name = object.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .expect("the floor's write succeeds");
}

async fn apply_child(client: &Client, child: &Child) {
    match child {
        Child::Pod(pod) => apply(client, pod.as_ref()).await,
        Child::Service(service) => apply(client, service.as_ref()).await,
        Child::ConfigMap(config_map) => apply(client, config_map.as_ref()).await,
        Child::ServiceAccount(account) => apply(client, account.as_ref()).await,
        Child::Role(role) => apply(client, role.as_ref()).await,
        Child::RoleBinding(binding) => apply(client, binding.as_ref()).await,
        Child::LauncherJob(launcher) => apply(client, launcher.as_ref()).await,
        Child::PodMetadata(_) => unreachable!("a new job has no pod to change"),
        Child::PodGroup(_) => unreachable!("the floor is measured without gang scheduling"),
        Child::Autoscaler(_) => unreachable!("a TrainingJob has no autoscaler"),
    }
}

/// What eto's first reconcile of `job` writes, without owners: nothing is collected while the
/// floor is measured.
pub fn first_plan(job: &TrainingJob) -> Plan {
    let mut planned = plan(
        &Observed::without_children(JobRef::new(job)),
        jiff::Timestamp::now(),
    );
    for child in &mut planned.apply {
        let metadata = match child {
            Child::Pod(pod) => &mut pod.metadata,
            Child::Service(service) => &mut service.metadata,
            Child::ConfigMap(config_map) => &mut config_map.metadata,
            Child::ServiceAccount(account) => &mut account.metadata,
            Child::Role(role) => &mut role.metadata,
            Child::RoleBinding(binding) => &mut binding.metadata,
            Child::LauncherJob(launcher) => &mut launcher.metadata,
            Child::PodGroup(group) => &mut group.metadata,
            Child::Autoscaler(autoscaler) => &mut autoscaler.metadata,
            Child::PodMetadata(_) => continue,
        };
        metadata.owner_references = None;
    }
    if let Some(secret) = planned.create_ssh_secret.as_mut() {
        secret.metadata.owner_references = None;
    }
    planned
}

/// Writes `planned` (see [`first_plan`]) as eto does: the Secret, then the children in the
/// plan's order, pods listed together in growing batches.
pub async fn write(client: &Client, planned: &Plan) {
    if let Some(secret) = &planned.create_ssh_secret {
        Api::<Secret>::default_namespaced(client.clone())
            .create(&PostParams::default(), secret)
            .await
            .expect("the floor's Secret is created");
    }
    for step in steps(&planned.apply) {
        match step {
            Step::Pods(pods) => {
                for batch in batches(&pods) {
                    futures::future::join_all(batch.iter().map(|pod| apply(client, *pod))).await;
                }
            }
            Step::One(child) => apply_child(client, child).await,
            Step::PodMetadata(_) => unreachable!("a new job has no pod to change"),
        }
    }
}

/// A launcher pod for `job`, as the floor creates it: its template under the name eto gives
/// it, with the job's labels (without the hostfile eto shows it: nothing is decided here).
pub fn launcher(job: &TrainingJob) -> Pod {
    let name = job.metadata.name.clone().unwrap_or_default();
    let template = job.spec.et_replica_specs.launcher.template.clone();
    let mut metadata = template.metadata.unwrap_or_default();
    metadata.name = Some(eto_engine::names::launcher(&name));
    metadata
        .labels
        .get_or_insert_default()
        .insert("training-job-name".into(), name);
    Pod {
        metadata,
        spec: template.spec,
        status: None,
    }
}
