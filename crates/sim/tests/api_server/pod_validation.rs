//! eto-sim refuses a new pod as kube-apiserver refuses it, for every field an operator writes
//! into one: each case breaks one rule and expects kube-apiserver's field path and message.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use eto_sim::{SimCluster, SimConfig};

async fn cluster() -> (SimCluster, kube::Client) {
    let cluster = SimCluster::start(SimConfig::default()).await.unwrap();
    let client = cluster.client();
    (cluster, client)
}

/// A pod that every rule accepts: what eto writes into a worker, in kube-apiserver's shapes.
fn valid_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"training-job-name": "job", "eto.dev/run": "0"},
            "annotations": {"eto.dev/notice": "", "scheduling.k8s.io/group-name": "job"}
        },
        "spec": {
            "restartPolicy": "Never",
            "hostname": "job-worker-0",
            "subdomain": "job-workers",
            "serviceAccountName": "job-launcher",
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoExecute", "tolerationSeconds": 30}
            ],
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "dnsConfig": {"searches": ["job.default.svc.cluster.local"]},
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {"matchFields": [
                    {"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]},
                    {"key": "metadata.name", "operator": "NotIn", "values": ["node-b"]}]}}]
            }},
            "containers": [{
                "name": "worker", "image": "horovod:0.28.1",
                "env": [{"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"}],
                "volumeMounts": [
                    {"name": "eto-ssh", "mountPath": "/root/.ssh", "readOnly": true},
                    {"name": "eto-notice", "mountPath": "/etc/edl", "readOnly": true}
                ]
            }],
            "volumes": [
                {"name": "eto-ssh", "secret": {"secretName": "job", "defaultMode": 384, "items": [
                    {"key": "id_rsa", "path": "id_rsa"}, {"key": "id_rsa.pub", "path": "authorized_keys"}]}},
                {"name": "eto-notice", "downwardAPI": {"items": [
                    {"path": "notice", "fieldRef": {"fieldPath": "metadata.annotations['eto.dev/notice']"}, "mode": 292}]}},
                {"name": "eto-discovery", "projected": {"sources": [
                    {"configMap": {"name": "job-config", "items": [{"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 365}]}},
                    {"downwardAPI": {"items": [{"path": "hostfile", "fieldRef": {"fieldPath": "metadata.annotations['eto.dev/hostfile']"}}]}}
                ]}}
            ]
        }
    })
}

/// Sets the value at the JSON pointer `at` of `pod` (creating objects on the way).
fn with(mut pod: Value, at: &str, value: Value) -> Value {
    let mut target = &mut pod;
    for part in at.trim_start_matches('/').split('/') {
        target = match part.parse::<usize>() {
            Ok(index) => &mut target[index],
            Err(_) => &mut target[part.replace("~1", "/").as_str()],
        };
    }
    *target = value;
    pod
}

const MATCH_FIELDS_MESSAGE: &str = "Pod \"realk-worker-5\" is invalid: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector";

#[tokio::test]
async fn a_node_field_requirement_with_two_values_is_refused_with_kube_apiservers_message() {
    let (_cluster, client) = cluster().await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod = with(
        valid_pod("realk-worker-5"),
        "/spec/affinity/nodeAffinity",
        json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {"matchFields": [
            {"key": "metadata.name", "operator": "NotIn", "values": ["node-a", "node-b"]}]}}]}),
    );
    let refused = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await;
    let Err(kube::Error::Api(status)) = refused else {
        panic!("expected 422, got {refused:?}");
    };
    assert_eq!(status.code, 422);
    assert_eq!(status.reason, "Invalid");
    assert_eq!(status.message, MATCH_FIELDS_MESSAGE);
}

#[tokio::test]
async fn every_rule_an_operator_relies_on_refuses_as_kube_apiserver_does() {
    let (_cluster, client) = cluster().await;
    every_rule_refuses(Api::default_namespaced(client)).await;
}

/// The same cases against the cluster KUBECONFIG names, as server-side dry runs in its
/// `default` namespace (nothing is created but the ServiceAccount the valid pod names): what
/// makes sure eto-sim's messages are kube-apiserver's.
#[tokio::test]
#[ignore = "needs cluster (KUBECONFIG): dry-run pod creations in the default namespace"]
async fn every_rule_refuses_on_a_real_cluster_as_on_eto_sim() {
    let client = kube::Client::try_default().await.unwrap();
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::default_namespaced(client.clone());
    let account = serde_json::from_value(json!({"metadata": {"name": "job-launcher"}})).unwrap();
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(other) => panic!("{other}"),
    }
    every_rule_refuses(Api::default_namespaced(client)).await;
}

async fn every_rule_refuses(pods: Api<Pod>) {
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let accepted = pods
        .create(
            &dry_run,
            &serde_json::from_value(valid_pod("valid")).unwrap(),
        )
        .await
        .expect("the valid pod is accepted");
    let stored = serde_json::to_value(&accepted).unwrap();
    assert_eq!(
        stored["spec"]["volumes"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1",
        "defaulted as kube-apiserver defaults it"
    );
    assert_eq!(
        stored["spec"]["volumes"][1]["downwardAPI"]["defaultMode"],
        420
    );

    let node_affinity = "/spec/affinity/nodeAffinity";
    let preferred = |requirement: Value| json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": requirement}]});
    let required_terms = |requirement: Value| json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [requirement]}});
    let preferred_path =
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]";
    let required_path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    // (what breaks a rule: JSON pointer and value; the field; kube-apiserver's message). A
    // volume with an error is left out of those a mount may name, so that its mount is "Not
    // found" too, as kube-apiserver reports it.
    let cases: Vec<(&str, Value, String, &str)> = vec![
        (
            node_affinity,
            preferred(
                json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": []}]}),
            ),
            format!("{preferred_path}.preference.matchFields[0].values"),
            "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        ),
        (
            node_affinity,
            preferred(
                json!({"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a"]}]}),
            ),
            format!("{preferred_path}.preference.matchFields[0].key"),
            "Invalid value: \"metadata.labels\": not a valid field selector key",
        ),
        (
            node_affinity,
            preferred(json!({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]})),
            format!("{preferred_path}.preference.matchFields[0].operator"),
            "Invalid value: \"Exists\": not a valid selector operator",
        ),
        (
            node_affinity,
            preferred(
                json!({"matchExpressions": [{"key": "gpu", "operator": "Exists", "values": ["x"]}]}),
            ),
            format!("{preferred_path}.preference.matchExpressions[0].values"),
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ),
        (
            node_affinity,
            preferred(json!({"matchExpressions": [{"key": "gpu", "operator": "In"}]})),
            format!("{preferred_path}.preference.matchExpressions[0].values"),
            "Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            node_affinity,
            preferred(
                json!({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["1", "2"]}]}),
            ),
            format!("{preferred_path}.preference.matchExpressions[0].values"),
            "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        ),
        (
            node_affinity,
            preferred(json!({"matchExpressions": [{"key": "gpu", "operator": "Near"}]})),
            format!("{preferred_path}.preference.matchExpressions[0].operator"),
            "Invalid value: \"Near\": not a valid selector operator",
        ),
        (
            node_affinity,
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "preference": {}}]}),
            format!("{preferred_path}.weight"),
            "Invalid value: 101: must be in the range 1-100",
        ),
        (
            node_affinity,
            required_terms(
                json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a b"]}]}),
            ),
            format!("{required_path}[0].matchExpressions[0].values[0]"),
            "Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            node_affinity,
            json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}),
            required_path.to_string(),
            "Required value: must have at least one node selector term",
        ),
        (
            "/spec/nodeSelector",
            json!({"gpu type": "a100"}),
            "spec.nodeSelector".into(),
            "Invalid value: \"gpu type\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "/spec/tolerations",
            json!([{"operator": "Equal", "value": "x"}]),
            "spec.tolerations[0].operator".into(),
            "Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ),
        (
            "/spec/tolerations",
            json!([{"key": "spot", "operator": "Exists", "value": "x"}]),
            "spec.tolerations[0].operator".into(),
            "Invalid value: \"x\": value must be empty when `operator` is 'Exists'",
        ),
        (
            "/spec/tolerations",
            json!([{"key": "spot", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
            "spec.tolerations[0].effect".into(),
            "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        (
            "/spec/tolerations",
            json!([{"key": "spot", "operator": "Exists", "effect": "Sometimes"}]),
            "spec.tolerations[0].effect".into(),
            "Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
        ),
        (
            "/spec/schedulingGates",
            json!([{"name": "gate"}, {"name": "gate"}]),
            "spec.schedulingGates[1]".into(),
            "Duplicate value: \"gate\"",
        ),
        (
            "/spec/volumes/1/downwardAPI/items/0/fieldRef/fieldPath",
            json!("spec.nodeName"),
            "spec.volumes[1].downwardAPI.fieldRef.fieldPath".into(),
            "Unsupported value: \"spec.nodeName\": supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\"",
        ),
        (
            "/spec/volumes/1/downwardAPI/items/0/path",
            json!("../notice"),
            "spec.volumes[1].downwardAPI.path".into(),
            "Invalid value: \"../notice\": must not contain '..'",
        ),
        (
            "/spec/volumes/1/downwardAPI/items/0/mode",
            json!(0o1000),
            "spec.volumes[1].downwardAPI.mode".into(),
            "Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive",
        ),
        (
            "/spec/volumes/0/secret/items/0/path",
            json!("/root/id_rsa"),
            "spec.volumes[0].secret.items[0].path".into(),
            "Invalid value: \"/root/id_rsa\": must be a relative path",
        ),
        (
            "/spec/volumes/0/secret/secretName",
            json!(""),
            "spec.volumes[0].secret.secretName".into(),
            "Required value",
        ),
        (
            "/spec/volumes/2/projected/sources/1/downwardAPI/items/0/path",
            json!("discover_hosts.sh"),
            "spec.volumes[2].projected".into(),
            "Invalid value: \"discover_hosts.sh\": conflicting duplicate paths",
        ),
        (
            "/spec/volumes/0/emptyDir",
            json!({}),
            "spec.volumes[0].secret".into(),
            "Forbidden: may not specify more than 1 volume type",
        ),
        (
            "/spec/volumes/1/name",
            json!("Eto_Notice"),
            "spec.volumes[1].name".into(),
            "Invalid value: \"Eto_Notice\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            "/spec/containers/0/volumeMounts/1/name",
            json!("eto-hostfile"),
            "spec.containers[0].volumeMounts[1].name".into(),
            "Not found: \"eto-hostfile\"",
        ),
        (
            "/spec/containers/0/volumeMounts/1/mountPath",
            json!("/root/.ssh"),
            "spec.containers[0].volumeMounts[1].mountPath".into(),
            "Invalid value: \"/root/.ssh\": must be unique",
        ),
        (
            "/spec/containers/0/env/0/name",
            json!("RANK=0"),
            "spec.containers[0].env[0].name".into(),
            "Invalid value: \"RANK=0\": a valid environment variable name must consist only of printable ASCII characters other than '='",
        ),
        (
            "/spec/hostname",
            json!("job.worker.0"),
            "spec.hostname".into(),
            "Invalid value: \"job.worker.0\": must not contain dots",
        ),
        (
            "/spec/restartPolicy",
            json!("Sometimes"),
            "spec.restartPolicy".into(),
            "Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        ),
        (
            "/spec/dnsConfig/searches/0",
            json!("job..svc"),
            "spec.dnsConfig.searches[0]".into(),
            "Invalid value: \"job..svc\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            "/metadata/labels/eto.dev~1run",
            json!("run 1"),
            "metadata.labels".into(),
            "Invalid value: \"run 1\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            "/metadata/annotations/eto.dev~1notice",
            json!("x".repeat(256 * 1024)),
            "metadata.annotations".into(),
            "Too long: may not be more than 262144 bytes",
        ),
    ];
    for (index, (at, value, field, message)) in cases.into_iter().enumerate() {
        let name = format!("broken-{index}");
        let mut expected = vec![format!("{field}: {message}")];
        let unmounted = [
            ("/spec/volumes/0/", 0, "eto-ssh"),
            ("/spec/volumes/1/", 1, "eto-notice"),
        ];
        for (volume, mount, mount_name) in unmounted {
            if at.starts_with(volume) {
                expected.push(format!(
                    "spec.containers[0].volumeMounts[{mount}].name: Not found: \"{mount_name}\""
                ));
            }
        }
        let expected = match expected.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let pod = with(valid_pod(&name), at, value);
        let refused = pods
            .create(&dry_run, &serde_json::from_value(pod).unwrap())
            .await;
        let Err(kube::Error::Api(status)) = refused else {
            panic!("{field}: expected 422, got {refused:?}");
        };
        assert_eq!(status.code, 422, "{field}: {}", status.message);
        assert_eq!(
            status.message,
            format!("Pod \"{name}\" is invalid: {expected}"),
            "case {index}"
        );
    }
}
