//! The discovery documents: `/version`, `/api`, `/apis`, `/apis/<group>` and resource lists.
//!
//! Only the legacy (unaggregated) discovery format is served; clients that ask for aggregated
//! discovery get it and fall back, as they do with older API servers.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resources::{Registry, ResourceType};

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-eto-sim",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a",
        "compiler": "rustc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
}

/// The versions each group serves, the preferred first: as kube-apiserver orders them, GA
/// before beta before alpha, higher numbers first (`v1` before `v2beta1`).
fn group_versions(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for resource in registry.all().filter(|r| !r.id.group.is_empty()) {
        let versions = groups.entry(resource.id.group.clone()).or_default();
        if !versions.contains(&resource.version) {
            versions.push(resource.version.clone());
        }
    }
    for versions in groups.values_mut() {
        versions.sort_by_key(|version| std::cmp::Reverse(priority(version)));
    }
    groups
}

/// How kube-apiserver ranks version `version`: stability (GA, beta, alpha, then any other
/// name), then major, then minor number.
fn priority(version: &str) -> (u8, u32, u32) {
    let number = |text: &str| text.parse::<u32>().ok();
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let Some(major) = number(&rest[..digits]) else {
        return (0, 0, 0);
    };
    match &rest[digits..] {
        "" => (3, major, 0),
        tail => match (tail.strip_prefix("beta"), tail.strip_prefix("alpha")) {
            (Some(minor), _) => (2, major, number(minor).unwrap_or(0)),
            (_, Some(minor)) => (1, major, number(minor).unwrap_or(0)),
            _ => (0, 0, 0),
        },
    }
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let entries: Vec<Value> = versions
        .iter()
        .map(|version| json!({"groupVersion": format!("{group}/{version}"), "version": version}))
        .collect();
    json!({"name": group, "versions": entries, "preferredVersion": entries.first()})
}

/// `/apis`.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = group_versions(registry)
        .iter()
        .map(|(group, versions)| group_entry(group, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if the group is served.
pub fn group(registry: &Registry, group: &str) -> Option<Value> {
    let groups = group_versions(registry);
    let versions = groups.get(group)?;
    let mut entry = group_entry(group, versions);
    entry["kind"] = json!("APIGroup");
    entry["apiVersion"] = json!("v1");
    Some(entry)
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<&ResourceType> = registry
        .all()
        .filter(|resource| resource.id.group == group && resource.version == version)
        .map(AsRef::as_ref)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let mut entries = Vec::new();
    for resource in resources {
        let mut entry = json!({
            "name": resource.id.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": VERBS,
        });
        if !resource.short_names.is_empty() {
            entry["shortNames"] = json!(resource.short_names);
        }
        if resource.custom {
            entry["categories"] = json!([]);
        }
        entries.push(entry);
        if resource.status_subresource {
            entries.push(json!({
                "name": format!("{}/status", resource.id.plural),
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if resource.scale.is_some() {
            entries.push(json!({
                "name": format!("{}/scale", resource.id.plural),
                "singularName": "",
                "namespaced": resource.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries}),
    )
}

/// `/openapi/v3`: the index of per-group-version documents.
pub fn openapi_index(registry: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({"serverRelativeURL": "/openapi/v3/api/v1"}),
    );
    for (group, versions) in group_versions(registry) {
        for version in versions {
            let path = format!("apis/{group}/{version}");
            paths.insert(
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`: only what kubectl reads
/// before a write, the PATCH operation of each resource and its `fieldValidation` parameter
/// (so kubectl leaves validation to the server). No schemas are served.
pub fn openapi_document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for resource in registry
        .all()
        .filter(|r| r.id.group == group && r.version == version)
    {
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if resource.namespaced {
            format!(
                "{prefix}/namespaces/{{namespace}}/{}/{{name}}",
                resource.id.plural
            )
        } else {
            format!("{prefix}/{}/{{name}}", resource.id.plural)
        };
        let operation = json!({
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": resource.kind},
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            ],
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(path, json!({"patch": operation}));
    }
    if paths.is_empty() {
        return None;
    }
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.33.0-eto-sim"}, "paths": paths}),
    )
}

#[cfg(test)]
mod tests {
    use super::priority;

    #[test]
    fn versions_rank_as_kube_apiserver_ranks_them() {
        let mut versions = vec!["v1alpha1", "v2beta1", "v1", "v1beta2", "v2", "foo", "v10"];
        versions.sort_by_key(|version| std::cmp::Reverse(priority(version)));
        assert_eq!(
            versions,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]
        );
    }
}
