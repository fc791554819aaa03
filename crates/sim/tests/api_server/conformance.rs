//! The simulated API server behaves like kube-apiserver where a client can tell, checked
//! through `kube::Client`.

use std::time::Duration;

use eto_sim::{
    Fault, FaultAction, History, KubeletConfig, ListLatency, NodeSpec, SimCluster, SimConfig, Verb,
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy, WatchEvent,
    WatchParams,
};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::support::await_established;

const WAIT: Duration = Duration::from_secs(10);

async fn cluster_with(config: SimConfig) -> (SimCluster, Client) {
    let cluster = SimCluster::start(config).await.unwrap();
    let client = cluster.client();
    (cluster, client)
}

async fn cluster() -> (SimCluster, Client) {
    cluster_with(SimConfig::default().gpu_nodes(2, 8)).await
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}),
    )
    .unwrap()
}

fn pod(name: &str, gpus: u32) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "test"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .unwrap()
}

async fn wait_for<K, C>(api: &Api<K>, name: &str, condition: C) -> Option<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    C: kube::runtime::wait::Condition<K>,
{
    tokio::time::timeout(WAIT, await_condition(api.clone(), name, condition))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {name}"))
        .unwrap()
}

/// The `Status` of a request that must fail at the API server.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> Box<kube::core::Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn is_running(pod: Option<&Pod>) -> bool {
    pod.and_then(|p| p.status.as_ref())
        .and_then(|s| s.phase.as_deref())
        == Some("Running")
}

fn phase_is(phase: &'static str) -> impl Fn(Option<&Pod>) -> bool {
    move |pod| {
        pod.and_then(|p| p.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some(phase)
    }
}

async fn install_eto_crds(client: &Client) {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    for crd in eto_api::crds() {
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("test").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    }
    for crd in eto_api::crds() {
        await_established(client, &crd.name_any()).await;
    }
}

fn training_job(name: &str) -> Value {
    json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {"etReplicaSpecs": {
            "launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "horovod"}]}}},
            "worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "horovod"}]}}}
        }}
    })
}

/// A cluster with eto's CRDs and the TrainingJob `job` of [`training_job`] in `default`.
async fn cluster_with_a_job() -> (SimCluster, Client, Api<eto_api::TrainingJob>) {
    let (cluster, client) = cluster().await;
    install_eto_crds(&client).await;
    let jobs: Api<eto_api::TrainingJob> = Api::default_namespaced(client.clone());
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(training_job("job")).unwrap(),
    )
    .await
    .unwrap();
    (cluster, client, jobs)
}

#[tokio::test]
async fn objects_get_uid_creation_time_and_increasing_resource_versions() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let a = api
        .create(&PostParams::default(), &config_map("a", json!({"k": "1"})))
        .await
        .unwrap();
    let b = api
        .create(&PostParams::default(), &config_map("b", json!({"k": "1"})))
        .await
        .unwrap();
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    assert_ne!(a.metadata.uid, b.metadata.uid);
    let rv = |cm: &ConfigMap| cm.resource_version().unwrap().parse::<u64>().unwrap();
    assert!(rv(&b) > rv(&a));
    let list = api.list(&ListParams::default()).await.unwrap();
    assert!(
        list.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= rv(&b)
    );
}

#[tokio::test]
async fn errors_carry_the_standard_reasons() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    assert!(api.get_opt("missing").await.unwrap().is_none());
    api.create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap();
    let exists = api_error(
        api.create(&PostParams::default(), &config_map("a", json!({})))
            .await,
    );
    assert!(exists.is_already_exists(), "{exists:?}");
    let elsewhere: Api<ConfigMap> = Api::namespaced(client, "no-such-namespace");
    let missing_ns = api_error(
        elsewhere
            .create(&PostParams::default(), &config_map("a", json!({})))
            .await,
    );
    assert!(missing_ns.is_not_found(), "{missing_ns:?}");
}

#[tokio::test]
async fn a_stale_replace_gets_409_conflict() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let created = api
        .create(&PostParams::default(), &config_map("a", json!({"k": "1"})))
        .await
        .unwrap();
    let mut first = created.clone();
    first.data = Some([("k".to_string(), "2".to_string())].into());
    api.replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = created;
    stale.data = Some([("k".to_string(), "3".to_string())].into());
    let conflict = api_error(api.replace("a", &PostParams::default(), &stale).await);
    assert!(conflict.is_conflict(), "{conflict:?}");
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "2");
}

#[tokio::test]
async fn a_repeated_server_side_apply_changes_nothing_and_emits_no_event() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let params = PatchParams::apply("eto").force();
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "1"}});
    let first = api
        .patch("a", &params, &Patch::Apply(&config))
        .await
        .unwrap();
    let mut events = api
        .watch(&WatchParams::default(), &first.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    let second = api
        .patch("a", &params, &Patch::Apply(&config))
        .await
        .unwrap();
    assert_eq!(first.resource_version(), second.resource_version());
    // A real change afterwards is the first event the watch sees.
    let changed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "2"}});
    api.patch("a", &params, &Patch::Apply(&changed))
        .await
        .unwrap();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Modified(cm) => assert_eq!(cm.data.unwrap()["k"], "2"),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn server_side_apply_conflicts_with_other_managers_unless_forced() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let config = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": value}});
    api.patch(
        "a",
        &PatchParams::apply("alice"),
        &Patch::Apply(&config("1")),
    )
    .await
    .unwrap();
    let conflict = api_error(
        api.patch("a", &PatchParams::apply("bob"), &Patch::Apply(&config("2")))
            .await,
    );
    assert!(conflict.is_conflict(), "{conflict:?}");
    assert!(conflict.message.contains(".data.k"), "{}", conflict.message);
    let forced = api
        .patch(
            "a",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&config("2")),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["k"], "2");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["bob"]);
}

#[tokio::test]
async fn server_side_apply_removes_fields_the_applier_stops_setting() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let params = PatchParams::apply("eto").force();
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1", "y": "1"}}, "data": {"a": "1", "b": "1"}});
    api.patch("a", &params, &Patch::Apply(&first))
        .await
        .unwrap();
    let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"a": "1"}});
    let result = api
        .patch("a", &params, &Patch::Apply(&second))
        .await
        .unwrap();
    assert_eq!(result.labels().len(), 1);
    assert_eq!(result.data.unwrap().len(), 1);
}

#[tokio::test]
async fn patches_of_every_type() {
    let (_cluster, client) = cluster().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod("p", 0))
        .await
        .unwrap();
    // Strategic merge: containers merge by name.
    let strategic = json!({"metadata": {"labels": {"extra": "yes"}}, "spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}});
    let patched = pods
        .patch("p", &PatchParams::default(), &Patch::Strategic(&strategic))
        .await
        .unwrap();
    let spec = patched.spec.unwrap();
    assert_eq!(spec.containers.len(), 1);
    assert_eq!(spec.containers[0].image.as_deref(), Some("busybox:1.37"));
    assert!(
        spec.containers[0].resources.is_some(),
        "the merge kept the container's other fields"
    );
    // JSON patch with a failing test is rejected and changes nothing.
    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels/app", "value": "other"},
        {"op": "add", "path": "/metadata/labels/z", "value": "1"}
    ]))
    .unwrap();
    assert!(
        pods.patch("p", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await
            .is_err()
    );
    assert!(!pods.get("p").await.unwrap().labels().contains_key("z"));
    // Merge patch with a stale resourceVersion is a conflict.
    let stale = json!({"metadata": {"resourceVersion": "1", "labels": {"z": "1"}}});
    let conflict = api_error(
        pods.patch("p", &PatchParams::default(), &Patch::Merge(&stale))
            .await,
    );
    assert!(conflict.is_conflict());
    // Pod specs are immutable but for images.
    let forbidden = json!({"spec": {"restartPolicy": "Always"}});
    let invalid = api_error(
        pods.patch("p", &PatchParams::default(), &Patch::Merge(&forbidden))
            .await,
    );
    assert!(invalid.is_invalid(), "{invalid:?}");
}

#[tokio::test]
async fn a_watch_resumes_from_its_resource_version() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let a = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &config_map("b", json!({})))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let events: Vec<WatchEvent<ConfigMap>> = api
        .watch(&WatchParams::default(), &a.resource_version().unwrap())
        .await
        .unwrap()
        .take(2)
        .try_collect()
        .await
        .unwrap();
    assert!(
        matches!(&events[0], WatchEvent::Added(cm) if cm.name_any() == "b"),
        "{events:?}"
    );
    assert!(
        matches!(&events[1], WatchEvent::Deleted(cm) if cm.name_any() == "a"),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_watch_from_compacted_history_gets_410_gone() {
    let (_cluster, client) = cluster_with(SimConfig {
        history: History {
            most: 3,
            ..History::default()
        },
        ..SimConfig::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let first = api
        .create(&PostParams::default(), &config_map("first", json!({})))
        .await
        .unwrap();
    for name in ["a", "b", "c", "d", "e"] {
        api.create(&PostParams::default(), &config_map(name, json!({})))
            .await
            .unwrap();
    }
    let mut events = api
        .watch(&WatchParams::default(), &first.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(error) => {
            assert_eq!((error.code, error.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected 410, got {other:?}"),
    }
}

/// The first event of a watch of config maps from `resource_version`.
async fn first_watch_event(api: &Api<ConfigMap>, resource_version: &str) -> WatchEvent<ConfigMap> {
    api.watch(&WatchParams::default(), resource_version)
        .await
        .unwrap()
        .boxed()
        .try_next()
        .await
        .unwrap()
        .unwrap()
}

fn is_gone(event: &WatchEvent<ConfigMap>) -> bool {
    matches!(event, WatchEvent::Error(error) if (error.code, error.reason.as_str()) == (410, "Expired"))
}

#[tokio::test]
async fn a_watch_from_before_the_cluster_was_set_up_gets_410_gone() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &config_map("later", json!({})))
        .await
        .unwrap();
    let event = first_watch_event(&api, "1").await;
    assert!(is_gone(&event), "resourceVersion 1: {event:?}");
}

#[tokio::test]
async fn a_watch_from_a_change_older_than_the_window_gets_410_gone() {
    let (_cluster, client) = cluster_with(SimConfig {
        history: History {
            fresh_for: Duration::ZERO,
            ..History::default()
        },
        ..SimConfig::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let first = api
        .create(&PostParams::default(), &config_map("first", json!({})))
        .await
        .unwrap();
    let rv = first.resource_version().unwrap();
    for index in 0..History::KEPT_ANYWAY - 2 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("c{index}"), json!({})),
        )
        .await
        .unwrap();
    }
    let event = first_watch_event(&api, &rv).await;
    assert!(
        matches!(&event, WatchEvent::Added(added) if added.name_any() == "c0"),
        "within the latest 100 changes, stale ones are kept: {event:?}"
    );
    for index in 0..10 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("d{index}"), json!({})),
        )
        .await
        .unwrap();
    }
    let event = first_watch_event(&api, &rv).await;
    assert!(is_gone(&event), "beyond them: {event:?}");
}

#[tokio::test]
async fn watches_send_bookmarks_and_initial_events_when_asked() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap();
    let params = WatchParams::default().initial_events();
    let events: Vec<WatchEvent<ConfigMap>> = api
        .watch(&params, "0")
        .await
        .unwrap()
        .take(2)
        .try_collect()
        .await
        .unwrap();
    assert!(matches!(&events[0], WatchEvent::Added(cm) if cm.name_any() == "a"));
    match &events[1] {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(
                bookmark
                    .metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn a_watch_ends_after_its_timeout() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(events.is_empty());
}

#[tokio::test]
async fn label_changes_move_objects_in_and_out_of_selected_watches() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let created = api
        .create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap();
    let params = WatchParams::default().labels("team=ml");
    let mut events = api
        .watch(&params, &created.resource_version().unwrap())
        .await
        .unwrap()
        .boxed();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "ml"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "web"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(
        events.try_next().await.unwrap().unwrap(),
        WatchEvent::Added(_)
    ));
    assert!(matches!(
        events.try_next().await.unwrap().unwrap(),
        WatchEvent::Deleted(_)
    ));
}

#[tokio::test]
async fn lists_filter_by_labels_and_fields_and_paginate() {
    let (_cluster, client) = cluster().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for (name, gpus) in [("a", 0), ("b", 0), ("c", 64)] {
        pods.create(&PostParams::default(), &pod(name, gpus))
            .await
            .unwrap();
    }
    wait_for(&pods, "a", is_running).await;
    wait_for(&pods, "b", is_running).await;
    let unscheduled = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(
        unscheduled
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["c"]
    );
    let running = pods
        .list(
            &ListParams::default()
                .fields("status.phase=Running")
                .labels("app=test"),
        )
        .await
        .unwrap();
    assert_eq!(running.items.len(), 2);
    let first_page = pods.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first_page.items.len(), 2);
    let token = first_page.metadata.continue_.clone().unwrap();
    let second_page = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        second_page
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["c"]
    );
    assert!(second_page.metadata.continue_.is_none_or(|c| c.is_empty()));
}

#[tokio::test]
async fn deleting_an_owner_removes_its_children() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let owner = api
        .create(&PostParams::default(), &config_map("owner", json!({})))
        .await
        .unwrap();
    let reference = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.uid().unwrap(), "controller": true}]);
    for name in ["child-1", "child-2"] {
        let mut child = config_map(name, json!({}));
        child.metadata.owner_references = Some(serde_json::from_value(reference.clone()).unwrap());
        api.create(&PostParams::default(), &child).await.unwrap();
    }
    let mut orphan = config_map("orphan", json!({}));
    orphan.metadata.owner_references = Some(serde_json::from_value(reference).unwrap());
    api.create(&PostParams::default(), &orphan).await.unwrap();
    // Orphan one child first by removing its reference, then delete the owner in the background.
    api.patch(
        "orphan",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
    )
    .await
    .unwrap();
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    let gone = |c: Option<&ConfigMap>| c.is_none();
    wait_for(&api, "child-1", gone).await;
    wait_for(&api, "child-2", gone).await;
    assert!(api.get_opt("orphan").await.unwrap().is_some());
}

#[tokio::test]
async fn orphan_and_foreground_propagation() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let make = |owner: &ConfigMap, name: &str| {
        let mut child = config_map(name, json!({}));
        child.metadata.owner_references = Some(serde_json::from_value(json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.name_any(), "uid": owner.uid().unwrap()}])).unwrap());
        child
    };
    let kept = api
        .create(&PostParams::default(), &config_map("kept-owner", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &make(&kept, "kept-child"))
        .await
        .unwrap();
    api.delete("kept-owner", &DeleteParams::orphan())
        .await
        .unwrap();
    let child = api.get("kept-child").await.unwrap();
    assert!(child.metadata.owner_references.is_none_or(|r| r.is_empty()));

    let owner = api
        .create(&PostParams::default(), &config_map("fg-owner", json!({})))
        .await
        .unwrap();
    api.create(&PostParams::default(), &make(&owner, "fg-child"))
        .await
        .unwrap();
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    api.delete("fg-owner", &params).await.unwrap();
    wait_for(
        &api,
        "fg-owner",
        conditions::is_deleted(&owner.uid().unwrap()),
    )
    .await;
    assert!(
        api.get_opt("fg-child").await.unwrap().is_none(),
        "dependents go before the owner"
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let mut held = config_map("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    let created = api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("held").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_for(
        &api,
        "held",
        conditions::is_deleted(&created.uid().unwrap()),
    )
    .await;
}

#[tokio::test]
async fn a_pod_needing_more_gpus_than_any_node_has_stays_pending() {
    let (_cluster, client) = cluster_with(SimConfig::default().gpu_nodes(3, 1)).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod("two-gpus", 2))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("one-gpu", 1))
        .await
        .unwrap();
    wait_for(&pods, "one-gpu", is_running).await;
    let pending = wait_for(&pods, "two-gpus", |p: Option<&Pod>| {
        p.and_then(|p| {
            p.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "PodScheduled")
                .cloned()
        })
        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    })
    .await
    .unwrap();
    let status = pending.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let message = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap()
        .message
        .unwrap();
    assert_eq!(
        message,
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    );
}

#[tokio::test]
async fn a_new_node_lets_a_pending_pod_schedule() {
    let (cluster, client) = cluster_with(SimConfig::default().gpu_nodes(1, 1)).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod("big", 4))
        .await
        .unwrap();
    wait_for(&pods, "big", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.conditions.clone())
            .is_some_and(|c| !c.is_empty())
    })
    .await;
    cluster.add_node(&NodeSpec::gpu("autoscaled", 8)).unwrap();
    let running = wait_for(&pods, "big", is_running).await.unwrap();
    assert_eq!(
        running.spec.unwrap().node_name.as_deref(),
        Some("autoscaled")
    );
}

#[tokio::test]
async fn scheduling_honours_selectors_and_taints() {
    let config = SimConfig {
        nodes: vec![
            NodeSpec::gpu("plain", 8),
            NodeSpec::gpu("spot", 8)
                .label("lifecycle", "spot")
                .taint("spot", "true", "NoSchedule"),
        ],
        ..SimConfig::default()
    };
    let (_cluster, client) = cluster_with(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let mut wants_spot = pod("wants-spot", 1);
    let spec = wants_spot.spec.as_mut().unwrap();
    spec.node_selector = Some([("lifecycle".to_string(), "spot".to_string())].into());
    pods.create(&PostParams::default(), &wants_spot)
        .await
        .unwrap();
    let mut tolerant = wants_spot.clone();
    tolerant.metadata.name = Some("tolerant".into());
    tolerant.spec.as_mut().unwrap().tolerations = Some(
        serde_json::from_value(
            json!([{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
        )
        .unwrap(),
    );
    pods.create(&PostParams::default(), &tolerant)
        .await
        .unwrap();
    let running = wait_for(&pods, "tolerant", is_running).await.unwrap();
    assert_eq!(running.spec.unwrap().node_name.as_deref(), Some("spot"));
    let blocked = pods.get("wants-spot").await.unwrap();
    assert!(
        blocked.spec.unwrap().node_name.is_none(),
        "the taint keeps an intolerant pod off the only matching node"
    );
}

#[tokio::test]
async fn a_preferred_node_affinity_wins_over_bin_packing_but_never_blocks_scheduling() {
    let (_cluster, client) = cluster_with(SimConfig::default().gpu_nodes(2, 2)).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    // Bin packing puts the first pod on gpu-node-0, and would put the next one there too.
    pods.create(&PostParams::default(), &pod("first", 1))
        .await
        .unwrap();
    let first = wait_for(&pods, "first", is_running).await.unwrap();
    assert_eq!(first.spec.unwrap().node_name.as_deref(), Some("gpu-node-0"));
    let avoiding = |name: &str, gpus: u32| {
        let mut pod = pod(name, gpus);
        pod.spec.as_mut().unwrap().affinity = Some(
            serde_json::from_value(json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-node-0"]}]}}]}}))
            .unwrap(),
        );
        pod
    };
    pods.create(&PostParams::default(), &avoiding("elsewhere", 1))
        .await
        .unwrap();
    let elsewhere = wait_for(&pods, "elsewhere", is_running).await.unwrap();
    assert_eq!(
        elsewhere.spec.unwrap().node_name.as_deref(),
        Some("gpu-node-1")
    );
    // The preference is only a preference: once gpu-node-1 is full, the pod goes to
    // gpu-node-0 rather than waiting.
    pods.create(&PostParams::default(), &avoiding("fills-node-1", 1))
        .await
        .unwrap();
    wait_for(&pods, "fills-node-1", is_running).await;
    pods.create(&PostParams::default(), &avoiding("last-resort", 1))
        .await
        .unwrap();
    let last = wait_for(&pods, "last-resort", is_running).await.unwrap();
    assert_eq!(last.spec.unwrap().node_name.as_deref(), Some("gpu-node-0"));
}

#[tokio::test]
async fn the_kubelet_runs_fails_and_restarts_pods() {
    let (cluster, client) = cluster().await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod("never", 1))
        .await
        .unwrap();
    let mut always = pod("always", 1);
    always.spec.as_mut().unwrap().restart_policy = Some("Always".into());
    pods.create(&PostParams::default(), &always).await.unwrap();
    let running = wait_for(&pods, "never", is_running).await.unwrap();
    let status = running.status.unwrap();
    assert!(status.pod_ip.is_some());
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    wait_for(&pods, "always", is_running).await;

    cluster.fail_pod("default", "never", 2, "Error").unwrap();
    let failed = wait_for(&pods, "never", phase_is("Failed")).await.unwrap();
    let terminated = failed.status.unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(terminated.exit_code, 2);

    cluster.fail_pod("default", "always", 1, "Error").unwrap();
    let restarted = pods.get("always").await.unwrap().status.unwrap();
    assert_eq!(restarted.phase.as_deref(), Some("Running"));
    assert_eq!(restarted.container_statuses.unwrap()[0].restart_count, 1);

    // A container that fails at every start waits in CrashLoopBackOff, as a real kubelet
    // shows it: the pod stays Running, not Ready, with the last exit kept.
    cluster.crash_loop_pod("default", "always", 3).unwrap();
    let looping = pods.get("always").await.unwrap().status.unwrap();
    assert_eq!(looping.phase.as_deref(), Some("Running"));
    let container = looping.container_statuses.clone().unwrap()[0].clone();
    assert_eq!(
        container.state.unwrap().waiting.unwrap().reason.as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(
        container.last_state.unwrap().terminated.unwrap().exit_code,
        3
    );
    assert_eq!((container.ready, container.restart_count), (false, 2));
    assert!(
        looping
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "False")
    );

    cluster
        .evict_pod("default", "always", "The node was low on resource: memory.")
        .unwrap();
    let evicted = pods.get("always").await.unwrap().status.unwrap();
    assert_eq!(
        (evicted.phase.as_deref(), evicted.reason.as_deref()),
        (Some("Failed"), Some("Evicted"))
    );
}

#[tokio::test]
async fn graceful_pod_deletion_goes_through_terminating() {
    let config = SimConfig {
        kubelet: KubeletConfig {
            termination_delay: Duration::from_millis(300),
            ..KubeletConfig::default()
        },
        ..SimConfig::default()
    }
    .gpu_nodes(1, 8);
    let (_cluster, client) = cluster_with(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let created = pods
        .create(&PostParams::default(), &pod("p", 1))
        .await
        .unwrap();
    wait_for(&pods, "p", is_running).await;
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    let terminating = pods.get("p").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    wait_for(&pods, "p", conditions::is_deleted(&created.uid().unwrap())).await;

    // A pod that never reached a node goes at once.
    pods.create(&PostParams::default(), &pod("unscheduled", 99))
        .await
        .unwrap();
    pods.delete("unscheduled", &DeleteParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt("unscheduled").await.unwrap().is_none());
}

#[tokio::test]
async fn a_spot_reclaim_taints_marks_fails_and_removes() {
    let (cluster, client) = cluster_with(SimConfig::default().gpu_nodes(1, 8)).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let nodes: Api<Node> = Api::all(client);
    let created = pods
        .create(&PostParams::default(), &pod("worker", 8))
        .await
        .unwrap();
    wait_for(&pods, "worker", is_running).await;
    cluster
        .reclaim_node("gpu-node-0", Duration::from_millis(300))
        .unwrap();
    let node = nodes.get("gpu-node-0").await.unwrap();
    assert!(
        node.spec
            .unwrap()
            .taints
            .unwrap()
            .iter()
            .any(|t| t.key == "sim.eto.dev/reclaimed")
    );
    let marked = pods.get("worker").await.unwrap();
    assert!(
        marked
            .status
            .unwrap()
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    );
    let failed = wait_for(&pods, "worker", |p: Option<&Pod>| {
        p.is_none_or(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
    })
    .await;
    if let Some(failed) = failed {
        let status = failed.status.unwrap();
        let exit = status.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap()
            .exit_code;
        assert_eq!(exit, 137);
    }
    wait_for(
        &pods,
        "worker",
        conditions::is_deleted(&created.uid().unwrap()),
    )
    .await;
    assert!(nodes.get_opt("gpu-node-0").await.unwrap().is_none());
}

/// A node that stops reporting stays in the API, tainted unreachable; its pods stay, not
/// ready, until their toleration of the taint runs out; the taint manager then deletes them,
/// and with no kubelet to end them they stay `Terminating`. A pod that tolerates the taint
/// for good stays running.
#[tokio::test]
async fn a_stopped_node_keeps_its_pods_until_the_taint_manager_deletes_them() {
    let (cluster, client) = cluster_with(SimConfig::default().gpu_nodes(1, 8)).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let nodes: Api<Node> = Api::all(client);
    let tolerating = |name: &str, seconds: Option<i64>| {
        let mut pod = pod(name, 1);
        pod.spec.as_mut().unwrap().tolerations = Some(vec![
            serde_json::from_value(json!({"key": "node.kubernetes.io/unreachable",
                "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}))
            .unwrap(),
        ]);
        pod
    };
    for pod in [tolerating("brief", Some(1)), tolerating("for-good", None)] {
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    wait_for(&pods, "brief", is_running).await;
    wait_for(&pods, "for-good", is_running).await;
    cluster.stop_node("gpu-node-0").unwrap();
    let node = nodes.get("gpu-node-0").await.unwrap();
    let taints = node.spec.unwrap().taints.unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute"),
        "{taints:?}"
    );
    let condition = |pod: &Pod, type_: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    let brief = pods.get("brief").await.unwrap();
    assert_eq!(
        condition(&brief, "Ready").map(|c| c.0).as_deref(),
        Some("False")
    );
    assert!(
        brief.metadata.deletion_timestamp.is_none(),
        "not before its toleration ran out"
    );
    let deleted = wait_for(&pods, "brief", |pod: Option<&Pod>| {
        pod.is_none_or(|pod| pod.metadata.deletion_timestamp.is_some())
    })
    .await
    .expect("the pod stays, being deleted");
    assert_eq!(
        condition(&deleted, "DisruptionTarget"),
        Some(("True".into(), Some("DeletionByTaintManager".into())))
    );
    assert_eq!(
        deleted.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running"),
        "no kubelet ends it"
    );
    // A write meanwhile (a controller's label) leaves it as it is: deleted with a grace
    // period, it waits for a kubelet.
    pods.patch(
        "brief",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"seen": "yes"}}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        pods.get_opt("brief").await.unwrap().is_some(),
        "it stays Terminating"
    );
    let for_good = pods.get("for-good").await.unwrap();
    assert!(for_good.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn custom_resources_are_validated_defaulted_and_pruned() {
    let (_cluster, client) = cluster().await;
    install_eto_crds(&client).await;
    let jobs: Api<eto_api::TrainingJob> = Api::default_namespaced(client.clone());
    let mut job = training_job("job");
    job["spec"]["typo"] = json!(true);
    let created: eto_api::TrainingJob = serde_json::from_value(
        serde_json::to_value(
            jobs.create(
                &PostParams::default(),
                &serde_json::from_value(job).unwrap(),
            )
            .await
            .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        created.spec.backoff_limit,
        Some(6),
        "the schema default applies"
    );
    assert_eq!(
        created.spec.restart_policy,
        Some(eto_api::training_job::JobRestartPolicy::Never)
    );

    let raw: Api<kube::api::DynamicObject> = Api::default_namespaced_with(
        client.clone(),
        &kube::api::ApiResource::erase::<eto_api::TrainingJob>(&()),
    );
    let stored = raw.get("job").await.unwrap();
    assert!(
        stored.data["spec"].get("typo").is_none(),
        "unknown fields are pruned"
    );

    let mut bad = training_job("bad");
    bad["spec"]["etReplicaSpecs"]["worker"]["minReplicas"] = json!(3);
    let invalid = api_error(
        jobs.create(
            &PostParams::default(),
            &serde_json::from_value(bad).unwrap(),
        )
        .await,
    );
    assert!(invalid.is_invalid());
    assert!(
        invalid
            .message
            .contains("spec.etReplicaSpecs.worker.minReplicas"),
        "{}",
        invalid.message
    );

    let strict = PatchParams::apply("test").validation_strict();
    let mut typo = training_job("typo");
    typo["spec"]["typo"] = json!(1);
    let rejected = api_error(raw.patch("typo", &strict, &Patch::Apply(&typo)).await);
    assert!(
        rejected.message.contains("unknown field \"spec.typo\""),
        "{}",
        rejected.message
    );
}

#[tokio::test]
async fn status_and_scale_subresources_and_generation() {
    let (_cluster, _, jobs) = cluster_with_a_job().await;

    // A status write changes only status, and not the generation.
    let status = json!({"apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "TrainingJob", "status": {"phase": "Running", "restartCount": 1}, "spec": {"suspend": true}});
    let after_status = jobs
        .patch_status(
            "job",
            &PatchParams::apply("eto").force(),
            &Patch::Apply(&status),
        )
        .await
        .unwrap();
    assert_eq!(after_status.status.unwrap().restart_count, 1);
    assert_eq!(after_status.spec.suspend, None);
    assert_eq!(after_status.metadata.generation, Some(1));

    // A main-resource write never changes status, and a spec change bumps the generation.
    let main = json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}});
    let after_main = jobs
        .patch("job", &PatchParams::default(), &Patch::Merge(&main))
        .await
        .unwrap();
    assert_eq!(
        after_main.status.unwrap().phase,
        Some(eto_api::job_status::JobPhase::Running)
    );
    assert_eq!(
        after_main.metadata.generation,
        Some(1),
        "metadata changes do not bump the generation"
    );
    let scaled = jobs
        .patch_scale(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(5));
    let job = jobs.get("job").await.unwrap();
    assert_eq!(job.spec.et_replica_specs.worker.replicas, Some(5));
    assert_eq!(job.metadata.generation, Some(2));
    let scale = jobs.get_scale("job").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(5));
}

#[tokio::test]
async fn a_new_crd_is_served_only_once_it_is_established() {
    let (_cluster, client) = cluster().await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let crd = eto_api::crds().remove(0);
    let name = crd.name_any();
    let stored = crds
        .patch(
            &name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    let established = |crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        crd.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten()
            .find(|c| c.type_ == "Established").map(|c| c.status.clone())
    };
    assert_eq!(
        established(&stored).as_deref(),
        Some("False"),
        "not at once"
    );
    let jobs: Api<eto_api::TrainingJob> = Api::default_namespaced(client.clone());
    assert!(
        api_error(jobs.list(&ListParams::default()).await).is_not_found(),
        "not served before it is established"
    );
    await_established(&client, &name).await;
    jobs.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn crd_deletion_removes_its_objects_and_its_api() {
    let (_cluster, client, jobs) = cluster_with_a_job().await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client);
    crds.delete(
        "trainingjobs.kai.alibabacloud.com",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    let gone = api_error(jobs.list(&ListParams::default()).await);
    assert!(gone.is_not_found());
}

#[tokio::test]
async fn namespace_deletion_removes_its_contents() {
    let (_cluster, client) = cluster().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "scratch"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "scratch");
    api.create(&PostParams::default(), &config_map("a", json!({})))
        .await
        .unwrap();
    let created = namespaces.get("scratch").await.unwrap();
    namespaces
        .delete("scratch", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &namespaces,
        "scratch",
        conditions::is_deleted(&created.uid().unwrap()),
    )
    .await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn events_written_through_events_k8s_io_are_read_through_core() {
    let (_cluster, client) = cluster().await;
    let new_api: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(client.clone());
    let event: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "e1"}, "eventTime": "2026-11-22T00:00:00.000000Z",
        "reportingController": "eto", "reportingInstance": "eto-0", "action": "Reconcile",
        "reason": "WorkerFailed", "note": "worker 3 failed", "type": "Warning",
        "regarding": {"kind": "TrainingJob", "name": "job", "namespace": "default"}
    }))
    .unwrap();
    new_api
        .create(&PostParams::default(), &event)
        .await
        .unwrap();
    new_api
        .patch(
            "e1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"series": {"count": 2, "lastObservedTime": "2026-11-22T00:01:00.000000Z"}}),
            ),
        )
        .await
        .unwrap();
    let core_api: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(client);
    let core = core_api.get("e1").await.unwrap();
    assert_eq!(core.message.as_deref(), Some("worker 3 failed"));
    assert_eq!(core.involved_object.name.as_deref(), Some("job"));
    assert_eq!(core.series.unwrap().count, Some(2));
    let found = core_api
        .list(&ListParams::default().fields("involvedObject.name=job"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
}

#[tokio::test]
async fn an_event_with_a_note_over_1024_bytes_or_no_reporter_is_invalid() {
    let (_cluster, client) = cluster().await;
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::default_namespaced(client);
    let event = |name: &str, changes: Value| {
        let mut event = json!({
            "metadata": {"name": name}, "eventTime": "2026-11-22T00:00:00.000000Z",
            "reportingController": "eto", "reportingInstance": "eto-0", "action": "Create",
            "reason": "WorkersCreated", "type": "Normal",
            "regarding": {"kind": "TrainingJob", "name": "job", "namespace": "default"}
        });
        json_patch::merge(&mut event, &changes);
        serde_json::from_value::<k8s_openapi::api::events::v1::Event>(event).unwrap()
    };
    let at_limit = event("fits", json!({"note": "x".repeat(1024)}));
    api.create(&PostParams::default(), &at_limit).await.unwrap();
    let prefixed = event("prefixed", json!({"reportingController": "eto.dev/eto"}));
    api.create(&PostParams::default(), &prefixed).await.unwrap();

    let refused = [
        ("long", json!({"note": "x".repeat(1025)}), "message"),
        (
            "unreported",
            json!({"reportingController": null}),
            "reportingComponent",
        ),
        (
            "bad-reporter",
            json!({"reportingController": "eto operator"}),
            "reportingComponent",
        ),
        (
            "bad-prefix",
            json!({"reportingController": "Eto_Dev/eto"}),
            "reportingComponent",
        ),
        (
            "no-instance",
            json!({"reportingInstance": null}),
            "reportingInstance",
        ),
        ("long-reason", json!({"reason": "R".repeat(129)}), "reason"),
        ("no-action", json!({"action": null}), "action"),
    ];
    for (name, changes, field) in refused {
        let status = api_error(
            api.create(&PostParams::default(), &event(name, changes))
                .await,
        );
        assert_eq!(
            (status.code, status.reason.as_str()),
            (422, "Invalid"),
            "{name}"
        );
        assert!(status.message.contains(field), "{name}: {}", status.message);
    }
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2, "only the events that fit are stored");
}

#[tokio::test]
async fn injected_errors_and_latency_affect_the_next_requests_only() {
    let (cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    cluster.inject(Fault {
        action: FaultAction::Fail(500),
        remaining: 1,
        method: Some("GET".into()),
        path_contains: Some("/configmaps".into()),
        verb: None,
        writes_only: false,
        skip: 0,
    });
    let error = api_error(api.list(&ListParams::default()).await);
    assert_eq!((error.code, error.reason.as_str()), (500, "InternalError"));
    assert!(api.list(&ListParams::default()).await.is_ok());

    cluster.inject(Fault {
        action: FaultAction::Delay(Duration::from_millis(300)),
        remaining: 1,
        method: None,
        path_contains: None,
        verb: None,
        writes_only: false,
        skip: 0,
    });
    let started = std::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn a_fault_for_the_list_verb_spares_gets_and_watches_of_the_same_resource() {
    let (cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    api.create(&PostParams::default(), &config_map("settings", json!({})))
        .await
        .unwrap();
    cluster.inject(Fault {
        action: FaultAction::Fail(500),
        remaining: 1,
        method: None,
        path_contains: Some("/configmaps".into()),
        verb: Some(Verb::List),
        writes_only: false,
        skip: 0,
    });
    api.get("settings").await.unwrap();
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert!(
        matches!(watch.try_next().await.unwrap(), Some(WatchEvent::Added(_))),
        "the watch is served"
    );
    let error = api_error(api.list(&ListParams::default()).await);
    assert_eq!(error.code, 500, "the list is not");
    assert!(api.list(&ListParams::default()).await.is_ok());
}

#[tokio::test]
async fn a_list_takes_longer_the_more_it_returns_and_shows_the_state_at_its_start() {
    let per_object = Duration::from_millis(100);
    let (_cluster, client) = cluster_with(SimConfig {
        list_latency: ListLatency {
            base: Duration::ZERO,
            per_object,
        },
        ..SimConfig::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    for index in 0..5 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("cm-{index}"), json!({})),
        )
        .await
        .unwrap();
    }
    let started = std::time::Instant::now();
    let everything = ListParams::default();
    let slow_list = api.list(&everything);
    let late_write = async {
        tokio::time::sleep(per_object).await;
        api.create(&PostParams::default(), &config_map("late", json!({})))
            .await
            .unwrap();
    };
    let (listed, ()) = tokio::join!(slow_list, late_write);
    assert!(started.elapsed() >= per_object * 5);
    let names: Vec<String> = listed
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"]);
}

#[tokio::test]
async fn a_kube_runtime_watcher_recovers_from_dropped_watches_and_a_restart() {
    use kube::runtime::WatchStreamExt;
    let (cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let mut objects =
        kube::runtime::watcher(api.clone(), kube::runtime::watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
    let mut expect = async |name: &str| {
        let found = tokio::time::timeout(WAIT, async {
            while let Some(object) = objects.try_next().await.unwrap_or(None) {
                if object.name_any() == name {
                    return true;
                }
            }
            false
        });
        assert!(
            found.await.unwrap_or(false),
            "the watcher never delivered {name}"
        );
    };
    api.create(&PostParams::default(), &config_map("before", json!({})))
        .await
        .unwrap();
    expect("before").await;
    cluster.drop_watches();
    api.create(&PostParams::default(), &config_map("after-drop", json!({})))
        .await
        .unwrap();
    expect("after-drop").await;
    cluster.restart(Duration::from_millis(200)).await.unwrap();
    api.create(
        &PostParams::default(),
        &config_map("after-restart", json!({})),
    )
    .await
    .unwrap();
    expect("after-restart").await;
}

#[tokio::test]
async fn a_table_list_pages_as_kubectl_get_pages_it() {
    let (_cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &config_map(name, json!({})))
            .await
            .unwrap();
    }
    let page = |token: Option<&str>| {
        let query = token.map_or(String::new(), |token| format!("&continue={token}"));
        http::Request::get(format!(
            "/api/v1/namespaces/default/configmaps?limit=2{query}"
        ))
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap()
    };
    let first: Value =
        serde_json::from_str(&client.request_text(page(None)).await.unwrap()).unwrap();
    let names = |table: &Value| -> Vec<String> {
        table["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["cells"][0].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("a continue token");
    let second: Value =
        serde_json::from_str(&client.request_text(page(Some(token))).await.unwrap()).unwrap();
    assert_eq!(names(&second), ["c"]);
    assert_eq!(second["metadata"].get("continue"), None);
}

#[tokio::test]
async fn kubectl_get_receives_printer_columns_as_a_table() {
    let (_cluster, client, jobs) = cluster_with_a_job().await;
    let status = json!({"apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "TrainingJob", "status": {"phase": "Running", "restartCount": 0, "workers": {"ready": 2, "pending": 0, "desired": 2, "min": 1}}});
    jobs.patch_status(
        "job",
        &PatchParams::apply("eto").force(),
        &Patch::Apply(&status),
    )
    .await
    .unwrap();
    let request =
        http::Request::get("/apis/kai.alibabacloud.com/v1alpha1/namespaces/default/trainingjobs")
            .header(
                "Accept",
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            )
            .body(Vec::new())
            .unwrap();
    let table: Value = serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        [
            "Name", "Phase", "Ready", "Pending", "Desired", "Min", "Max", "Restarts", "Age"
        ]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[0], "job");
    assert_eq!(cells[1], "Running");
    assert_eq!(cells[2], 2);
    assert_eq!(cells[6], Value::Null, "an unbounded maximum shows empty");
}

/// A request to eto-sim's control endpoint `/sim/v1/{path}`, with `body` as JSON (none: an
/// empty body, as the `eto-sim` commands send where they have nothing to say).
async fn control(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> kube::Result<String> {
    let request = http::Request::builder()
        .method(method)
        .uri(format!("/sim/v1/{path}"))
        .header("Content-Type", "application/json")
        .body(
            body.map(|body| serde_json::to_vec(&body).unwrap())
                .unwrap_or_default(),
        )
        .unwrap();
    client.request_text(request).await
}

#[tokio::test]
async fn the_control_endpoint_drives_nodes_pods_and_faults() {
    let (_cluster, client) = cluster_with(SimConfig::default()).await;
    control(
        &client,
        "POST",
        "nodes",
        Some(json!({"name": "scaled-up", "gpus": 2})),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod("p", 2))
        .await
        .unwrap();
    let running = wait_for(&pods, "p", is_running).await.unwrap();
    assert_eq!(
        running.spec.unwrap().node_name.as_deref(),
        Some("scaled-up")
    );
    control(
        &client,
        "POST",
        "namespaces/default/pods/p/terminate",
        Some(json!({"exitCode": 0})),
    )
    .await
    .unwrap();
    wait_for(&pods, "p", phase_is("Succeeded")).await;
    control(
        &client,
        "POST",
        "faults",
        Some(json!({"failWith": 500, "count": 1, "method": "GET"})),
    )
    .await
    .unwrap();
    let failed = api_error(pods.list(&ListParams::default()).await);
    assert_eq!(failed.code, 500);
    assert!(
        control(&client, "POST", "nodes/missing/reclaim", None)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_announced_reclaim_puts_the_warning_it_is_given_or_karpenters_taint() {
    let (_cluster, client) = cluster_with(SimConfig {
        nodes: vec![NodeSpec::gpu("spot-a", 1), NodeSpec::gpu("spot-b", 1)],
        ..SimConfig::default()
    })
    .await;
    let reclaim = |node: &str| format!("nodes/{node}/reclaim?warningSeconds=600&graceSeconds=1");
    control(
        &client,
        "POST",
        &reclaim("spot-a"),
        Some(
            json!({"condition": "InstanceExpired", "message": "released at 2027-01-15T08:04:00Z"}),
        ),
    )
    .await
    .unwrap();
    // No body, as `eto-sim reclaim-node` sends without --taint or --condition.
    control(&client, "POST", &reclaim("spot-b"), None)
        .await
        .unwrap();
    // A body that names neither is refused, as on the warning endpoint.
    let refused = api_error(
        control(
            &client,
            "POST",
            &reclaim("spot-b"),
            Some(json!({"message": "soon"})),
        )
        .await,
    );
    assert_eq!(refused.message, "a warning names a taint or a condition");
    let nodes: Api<Node> = Api::all(client);
    let condition_of = |node: &Node| {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "InstanceExpired"))
            .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
    };
    let taints_of = |node: &Node| -> Vec<String> {
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .map(|t| t.iter().map(|t| t.key.clone()).collect())
            .unwrap_or_default()
    };
    let a = nodes.get("spot-a").await.unwrap();
    assert_eq!(
        condition_of(&a),
        Some(("True".into(), "released at 2027-01-15T08:04:00Z".into()))
    );
    assert!(!taints_of(&a).contains(&"karpenter.sh/disrupted".to_string()));
    let b = nodes.get("spot-b").await.unwrap();
    assert_eq!(condition_of(&b), None);
    assert!(
        taints_of(&b).contains(&"karpenter.sh/disrupted".to_string()),
        "{:?}",
        taints_of(&b)
    );
}

#[tokio::test]
async fn throttled_requests_carry_retry_after_and_kube_clients_retry_them() {
    let (cluster, client) = cluster().await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    cluster.inject(Fault {
        action: FaultAction::Fail(429),
        remaining: 1,
        method: Some("GET".into()),
        path_contains: None,
        verb: None,
        writes_only: false,
        skip: 0,
    });
    let started = std::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "the client waited for Retry-After: 1"
    );
}

fn batch_job(name: &str, backoff_limit: i32) -> k8s_openapi::api::batch::v1::Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff_limit,
            "podReplacementPolicy": "Failed",
            "template": {
                "metadata": {"labels": {"app": "test"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    }))
    .unwrap()
}

/// The one pod `job` currently runs, once it runs.
async fn job_pod(pods: &Api<Pod>, job: &str) -> Pod {
    let selector = format!("batch.kubernetes.io/job-name={job}");
    tokio::time::timeout(WAIT, async {
        loop {
            let listed = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .unwrap();
            if let Some(pod) = listed.items.into_iter().find(|p| is_running(Some(p))) {
                return pod;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no running pod of job {job}"))
}

fn job_condition(
    type_: &'static str,
) -> impl Fn(Option<&k8s_openapi::api::batch::v1::Job>) -> bool {
    move |job| {
        job.and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
    }
}

#[tokio::test]
async fn a_job_runs_one_pod_and_completes_when_it_succeeds() {
    let (cluster, client) = cluster().await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client);
    let job = jobs
        .create(&PostParams::default(), &batch_job("once", 0))
        .await
        .unwrap();
    let pod = job_pod(&pods, "once").await;
    assert!(pod.name_any().starts_with("once-"));
    let owner = &pod.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Job", job.uid().unwrap().as_str(), Some(true))
    );
    assert_eq!(pod.labels()["app"], "test");
    assert_eq!(pod.labels()["job-name"], "once");
    // The API server gave the Job a selector on its uid, which its pods match.
    let uid = job.uid().unwrap();
    let selector = job.spec.as_ref().unwrap().selector.clone().unwrap();
    assert_eq!(
        selector.match_labels.unwrap()["batch.kubernetes.io/controller-uid"],
        uid
    );
    assert_eq!(pod.labels()["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(job.spec.as_ref().unwrap().completions, Some(1));

    cluster.succeed_pod("default", &pod.name_any()).unwrap();
    let done = wait_for(&jobs, "once", job_condition("Complete"))
        .await
        .unwrap();
    let status = done.status.unwrap();
    assert_eq!((status.succeeded, status.active), (Some(1), Some(0)));
    assert!(status.completion_time.is_some() && status.start_time.is_some());
}

#[tokio::test]
async fn a_job_retries_failed_pods_up_to_its_backoff_limit() {
    let (cluster, client) = cluster().await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client);
    jobs.create(&PostParams::default(), &batch_job("retry", 1))
        .await
        .unwrap();
    let first = job_pod(&pods, "retry").await;
    cluster
        .fail_pod("default", &first.name_any(), 1, "Error")
        .unwrap();
    let second = job_pod(&pods, "retry").await;
    assert_ne!(second.name_any(), first.name_any());
    cluster
        .fail_pod("default", &second.name_any(), 1, "Error")
        .unwrap();
    let failed = wait_for(&jobs, "retry", job_condition("Failed"))
        .await
        .unwrap();
    let status = failed.status.unwrap();
    assert_eq!(status.failed, Some(2));
    let reason = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap()
        .reason;
    assert_eq!(reason.as_deref(), Some("BackoffLimitExceeded"));
    let listed = pods
        .list(&ListParams::default().labels("job-name=retry"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 2, "no third pod after the limit");
}

#[tokio::test]
async fn deleting_a_job_without_a_propagation_policy_orphans_its_pods() {
    let (_cluster, client) = cluster().await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client);
    jobs.create(&PostParams::default(), &batch_job("legacy", 0))
        .await
        .unwrap();
    let pod = job_pod(&pods, "legacy").await;
    jobs.delete("legacy", &DeleteParams::default())
        .await
        .unwrap();
    let orphaned = wait_for(&pods, &pod.name_any(), |p: Option<&Pod>| {
        p.is_some_and(|p| p.owner_references().is_empty())
    })
    .await;
    assert!(orphaned.is_some(), "the pod stays, without its owner");
}

#[tokio::test]
async fn a_job_whose_pods_would_restart_in_place_is_invalid_and_its_template_immutable() {
    let (_cluster, client) = cluster().await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::default_namespaced(client);
    let mut always = batch_job("always", 0);
    always
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .restart_policy = Some("Always".into());
    let status = api_error(jobs.create(&PostParams::default(), &always).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.contains("spec.template.spec.restartPolicy"),
        "{}",
        status.message
    );

    jobs.create(&PostParams::default(), &batch_job("fixed", 0))
        .await
        .unwrap();
    let changed = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.37"}]}}}});
    let status = api_error(
        jobs.patch("fixed", &PatchParams::default(), &Patch::Merge(changed))
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
}

/// A listener on a free loopback port answering every connection with `answer`.
async fn answering(answer: &'static [u8]) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0_u8; 1024];
            let _ = stream.read(&mut request).await;
            let _ = stream.write_all(answer).await;
        }
    });
    address
}

#[tokio::test]
async fn the_pod_proxy_answers_as_kube_apiserver_does() {
    let (cluster, client) = cluster().await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.create(&PostParams::default(), &pod("listener", 1))
        .await
        .unwrap();
    let running = wait_for(&pods, "listener", is_running).await.unwrap();
    let ip = running.status.unwrap().pod_ip.unwrap();
    assert!(ip.starts_with("127."), "pods have loopback IPs: {ip}");
    // A 503 from the pod proxy is the pod's answer: a client must not retry it.
    let mut config = cluster.config();
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let get = |path: &str| {
        let client = client.clone();
        let request = http::Request::get(path).body(Vec::new()).unwrap();
        async move { client.request_text(request).await }
    };
    let status_of = |result: kube::Result<String>| api_error(result);

    let missing = status_of(get("/api/v1/namespaces/default/pods/nope:9009/proxy/stop").await);
    assert_eq!(missing.code, 404);
    let refused = status_of(get("/api/v1/namespaces/default/pods/listener:9009/proxy/stop").await);
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (503, "ServiceUnavailable")
    );
    assert_eq!(
        refused.message,
        format!("error trying to reach service: dial tcp {ip}:9009: connect: connection refused")
    );

    // The kubeai SDK answers with two bytes that are not HTTP.
    cluster.forward_pod_port("default", "listener", 9009, answering(b"ok").await);
    let malformed =
        status_of(get("/api/v1/namespaces/default/pods/listener:9009/proxy/stop").await);
    assert_eq!(
        malformed.message,
        "error trying to reach service: net/http: HTTP/1.x transport connection broken: malformed HTTP response \"ok\""
    );
    cluster.forward_every_pod_port(
        8080,
        answering(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nstopped").await,
    );
    assert_eq!(
        get("/api/v1/namespaces/default/pods/listener:8080/proxy/stop")
            .await
            .unwrap(),
        "stopped"
    );

    // A pod with no IP yet (not running) cannot be reached.
    let mut pending = pod("pending", 64);
    pending.metadata.name = Some("pending".into());
    pods.create(&PostParams::default(), &pending).await.unwrap();
    let unplaced = status_of(get("/api/v1/namespaces/default/pods/pending:9009/proxy/stop").await);
    assert_eq!(
        (unplaced.code, unplaced.message.as_str()),
        (400, "address not allowed")
    );
}

#[tokio::test]
async fn a_jobs_pod_failure_policy_ignores_counts_or_fails_at_once() {
    let (cluster, client) = cluster().await;
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client);
    let mut job = batch_job("policy", 0);
    job.spec.as_mut().unwrap().pod_failure_policy = Some(
        serde_json::from_value(json!({"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
        ]}))
        .unwrap(),
    );
    jobs.create(&PostParams::default(), &job).await.unwrap();
    // The kubelet evicts the pod (it marks it DisruptionTarget): ignored, and replaced.
    let first = job_pod(&pods, "policy").await;
    cluster
        .evict_pod(
            "default",
            &first.name_any(),
            "The node was low on resource: memory.",
        )
        .unwrap();
    let second = job_pod(&pods, "policy").await;
    assert_ne!(second.name_any(), first.name_any(), "a replacement");
    let job = jobs.get("policy").await.unwrap();
    assert!(
        !job_condition("Failed")(Some(&job)),
        "backoffLimit 0 is not used"
    );
    assert_eq!(job.status.unwrap().failed, None);
    // Exit 42 matches the FailJob rule: the Job fails at once.
    cluster
        .fail_pod("default", &second.name_any(), 42, "Error")
        .unwrap();
    let failed = wait_for(&jobs, "policy", job_condition("Failed"))
        .await
        .unwrap();
    let condition = failed
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("PodFailurePolicy"));
    assert!(
        condition
            .message
            .unwrap()
            .contains("matching FailJob rule at index 1")
    );

    // A failure no rule matches counts against the backoff limit, as without a policy.
    let mut counted = batch_job("counted", 0);
    counted.spec.as_mut().unwrap().pod_failure_policy = Some(
        serde_json::from_value(json!({"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}))
        .unwrap(),
    );
    jobs.create(&PostParams::default(), &counted).await.unwrap();
    let pod = job_pod(&pods, "counted").await;
    cluster
        .fail_pod("default", &pod.name_any(), 1, "Error")
        .unwrap();
    let failed = wait_for(&jobs, "counted", job_condition("Failed"))
        .await
        .unwrap();
    assert_eq!(failed.status.unwrap().failed, Some(1));
}

fn disruption_target(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")?
        .reason
        .clone()
}

#[tokio::test]
async fn evictions_mark_the_pod_disrupted_as_kube_apiserver_and_the_kubelet_do() {
    // Pods being deleted stay a while, as their containers would take to stop.
    let config = SimConfig {
        kubelet: KubeletConfig {
            termination_delay: Duration::from_secs(5),
            ..KubeletConfig::default()
        },
        ..SimConfig::default()
    }
    .gpu_nodes(1, 8);
    let (cluster, client) = cluster_with(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    for name in ["drained", "pressed"] {
        pods.create(&PostParams::default(), &pod(name, 0))
            .await
            .unwrap();
        wait_for(&pods, name, is_running).await.unwrap();
    }
    // Through the API, as `kubectl drain` evicts: marked, then deleted with the eviction's
    // grace. (kube's `Api::evict` writes its options as `delete_options`, which kube-apiserver
    // ignores; kubectl's body is this one.)
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "drained", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 7}});
    let request = http::Request::post("/api/v1/namespaces/default/pods/drained/eviction")
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&eviction).unwrap())
        .unwrap();
    let answer: Value = pods.clone().into_client().request(request).await.unwrap();
    assert_eq!(answer["status"], "Success");
    let drained = pods.get("drained").await.unwrap();
    assert_eq!(
        disruption_target(&drained).as_deref(),
        Some("EvictionByEvictionAPI")
    );
    assert!(drained.metadata.deletion_timestamp.is_some());
    assert_eq!(drained.metadata.deletion_grace_period_seconds, Some(7));

    // By the kubelet, under node pressure: Failed, Evicted, and marked too.
    cluster
        .evict_pod(
            "default",
            "pressed",
            "The node was low on resource: memory.",
        )
        .unwrap();
    let pressed = pods.get("pressed").await.unwrap();
    let status = pressed.status.as_ref().unwrap();
    assert_eq!(
        (status.phase.as_deref(), status.reason.as_deref()),
        (Some("Failed"), Some("Evicted"))
    );
    assert_eq!(
        disruption_target(&pressed).as_deref(),
        Some("TerminationByKubelet")
    );
}

#[tokio::test]
async fn an_autoscaler_gets_kube_apiservers_defaults_and_bounds_and_no_generation() {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    let (_cluster, client) = cluster().await;
    let api: Api<HorizontalPodAutoscaler> = Api::default_namespaced(client);
    let hpa = |name: &str, min: Option<i32>, max: i32| -> HorizontalPodAutoscaler {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {
                "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ddp"},
                "minReplicas": min, "maxReplicas": max
            }
        }))
        .unwrap()
    };
    let created = api
        .create(&PostParams::default(), &hpa("defaulted", None, 3))
        .await
        .unwrap();
    // kube-apiserver 1.36 keeps no generation for an HPA, spec changes included.
    let spec_change = json!({"spec": {"maxReplicas": 5}});
    let after_spec = api
        .patch(
            "defaulted",
            &PatchParams::default(),
            &Patch::Merge(&spec_change),
        )
        .await
        .unwrap();
    assert_eq!(after_spec.metadata.generation, None);
    let spec = created.spec.unwrap();
    assert_eq!(spec.min_replicas, Some(1));
    let metric = serde_json::to_value(&spec.metrics.unwrap()[0]).unwrap();
    assert_eq!(metric["resource"]["target"]["averageUtilization"], 80);
    let refused = api
        .create(&PostParams::default(), &hpa("inverted", Some(4), 2))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("an API error: {refused}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.maxReplicas"),
        "{}",
        status.message
    );
}
