//! The Helm chart grants the operator what it uses, and nothing like `pods/exec`.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use eto_tests::workspace_root;
use serde_json::Value;

/// The ClusterRole's rules as (group, resource, verb) triples. Template expressions only
/// appear in its metadata, so they are replaced by a placeholder before parsing.
fn granted() -> BTreeSet<(String, String, String)> {
    let text =
        std::fs::read_to_string(workspace_root().join("charts/eto/templates/clusterrole.yaml"))
            .unwrap();
    let plain: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("{{-"))
        .map(|line| match (line.find("{{"), line.rfind("}}")) {
            (Some(start), Some(end)) => {
                format!("{}placeholder{}", &line[..start], &line[end + 2..])
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let role: Value = serde_saphyr::from_str(&plain).unwrap();
    let mut triples = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    triples.insert((
                        group.as_str().unwrap().into(),
                        resource.as_str().unwrap().into(),
                        verb.as_str().unwrap().into(),
                    ));
                }
            }
        }
    }
    triples
}

#[test]
fn the_operator_may_do_what_it_does() {
    let granted = granted();
    let needed = [
        (
            "kai.alibabacloud.com",
            "trainingjobs",
            &["get", "list", "watch", "patch", "delete"][..],
        ),
        ("kai.alibabacloud.com", "trainingjobs/status", &["patch"]),
        (
            "kai.alibabacloud.com",
            "scaleins",
            &["get", "list", "watch", "patch"],
        ),
        (
            "kai.alibabacloud.com",
            "scaleouts",
            &["get", "list", "watch", "patch"],
        ),
        ("kai.alibabacloud.com", "scaleins/status", &["patch"]),
        ("kai.alibabacloud.com", "scaleouts/status", &["patch"]),
        (
            "kubeflow.org",
            "mpijobs",
            &["get", "list", "watch", "patch", "delete"],
        ),
        ("kubeflow.org", "mpijobs/status", &["patch"]),
        (
            "batch",
            "jobs",
            &["get", "list", "watch", "create", "delete"],
        ),
        ("", "pods", &["get", "list", "watch", "patch", "delete"]),
        ("", "services", &["list", "watch", "patch", "delete"]),
        ("", "configmaps", &["list", "watch", "patch"]),
        ("", "serviceaccounts", &["list", "watch", "patch"]),
        ("", "secrets", &["get", "list", "watch", "create"]),
        (
            "rbac.authorization.k8s.io",
            "roles",
            &["list", "watch", "patch"],
        ),
        (
            "rbac.authorization.k8s.io",
            "rolebindings",
            &["list", "watch", "patch"],
        ),
        ("events.k8s.io", "events", &["create", "patch"]),
        // The launcher's Role grants configmaps get and watch: eto must hold them to grant them.
        ("", "configmaps", &["get", "watch"]),
    ];
    for (group, resource, verbs) in needed {
        for verb in verbs {
            assert!(
                granted.contains(&(group.into(), resource.into(), (*verb).into())),
                "missing {verb} {resource}.{group}"
            );
        }
    }
}

#[test]
fn the_operator_may_not_exec_into_pods() {
    assert!(
        granted()
            .iter()
            .all(|(_, resource, _)| resource != "pods/exec" && resource != "*")
    );
}
