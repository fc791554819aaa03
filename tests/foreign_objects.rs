//! Objects eto did not create that hold the name of one of a job's children: they are never
//! adopted or overwritten, the job reports them, and it goes on once they are gone.

use std::time::Duration;

use eto_api::TrainingJob;
use eto_api::job_status::JobPhase;
use eto_engine::plan::NAME_TAKEN_RECHECK;
use eto_tests::env::{Env, in_phase, job_yaml, sim_config};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::await_condition;
use serde_json::json;

/// Whether the job reports, as `Stalled` with reason `NameTaken`, that `what` holds a name.
fn reports_taken(what: &'static str) -> impl Fn(&TrainingJob) -> bool {
    move |job| {
        job.status
            .as_ref()
            .and_then(|status| status.conditions.iter().find(|c| c.type_ == "Stalled"))
            .is_some_and(|stalled| {
                stalled.reason.as_deref() == Some("NameTaken")
                    && stalled.message.as_deref().is_some_and(|m| m.contains(what))
            })
    }
}

/// Creates the object `value` of kind `K` in the default namespace, as someone other than eto.
async fn create_foreign<K>(env: &Env, value: serde_json::Value) -> K
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
{
    let object: K = serde_json::from_value(value).unwrap();
    Api::<K>::default_namespaced(env.client.clone())
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// Deletes the foreign object, then waits until the job runs: it looks again on its own
/// within [`NAME_TAKEN_RECHECK`], as no watch tells it.
async fn free_and_run<K>(env: &Env, name: &str, job: &str)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Api::<K>::default_namespaced(env.client.clone())
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let running = await_condition(env.jobs(), job, |job: Option<&TrainingJob>| {
        job.is_some_and(in_phase(JobPhase::Running))
    });
    tokio::time::timeout(NAME_TAKEN_RECHECK + Duration::from_secs(20), running)
        .await
        .unwrap_or_else(|_| panic!("{job} never ran once {name} was gone"))
        .unwrap();
}

#[tokio::test]
async fn a_configmap_of_the_jobs_name_is_left_alone_and_reported_until_it_goes() {
    let env = Env::start(sim_config(2, 4)).await;
    let foreign: ConfigMap = create_foreign(
        &env,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "taken-config"}, "data": {"app.properties": "color=blue"}}),
    )
    .await;
    env.apply_job(&job_yaml("taken", 2, 2, "", "Never")).await;
    env.wait_job(
        "taken",
        "reports its ConfigMap's name as taken",
        reports_taken("ConfigMap taken-config (controlled by nobody)"),
    )
    .await;
    assert!(
        env.event_reasons("taken")
            .await
            .contains(&"NameTaken".into())
    );

    let config_maps: Api<ConfigMap> = Api::default_namespaced(env.client.clone());
    let now = config_maps.get("taken-config").await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        foreign.metadata.resource_version
    );
    assert_eq!(now.data, foreign.data);
    assert!(now.metadata.owner_references.is_none());
    assert!(
        env.pods()
            .get_opt("taken-launcher")
            .await
            .unwrap()
            .is_none(),
        "no launcher mounts someone else's ConfigMap"
    );

    free_and_run::<ConfigMap>(&env, "taken-config", "taken").await;
    assert!(
        env.config_map_hostfile("taken").await.is_some(),
        "eto's own ConfigMap"
    );
}

#[tokio::test]
async fn a_pod_with_the_jobs_labels_and_name_but_no_owner_is_not_adopted() {
    let env = Env::start(sim_config(2, 4)).await;
    // Looks like eto's first worker (for example, orphaned by a cascade=orphan delete of an
    // earlier job of the same name), but nothing controls it.
    let foreign: Pod = create_foreign(
        &env,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "orphan-worker-0", "labels": {
                "app.kubernetes.io/managed-by": "eto", "training-job-name": "orphan",
                "training-job-role": "worker", "group-name": "kai.alibabacloud.com"}},
            "spec": {"containers": [{"name": "worker", "image": "busybox"}]}}),
    )
    .await;
    env.apply_job(&job_yaml("orphan", 2, 2, "", "Never")).await;
    env.wait_job(
        "orphan",
        "reports its first worker's name as taken",
        reports_taken("Pod orphan-worker-0 (controlled by nobody)"),
    )
    .await;
    let now = env.pods().get("orphan-worker-0").await.unwrap();
    assert!(now.metadata.owner_references.is_none(), "not adopted");
    let containers = |pod: &Pod| pod.spec.as_ref().map(|spec| spec.containers.clone());
    assert_eq!(containers(&now), containers(&foreign), "not overwritten");
    assert_eq!(now.metadata.labels, foreign.metadata.labels);
    assert!(
        env.pods()
            .get_opt("orphan-launcher")
            .await
            .unwrap()
            .is_none()
    );

    free_and_run::<Pod>(&env, "orphan-worker-0", "orphan").await;
}

#[tokio::test]
async fn a_secret_of_the_generated_ssh_secrets_name_is_never_mounted() {
    let env = Env::start(sim_config(2, 4)).await;
    let foreign: Secret = create_foreign(
        &env,
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "keys-ssh"}, "stringData": {"id_rsa": "someone else's key"}}),
    )
    .await;
    env.apply_job(&job_yaml("keys", 2, 2, "", "Never")).await;
    env.wait_job(
        "keys",
        "reports its SSH Secret's name as taken",
        reports_taken("Secret keys-ssh (controlled by nobody)"),
    )
    .await;
    assert!(
        env.worker_names("keys").await.is_empty(),
        "no pod mounts someone else's key"
    );
    let secrets: Api<Secret> = Api::default_namespaced(env.client.clone());
    let now = secrets.get("keys-ssh").await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        foreign.metadata.resource_version
    );

    free_and_run::<Secret>(&env, "keys-ssh", "keys").await;
}
