//! Bodies built the way Kubernetes' Go code writes them (non-pointer fields present even when
//! zero), decoded and compared with the JSON Go writes for the same object. The messages are
//! written here in protobuf's own JSON mapping of the wire fields.

use pretty_assertions::assert_eq;
use prost_reflect::prost::Message;
use prost_reflect::{DynamicMessage, Value};
use serde_json::json;

use super::{ProtobufError, decode, encode, message};

/// The message `name` with the wire fields `fields`.
fn wire(name: &str, fields: serde_json::Value) -> DynamicMessage {
    DynamicMessage::deserialize(message(name).expect("a known message"), fields)
        .expect("fields of the message")
}

/// A protobuf body: the magic number and the envelope around `object`.
fn body(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
    encode(api_version, kind, object).expect("encodes")
}

/// Object metadata as Go writes it for a new object: every non-pointer field, zero or not.
fn metadata(name: &str) -> serde_json::Value {
    json!({
        "name": name, "generateName": "", "namespace": "", "selfLink": "", "uid": "",
        "resourceVersion": "", "generation": 0, "creationTimestamp": {}
    })
}

fn core(kind: &str, fields: serde_json::Value) -> Vec<u8> {
    body(
        "v1",
        kind,
        &wire(&format!("k8s.io.api.core.v1.{kind}"), fields),
    )
}

#[test]
fn a_namespace_reads_as_kubectl_create_namespace_writes_it_in_json() {
    let namespace = core(
        "Namespace",
        json!({"metadata": metadata("team-a"), "spec": {}, "status": {"phase": ""}}),
    );
    assert_eq!(
        decode(&namespace).expect("decodes"),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-a", "creationTimestamp": null},
            "spec": {},
            "status": {}
        })
    );
}

#[test]
fn secret_bytes_are_base64_and_pointer_zeros_are_kept() {
    let secret = core(
        "Secret",
        json!({
            "metadata": metadata("ssh"),
            "data": {"key": "AHNlY3JldA=="},
            "type": "Opaque",
            "immutable": false
        }),
    );
    let account = core(
        "ServiceAccount",
        json!({"metadata": metadata("launcher"), "automountServiceAccountToken": false}),
    );
    assert_eq!(
        decode(&secret).expect("decodes"),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ssh", "creationTimestamp": null},
            "data": {"key": "AHNlY3JldA=="},
            "type": "Opaque",
            "immutable": false
        })
    );
    assert_eq!(
        decode(&account).expect("decodes")["automountServiceAccountToken"],
        json!(false)
    );
}

#[test]
fn a_service_shows_ports_as_go_does_and_drops_non_pointer_zeros() {
    let service = core(
        "Service",
        json!({
            "metadata": metadata("job-workers"),
            "spec": {
                "ports": [{
                    "name": "ssh", "protocol": "TCP", "port": 22, "nodePort": 0,
                    "targetPort": {"type": 0, "intVal": 2222, "strVal": ""}
                }],
                "selector": {"app": "job"},
                "clusterIP": "None",
                "type": "ClusterIP",
                "sessionAffinity": "",
                "publishNotReadyAddresses": false
            },
            "status": {"loadBalancer": {}}
        }),
    );
    assert_eq!(
        decode(&service).expect("decodes"),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "job-workers", "creationTimestamp": null},
            "spec": {
                "ports": [{"name": "ssh", "protocol": "TCP", "port": 22, "targetPort": 2222}],
                "selector": {"app": "job"},
                "clusterIP": "None",
                "type": "ClusterIP"
            },
            "status": {"loadBalancer": {}}
        })
    );
}

#[test]
fn a_pod_inlines_embedded_structs_and_shows_quantities_and_named_ports() {
    let pod = core(
        "Pod",
        json!({
            "metadata": metadata("job-worker-0"),
            "spec": {
                "volumes": [{
                    "name": "discovery",
                    "volumeSource": {"configMap": {
                        "localObjectReference": {"name": "job-config"},
                        "defaultMode": 365
                    }}
                }],
                "containers": [{
                    "name": "worker",
                    "image": "horovod:0.28",
                    "ports": [{"name": "http", "containerPort": 8080, "hostPort": 0, "protocol": "TCP"}],
                    "resources": {"limits": {"nvidia.com/gpu": {"string": "1"}}},
                    "readinessProbe": {
                        "handler": {"httpGet": {
                            "path": "/ready", "host": "", "scheme": "HTTP",
                            "port": {"type": 1, "intVal": 0, "strVal": "http"}
                        }},
                        "initialDelaySeconds": 0
                    },
                    "securityContext": {"allowPrivilegeEscalation": false, "runAsUser": 0},
                    "stdin": false,
                    "tty": false
                }],
                "restartPolicy": "Never",
                "hostNetwork": false,
                "nodeName": ""
            }
        }),
    );
    assert_eq!(
        decode(&pod).expect("decodes")["spec"],
        json!({
            "volumes": [{"name": "discovery", "configMap": {"name": "job-config", "defaultMode": 365}}],
            "containers": [{
                "name": "worker",
                "image": "horovod:0.28",
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"}},
                "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false}
            }],
            "restartPolicy": "Never"
        })
    );
}

#[test]
fn times_are_rfc3339_and_micro_times_keep_microseconds() {
    let lease = body(
        "coordination.k8s.io/v1",
        "Lease",
        &wire(
            "k8s.io.api.coordination.v1.Lease",
            json!({
                "metadata": metadata("eto-leader"),
                "spec": {
                    "holderIdentity": "eto-0",
                    "leaseDurationSeconds": 15,
                    "renewTime": {"seconds": 1_795_478_400_i64, "nanos": 123_456_789}
                }
            }),
        ),
    );
    let event = core(
        "Event",
        json!({
            "metadata": metadata("job.1"),
            "reason": "Suspended",
            "count": 1,
            "firstTimestamp": {"seconds": 1_795_478_400_i64, "nanos": 0}
        }),
    );
    assert_eq!(
        decode(&lease).expect("decodes")["spec"],
        json!({
            "holderIdentity": "eto-0",
            "leaseDurationSeconds": 15,
            "renewTime": "2026-11-24T00:00:00.123456Z"
        })
    );
    let event = decode(&event).expect("decodes");
    assert_eq!(
        (&event["firstTimestamp"], &event["count"]),
        (&json!("2026-11-24T00:00:00Z"), &json!(1))
    );
}

#[test]
fn a_list_go_shows_without_omitempty_is_null_when_empty() {
    let role = body(
        "rbac.authorization.k8s.io/v1",
        "Role",
        &wire(
            "k8s.io.api.rbac.v1.Role",
            json!({"metadata": metadata("launcher")}),
        ),
    );
    assert_eq!(decode(&role).expect("decodes")["rules"], json!(null));
}

#[test]
fn delete_options_decode_under_any_group_version() {
    let options = body(
        "v1",
        "DeleteOptions",
        &wire(
            "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
            json!({"propagationPolicy": "Foreground", "gracePeriodSeconds": 0}),
        ),
    );
    let decoded = decode(&options).expect("decodes");
    assert_eq!(
        (
            &decoded["propagationPolicy"],
            &decoded["gracePeriodSeconds"]
        ),
        (&json!("Foreground"), &json!(0))
    );
}

#[test]
fn bad_bodies_are_errors_naming_what_is_wrong() {
    let namespace = wire(
        "k8s.io.api.core.v1.Namespace",
        json!({"metadata": metadata("a")}),
    );
    assert!(matches!(
        decode(b"{\"kind\":\"Namespace\"}"),
        Err(ProtobufError::NoMagic)
    ));
    assert!(matches!(
        decode(b"k8s\0\xff\xff\xff"),
        Err(ProtobufError::Envelope(_))
    ));
    assert!(matches!(
        decode(&body("kai.alibabacloud.com/v1alpha1", "TrainingJob", &namespace)),
        Err(ProtobufError::UnknownKind { kind, .. }) if kind == "TrainingJob"
    ));
    assert!(matches!(
        decode(&body("v1", "NoSuchKind", &namespace)),
        Err(ProtobufError::UnknownKind { .. })
    ));
    let good = body("v1", "Namespace", &namespace);
    // The namespace's bytes cut short inside its metadata.
    let envelope_of = |raw: &[u8], encoding: &str| {
        let mut envelope = wire(
            "k8s.io.apimachinery.pkg.runtime.Unknown",
            json!({
                "typeMeta": {"apiVersion": "v1", "kind": "Namespace"},
                "contentEncoding": encoding
            }),
        );
        envelope.set_field_by_name("raw", Value::Bytes(raw.to_vec().into()));
        let mut bytes = b"k8s\0".to_vec();
        bytes.extend(envelope.encode_to_vec());
        bytes
    };
    let raw = namespace.encode_to_vec();
    assert!(decode(&good).is_ok());
    assert!(matches!(
        decode(&envelope_of(&raw[..raw.len() - 1], "")),
        Err(ProtobufError::Message { kind, .. }) if kind == "Namespace"
    ));
    assert!(matches!(
        decode(&envelope_of(&raw, "gzip")),
        Err(ProtobufError::Encoding(encoding)) if encoding == "gzip"
    ));
}
