//! kubectl's typed commands (`kubectl create namespace`, `create secret generic`, ...), which
//! send protobuf, work against the simulated cluster, and what they create reads back as a
//! real cluster stores it. Skipped, saying so, where kubectl is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::without_assigned;
use eto_sim::{SimCluster, SimConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Runs kubectl with `args` against the cluster whose kubeconfig is at `kubeconfig`; `None`
/// where kubectl is not installed.
async fn kubectl(kubeconfig: &Path, args: &[&str]) -> Option<String> {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    let what = args.join(" ");
    // kubectl blocks; the simulated cluster must keep serving it meanwhile.
    let ran = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .args(&args)
            .env("KUBECONFIG", &kubeconfig)
            .output()
    })
    .await
    .unwrap();
    match ran {
        Ok(output) => {
            assert!(
                output.status.success(),
                "kubectl {what}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            Some(String::from_utf8(output.stdout).unwrap())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => panic!("cannot run kubectl: {error}"),
    }
}

/// What a real cluster stores for each command, without what it assigns (identity, times,
/// managed fields, a Service's cluster IPs).
fn commands() -> Vec<(Vec<&'static str>, &'static str, Value)> {
    vec![
        (
            vec!["create", "namespace", "team-a"],
            "namespace/team-a",
            json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"}
            }),
        ),
        (
            vec![
                "-n",
                "team-a",
                "create",
                "secret",
                "generic",
                "ssh",
                "--from-literal=key=s3cret",
            ],
            "-n team-a secret/ssh",
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "ssh", "namespace": "team-a"},
                "data": {"key": "czNjcmV0"},
                "type": "Opaque"
            }),
        ),
        (
            vec![
                "-n",
                "team-a",
                "create",
                "configmap",
                "settings",
                "--from-literal=epochs=90",
            ],
            "-n team-a configmap/settings",
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "team-a"},
                "data": {"epochs": "90"}
            }),
        ),
        (
            vec![
                "-n",
                "team-a",
                "create",
                "service",
                "clusterip",
                "web",
                "--tcp=80:8080",
            ],
            "-n team-a service/web",
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "team-a", "labels": {"app": "web"}},
                "spec": {
                    "internalTrafficPolicy": "Cluster",
                    "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack",
                    "ports": [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                    "selector": {"app": "web"},
                    "sessionAffinity": "None",
                    "type": "ClusterIP"
                },
                "status": {"loadBalancer": {}}
            }),
        ),
        (
            vec!["-n", "team-a", "create", "serviceaccount", "runner"],
            "-n team-a serviceaccount/runner",
            json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "runner", "namespace": "team-a"}
            }),
        ),
        (
            vec![
                "-n",
                "team-a",
                "create",
                "role",
                "reader",
                "--verb=get,list",
                "--resource=pods",
            ],
            "-n team-a role/reader",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "reader", "namespace": "team-a"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
            }),
        ),
        (
            vec![
                "-n",
                "team-a",
                "create",
                "rolebinding",
                "reader",
                "--role=reader",
                "--serviceaccount=team-a:runner",
            ],
            "-n team-a rolebinding/reader",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "reader", "namespace": "team-a"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "team-a"}]
            }),
        ),
    ]
}

#[tokio::test]
async fn kubectl_create_commands_make_what_a_real_cluster_stores() {
    let cluster = SimCluster::start(SimConfig::default()).await.unwrap();
    let kubeconfig = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kubectl-create.kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig()).unwrap();
    for (command, object, expected) in commands() {
        if kubectl(&kubeconfig, &command).await.is_none() {
            eprintln!("kubectl is not installed: the kubectl commands were not run");
            return;
        }
        let mut get: Vec<&str> = object.split(' ').collect();
        get.splice(get.len() - 1..get.len() - 1, ["get", "-o", "json"]);
        let stored = kubectl(&kubeconfig, &get).await.unwrap();
        let stored: Value = serde_json::from_str(&stored).unwrap();
        assert_eq!(
            without_assigned(stored),
            expected,
            "kubectl {}",
            command.join(" ")
        );
    }
}
