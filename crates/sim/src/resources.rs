//! The resource types the simulated API server serves: built-in ones and those registered by
//! CustomResourceDefinitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::schema::CompiledCrdSchema;

/// Identifies a resource type: its API group (empty for the core group) and plural name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId {
    /// API group, empty for the core group.
    pub group: String,
    /// Plural resource name, for example `pods`.
    pub plural: String,
}

impl ResourceId {
    /// The resource `plural` of `group`.
    pub fn new(group: &str, plural: &str) -> Self {
        Self {
            group: group.to_string(),
            plural: plural.to_string(),
        }
    }
}

impl std::fmt::Display for ResourceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.plural)
        } else {
            write!(f, "{}.{}", self.plural, self.group)
        }
    }
}

/// Where the `/scale` subresource of a custom resource reads and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// JSON path of the desired replicas, for example `.spec.replicas`.
    pub spec_replicas: String,
    /// JSON path of the observed replicas under `.status`.
    pub status_replicas: String,
    /// JSON path of the label selector string under `.status`, if any.
    pub label_selector: Option<String>,
}

/// An additional printer column of a custom resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// JSON path of the cell value.
    pub json_path: String,
    /// Column description.
    pub description: String,
    /// 0 for default columns, more for `-o wide` only.
    pub priority: i32,
}

/// Everything the API server knows about one resource type.
#[derive(Clone, Debug)]
pub struct ResourceType {
    /// Group and plural.
    pub id: ResourceId,
    /// The one served version.
    pub version: String,
    /// Kind of its objects.
    pub kind: String,
    /// Singular name.
    pub singular: String,
    /// Short names, for example `po`.
    pub short_names: Vec<String>,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether `/status` is a separate subresource (writes to the main resource then keep the
    /// old status, and writes to `/status` keep everything else).
    pub status_subresource: bool,
    /// The `/scale` subresource of a custom resource.
    pub scale: Option<ScalePaths>,
    /// Printer columns of a custom resource.
    pub printer_columns: Vec<PrinterColumn>,
    /// The schema of a custom resource, validated, defaulted and pruned against on writes.
    pub schema: Option<Arc<CompiledCrdSchema>>,
    /// Whether the type was registered by a CustomResourceDefinition.
    pub custom: bool,
}

impl ResourceType {
    fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            id: ResourceId::new(group, plural),
            version: version.to_string(),
            kind: kind.to_string(),
            singular: kind.to_lowercase(),
            short_names: Vec::new(),
            namespaced,
            status_subresource: false,
            scale: None,
            printer_columns: Vec::new(),
            schema: None,
            custom: false,
        }
    }

    fn short(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(ToString::to_string).collect();
        self
    }

    fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.id.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.id.group, self.version)
        }
    }

    /// Whether writes bump `metadata.generation` (custom resources do, on spec changes).
    pub fn tracks_generation(&self) -> bool {
        self.custom
    }
}

/// Resource types by id, plus lookup by kind.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    types: BTreeMap<ResourceId, Arc<ResourceType>>,
}

/// The `events` resource of `events.k8s.io`, stored as core `events` (see `apiserver::events`).
pub fn events_k8s_io() -> ResourceId {
    ResourceId::new("events.k8s.io", "events")
}

impl Registry {
    /// The built-in resources every simulated cluster serves.
    pub fn builtin() -> Self {
        let types = [
            ResourceType::builtin("", "v1", "Pod", "pods", true)
                .short(&["po"])
                .with_status(),
            ResourceType::builtin("", "v1", "Service", "services", true)
                .short(&["svc"])
                .with_status(),
            ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true).short(&["cm"]),
            ResourceType::builtin("", "v1", "Secret", "secrets", true),
            ResourceType::builtin("", "v1", "ServiceAccount", "serviceaccounts", true)
                .short(&["sa"]),
            ResourceType::builtin("", "v1", "Event", "events", true).short(&["ev"]),
            ResourceType::builtin("", "v1", "Node", "nodes", false)
                .short(&["no"])
                .with_status(),
            ResourceType::builtin("", "v1", "Namespace", "namespaces", false)
                .short(&["ns"])
                .with_status(),
            ResourceType::builtin("events.k8s.io", "v1", "Event", "events", true).short(&["ev"]),
            ResourceType::builtin("coordination.k8s.io", "v1", "Lease", "leases", true),
            ResourceType::builtin("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
            ResourceType::builtin(
                "rbac.authorization.k8s.io",
                "v1",
                "RoleBinding",
                "rolebindings",
                true,
            ),
            ResourceType::builtin(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRole",
                "clusterroles",
                false,
            ),
            ResourceType::builtin(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRoleBinding",
                "clusterrolebindings",
                false,
            ),
            ResourceType::builtin("batch", "v1", "Job", "jobs", true).with_status(),
            ResourceType::builtin(
                "autoscaling",
                "v2",
                "HorizontalPodAutoscaler",
                "horizontalpodautoscalers",
                true,
            )
            .short(&["hpa"])
            .with_status(),
            ResourceType::builtin("apps", "v1", "Deployment", "deployments", true)
                .short(&["deploy"])
                .with_status(),
            ResourceType::builtin(
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                true,
            )
            .short(&["pdb"])
            .with_status(),
            ResourceType::builtin(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
            )
            .short(&["crd", "crds"])
            .with_status(),
        ];
        Self {
            types: types
                .into_iter()
                .map(|t| (t.id.clone(), Arc::new(t)))
                .collect(),
        }
    }

    /// The type with `id`, if served.
    pub fn get(&self, id: &ResourceId) -> Option<&Arc<ResourceType>> {
        self.types.get(id)
    }

    /// Every served type, ordered by group and plural.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
    }

    /// Adds or replaces a type (a CRD was created or changed).
    pub fn insert(&mut self, resource: ResourceType) {
        self.types.insert(resource.id.clone(), Arc::new(resource));
    }

    /// Removes a custom type (its CRD was deleted).
    pub fn remove(&mut self, id: &ResourceId) {
        if self.types.get(id).is_some_and(|t| t.custom) {
            self.types.remove(id);
        }
    }
}

/// Reads a dotted JSON path such as `.status.replicaStatuses.Worker.active` from `object`.
/// Supports the `[-1:]`/`[n]` list suffixes printer columns use.
pub fn read_json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = object;
    for segment in path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
    {
        let (field, index) = match segment.split_once('[') {
            Some((field, rest)) => (field, Some(rest.trim_end_matches(']'))),
            None => (segment, None),
        };
        if !field.is_empty() {
            current = current.get(field)?;
        }
        if let Some(index) = index {
            let items = current.as_array()?;
            current = match index {
                "-1:" | "-1" => items.last()?,
                n => items.get(n.parse::<usize>().ok()?)?,
            };
        }
    }
    Some(current)
}

/// Writes `value` at a dotted JSON path, creating intermediate objects.
pub fn write_json_path(object: &mut Value, path: &str, value: Value) {
    let segments: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut current = object;
    for (index, segment) in segments.iter().enumerate() {
        if !current.is_object() {
            *current = Value::Object(Default::default());
        }
        let map = current.as_object_mut().expect("made an object above");
        if index + 1 == segments.len() {
            map.insert((*segment).to_string(), value);
            return;
        }
        current = map
            .entry((*segment).to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_paths_read_fields_and_list_ends() {
        let object = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}], "n": 3}});
        assert_eq!(read_json_path(&object, ".status.n"), Some(&json!(3)));
        assert_eq!(
            read_json_path(&object, ".status.conditions[-1:].type"),
            Some(&json!("B"))
        );
        assert_eq!(
            read_json_path(&object, ".status.conditions[0].type"),
            Some(&json!("A"))
        );
        assert_eq!(read_json_path(&object, ".status.missing"), None);
    }

    #[test]
    fn json_paths_write_through_missing_objects() {
        let mut object = json!({"spec": {}});
        write_json_path(&mut object, ".spec.worker.replicas", json!(4));
        assert_eq!(object, json!({"spec": {"worker": {"replicas": 4}}}));
    }
}
