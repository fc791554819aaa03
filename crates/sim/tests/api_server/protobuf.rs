//! Built-in objects sent in Kubernetes' protobuf encoding, as client-go and kubectl's typed
//! commands send them, are stored as the same objects their JSON form makes; custom resources
//! and CBOR are refused with kube-apiserver's `415`.

use crate::support::without_assigned;
use eto_sim::apiserver::protobuf::{descriptors, encode};
use eto_sim::{SimCluster, SimConfig};
use http_body_util::BodyExt;
use kube::Client;
use pretty_assertions::assert_eq;
use prost_reflect::DynamicMessage;
use serde_json::{Value, json};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A protobuf body of message `message` with the wire fields `fields` (in protobuf's JSON
/// mapping).
fn protobuf_body(api_version: &str, kind: &str, message: &str, fields: Value) -> Vec<u8> {
    let descriptor = descriptors().unwrap().get_message_by_name(message).unwrap();
    let object = DynamicMessage::deserialize(descriptor, fields).unwrap();
    encode(api_version, kind, &object).unwrap()
}

/// Object metadata as Go writes it to protobuf: every non-pointer field, zero or not.
fn wire_metadata(name: &str) -> Value {
    json!({
        "name": name, "generateName": "", "namespace": "", "selfLink": "", "uid": "",
        "resourceVersion": "", "generation": 0, "creationTimestamp": {}
    })
}

/// POSTs `body`; returns the response's status, `Content-Type` and body.
async fn post(
    client: &Client,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, String, Value) {
    let request = http::Request::post(path)
        .header("Content-Type", content_type)
        .header("Accept", format!("{PROTOBUF}, */*"))
        .body(kube::client::Body::from(body))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let status = response.status().as_u16();
    let returned = response
        .headers()
        .get("Content-Type")
        .map(|value| value.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, returned, serde_json::from_slice(&bytes).unwrap())
}

async fn get(client: &Client, path: &str) -> Value {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap()
}

/// An object as stored, without what differs between two creations of it: its name (also
/// where the object repeats it), what the cluster assigns, and where a pod or node runs.
fn comparable(object: Value, name: &str) -> Value {
    let mut object = without_assigned(object);
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("nodeName");
    }
    if matches!(object["kind"].as_str(), Some("Pod" | "Node")) {
        object.as_object_mut().unwrap().remove("status");
    }
    let text = object.to_string().replace(name, "NAME");
    serde_json::from_str(&text).unwrap()
}

struct Case {
    api_version: &'static str,
    kind: &'static str,
    /// The collection's path.
    path: String,
    message: String,
    /// The object's fields on the wire, but `metadata`.
    wire: Value,
    /// The same object in JSON, but `metadata`, as Go writes it.
    json: Value,
}

fn cases() -> Vec<Case> {
    let core = |kind: &'static str, path: &str, wire: Value, json: Value| Case {
        api_version: "v1",
        kind,
        path: path.to_string(),
        message: format!("k8s.io.api.core.v1.{kind}"),
        wire,
        json,
    };
    let namespaced = "/api/v1/namespaces/default";
    vec![
        core(
            "Namespace",
            "/api/v1/namespaces",
            json!({"spec": {}, "status": {"phase": ""}}),
            json!({"spec": {}, "status": {}}),
        ),
        core(
            "ConfigMap",
            &format!("{namespaced}/configmaps"),
            json!({"data": {"a": "b"}, "binaryData": {"bin": "AAE="}}),
            json!({"data": {"a": "b"}, "binaryData": {"bin": "AAE="}}),
        ),
        core(
            "Secret",
            &format!("{namespaced}/secrets"),
            json!({"data": {"key": "czNjcmV0"}, "type": ""}),
            json!({"data": {"key": "czNjcmV0"}}),
        ),
        core(
            "ServiceAccount",
            &format!("{namespaced}/serviceaccounts"),
            json!({"automountServiceAccountToken": false}),
            json!({"automountServiceAccountToken": false}),
        ),
        core(
            "Service",
            &format!("{namespaced}/services"),
            json!({
                "spec": {
                    "ports": [{
                        "name": "80-8080", "protocol": "TCP", "appProtocol": null, "port": 80,
                        "targetPort": {"type": 0, "intVal": 8080, "strVal": ""}, "nodePort": 0
                    }],
                    "selector": {"app": "web"}, "clusterIP": "", "type": "ClusterIP",
                    "sessionAffinity": "", "loadBalancerIP": "", "externalName": "",
                    "externalTrafficPolicy": "", "healthCheckNodePort": 0,
                    "publishNotReadyAddresses": false
                },
                "status": {"loadBalancer": {}}
            }),
            json!({
                "spec": {
                    "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                    "selector": {"app": "web"},
                    "type": "ClusterIP"
                },
                "status": {"loadBalancer": {}}
            }),
        ),
        core(
            "Pod",
            &format!("{namespaced}/pods"),
            json!({"spec": {
                "containers": [{
                    "name": "main", "image": "busybox:1.36", "workingDir": "",
                    "resources": {}, "terminationMessagePath": "",
                    "terminationMessagePolicy": "", "imagePullPolicy": "", "stdin": false,
                    "stdinOnce": false, "tty": false
                }],
                "restartPolicy": "Never", "dnsPolicy": "", "serviceAccountName": "",
                "serviceAccount": "", "nodeName": "", "hostNetwork": false, "hostPID": false,
                "hostIPC": false, "hostname": "", "subdomain": "", "schedulerName": ""
            }}),
            json!({"spec": {
                "containers": [{"name": "main", "image": "busybox:1.36", "resources": {}}],
                "restartPolicy": "Never"
            }}),
        ),
        core(
            "Event",
            &format!("{namespaced}/events"),
            json!({
                "involvedObject": {
                    "kind": "Pod", "namespace": "default", "name": "main", "uid": "",
                    "apiVersion": "v1", "resourceVersion": "", "fieldPath": ""
                },
                "reason": "Started", "message": "started", "source": {"component": "", "host": ""},
                "firstTimestamp": {"seconds": 1_795_478_400_i64, "nanos": 0},
                "lastTimestamp": {}, "count": 1, "type": "Normal", "eventTime": {},
                "action": "", "reportingComponent": "", "reportingInstance": ""
            }),
            json!({
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "main", "apiVersion": "v1"},
                "reason": "Started", "message": "started", "source": {},
                "firstTimestamp": "2026-11-24T00:00:00Z", "lastTimestamp": null, "count": 1,
                "type": "Normal", "eventTime": null, "reportingComponent": "",
                "reportingInstance": ""
            }),
        ),
        core(
            "Node",
            "/api/v1/nodes",
            json!({"spec": {"podCIDR": "", "providerID": "", "unschedulable": true}}),
            json!({"spec": {"unschedulable": true}}),
        ),
        Case {
            api_version: "rbac.authorization.k8s.io/v1",
            kind: "Role",
            path: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles".into(),
            message: "k8s.io.api.rbac.v1.Role".into(),
            wire: json!({"rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}),
            json: json!({"rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]}),
        },
        Case {
            api_version: "rbac.authorization.k8s.io/v1",
            kind: "RoleBinding",
            path: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings".into(),
            message: "k8s.io.api.rbac.v1.RoleBinding".into(),
            wire: json!({
                "subjects": [{"kind": "ServiceAccount", "apiGroup": "", "name": "runner", "namespace": "default"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
            }),
            json: json!({
                "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "default"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
            }),
        },
        Case {
            api_version: "coordination.k8s.io/v1",
            kind: "Lease",
            path: "/apis/coordination.k8s.io/v1/namespaces/default/leases".into(),
            message: "k8s.io.api.coordination.v1.Lease".into(),
            wire: json!({"spec": {
                "holderIdentity": "eto-0", "leaseDurationSeconds": 15,
                "renewTime": {"seconds": 1_795_478_400_i64, "nanos": 123_456_000}
            }}),
            json: json!({"spec": {
                "holderIdentity": "eto-0", "leaseDurationSeconds": 15,
                "renewTime": "2026-11-24T00:00:00.123456Z"
            }}),
        },
    ]
}

#[tokio::test]
async fn each_built_in_kind_sent_in_protobuf_is_stored_as_its_json_form_is() {
    let cluster = SimCluster::start(SimConfig::default().gpu_nodes(1, 8))
        .await
        .unwrap();
    let client = cluster.client();
    for case in cases() {
        let kind = case.kind.to_lowercase();
        let (by_protobuf, by_json) = (format!("{kind}-by-protobuf"), format!("{kind}-by-json"));
        let mut wire = case.wire.clone();
        wire["metadata"] = wire_metadata(&by_protobuf);
        let body = protobuf_body(case.api_version, case.kind, &case.message, wire);
        let (code, content_type, created) = post(&client, &case.path, PROTOBUF, body).await;
        assert_eq!(code, 201, "{}: {created}", case.kind);
        assert_eq!(
            content_type, "application/json",
            "{}: JSON, which the client accepts",
            case.kind
        );
        assert_eq!(
            created["metadata"]["name"],
            json!(by_protobuf),
            "{}",
            case.kind
        );

        let mut json = case.json.clone();
        json["apiVersion"] = json!(case.api_version);
        json["kind"] = json!(case.kind);
        json["metadata"] = json!({"name": by_json, "creationTimestamp": null});
        let (code, _, created) = post(
            &client,
            &case.path,
            "application/json",
            serde_json::to_vec(&json).unwrap(),
        )
        .await;
        assert_eq!(code, 201, "{}: {created}", case.kind);

        let stored_protobuf = get(&client, &format!("{}/{by_protobuf}", case.path)).await;
        let stored_json = get(&client, &format!("{}/{by_json}", case.path)).await;
        assert_eq!(
            comparable(stored_protobuf, &by_protobuf),
            comparable(stored_json, &by_json),
            "{}",
            case.kind
        );
    }
}

#[tokio::test]
async fn a_protobuf_body_replaces_an_object_and_carries_delete_options() {
    let cluster = SimCluster::start(SimConfig::default()).await.unwrap();
    let client = cluster.client();
    let path = "/api/v1/namespaces/default/configmaps";
    let config = |data: Value, resource_version: &str| {
        let mut metadata = wire_metadata("settings");
        metadata["resourceVersion"] = json!(resource_version);
        protobuf_body(
            "v1",
            "ConfigMap",
            "k8s.io.api.core.v1.ConfigMap",
            json!({"metadata": metadata, "data": data}),
        )
    };
    let (code, _, created) = post(&client, path, PROTOBUF, config(json!({"a": "1"}), "")).await;
    assert_eq!(code, 201, "{created}");
    let version = created["metadata"]["resourceVersion"].as_str().unwrap();
    let request = http::Request::put(format!("{path}/settings"))
        .header("Content-Type", PROTOBUF)
        .body(config(json!({"a": "2"}), version))
        .unwrap();
    let replaced: Value =
        serde_json::from_str(&client.request_text(request).await.unwrap()).unwrap();
    assert_eq!(replaced["data"], json!({"a": "2"}));

    let options = protobuf_body(
        "v1",
        "DeleteOptions",
        "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        json!({"preconditions": {"resourceVersion": version}}),
    );
    let request = http::Request::delete(format!("{path}/settings"))
        .header("Content-Type", PROTOBUF)
        .body(options)
        .unwrap();
    let kube::Error::Api(status) = client.request_text(request).await.unwrap_err() else {
        panic!("a stale precondition must fail");
    };
    assert_eq!(
        status.code, 409,
        "the precondition came through: {}",
        status.message
    );
}

#[tokio::test]
async fn custom_resources_cbor_and_malformed_bodies_are_refused_as_kube_apiserver_does() {
    let cluster = SimCluster::start(SimConfig::default()).await.unwrap();
    let client = cluster.client();
    let crd = serde_json::to_vec(&widget_crd()).unwrap();
    let (code, _, _) = post(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        crd,
    )
    .await;
    assert_eq!(code, 201);
    let name = widget_crd()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    super::support::await_established(&client, &name).await;
    let custom = protobuf_body(
        "v1",
        "ConfigMap",
        "k8s.io.api.core.v1.ConfigMap",
        json!({"metadata": wire_metadata("x")}),
    );
    let refusals = [
        (
            "/apis/example.com/v1/namespaces/default/widgets",
            PROTOBUF,
            custom.clone(),
            415,
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            "application/cbor",
            vec![0xa0],
            415,
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ),
        (
            "/api/v1/namespaces/default/configmaps",
            PROTOBUF,
            b"k8s\0\xff\xff".to_vec(),
            400,
            "the protobuf envelope is malformed",
        ),
    ];
    for (path, content_type, body, code, message) in refusals {
        let (got, _, status) = post(&client, path, content_type, body).await;
        assert_eq!(got, code, "{path} {content_type}: {status}");
        assert!(
            status["message"].as_str().unwrap().starts_with(message),
            "{path} {content_type}: {status}"
        );
    }
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}
