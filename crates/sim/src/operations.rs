//! The API verbs with kube-apiserver's semantics, independent of HTTP.
//!
//! Every write goes through `State::write`: preconditions, subresource rules (a write to
//! `/status` changes only `status`, a write to the main resource never changes `status`),
//! type-specific defaults and checks (see [`crate::builtin`]), schema validation of custom
//! objects, `generation`, `managedFields`, deletion once the last finalizer is gone, and
//! no-op detection: a write that changes nothing keeps the resourceVersion and emits no
//! watch event.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::builtin;
use crate::errors::{ApiError, Cause};
use crate::merge::fieldset::{BuiltinListTypes, ListTypes, SchemaListTypes};
use crate::merge::managed::{self, Writer};
use crate::merge::patch::{self, PatchType};
use crate::options::{
    DeleteOptions, FieldValidation, Propagation, Subresource, WriteOptions, Written,
    format_timestamp, timestamp_now,
};
use crate::resources::{ResourceId, ResourceType, read_json_path, write_json_path};
use crate::store::{ObjectKey, State};
use crate::validation;

/// List types of `resource`: from its schema for custom resources, built-in rules otherwise.
pub fn list_types(resource: &ResourceType) -> Box<dyn ListTypes + '_> {
    match &resource.schema {
        Some(schema) => Box::new(SchemaListTypes(&schema.schema)),
        None => Box::new(BuiltinListTypes),
    }
}

fn namespace_of(resource: &ResourceType, namespace: &str) -> String {
    if resource.namespaced {
        namespace.to_string()
    } else {
        String::new()
    }
}

impl State {
    /// The resource type `id`, or NotFound.
    pub fn resource(&self, id: &ResourceId) -> Result<Arc<ResourceType>, ApiError> {
        self.registry
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::NotFound {
                resource: id.clone(),
                name: String::new(),
            })
    }

    /// The stored object, or NotFound.
    pub fn fetch(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        self.get(
            &resource.id,
            &ObjectKey::new(&namespace_of(resource, namespace), name),
        )
        .cloned()
        .ok_or_else(|| ApiError::NotFound {
            resource: resource.id.clone(),
            name: name.to_string(),
        })
    }

    fn require_namespace(&self, resource: &ResourceType, namespace: &str) -> Result<(), ApiError> {
        if resource.namespaced
            && self
                .get(
                    &ResourceId::new("", "namespaces"),
                    &ObjectKey::new("", namespace),
                )
                .is_none()
        {
            return Err(ApiError::NotFound {
                resource: ResourceId::new("", "namespaces"),
                name: namespace.to_string(),
            });
        }
        Ok(())
    }

    /// `POST`: creates `body` in `namespace`.
    pub fn create(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        mut body: Value,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let namespace = namespace_of(resource, namespace);
        self.require_namespace(resource, &namespace)?;
        let body_namespace = body["metadata"]["namespace"].as_str().unwrap_or_default();
        if resource.namespaced && !body_namespace.is_empty() && body_namespace != namespace {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        if body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
            && let Some(prefix) = body["metadata"]["generateName"].as_str()
        {
            let suffix: String = uuid::Uuid::new_v4()
                .simple()
                .to_string()
                .chars()
                .take(5)
                .collect();
            body["metadata"]["name"] = Value::String(format!("{prefix}{suffix}"));
        }
        let name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            return Err(invalid(
                resource,
                &name,
                vec![Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into(),
                }],
            ));
        }
        if self
            .get(&resource.id, &ObjectKey::new(&namespace, &name))
            .is_some()
        {
            return Err(ApiError::AlreadyExists {
                resource: resource.id.clone(),
                name,
            });
        }
        self.write(
            resource,
            &namespace,
            &name,
            None,
            body,
            options,
            None,
            ManagedMode::Update,
        )
    }

    /// `PUT`: replaces the object, failing on a stale `metadata.resourceVersion`.
    pub fn replace(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        body: Value,
        subresource: Option<Subresource>,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let old = self.fetch(resource, namespace, name)?;
        check_resource_version(resource, name, &body, &old)?;
        let namespace = namespace_of(resource, namespace);
        self.write(
            resource,
            &namespace,
            name,
            Some(old),
            body,
            options,
            subresource,
            ManagedMode::Update,
        )
    }

    /// `PATCH` with a JSON, merge or strategic merge patch, or a server-side apply
    /// (`force` resolves apply conflicts in the applier's favour). An apply creates the
    /// object when it is missing.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &Value,
        subresource: Option<Subresource>,
        options: &WriteOptions,
        force: bool,
    ) -> Result<Written, ApiError> {
        let namespace = namespace_of(resource, namespace);
        let old = self
            .get(&resource.id, &ObjectKey::new(&namespace, name))
            .cloned();
        if patch_type == PatchType::Apply {
            return self.apply(
                resource,
                &namespace,
                name,
                old,
                body,
                subresource,
                options,
                force,
            );
        }
        let old = old.ok_or_else(|| ApiError::NotFound {
            resource: resource.id.clone(),
            name: name.to_string(),
        })?;
        let view = match subresource {
            Some(Subresource::Scale) => scale_of(resource, &old)?,
            _ => (*old).clone(),
        };
        let patched = match patch_type {
            PatchType::Json => patch::json_patch(&view, body).map_err(|message| {
                if message.contains("test") || message.contains("Test") {
                    ApiError::Invalid {
                        group: resource.id.group.clone(),
                        kind: resource.kind.clone(),
                        name: name.into(),
                        causes: vec![Cause::invalid("", message)],
                    }
                } else {
                    ApiError::BadRequest(message)
                }
            })?,
            PatchType::Merge => patch::merge_patch(&view, body),
            PatchType::Strategic if resource.custom => {
                return Err(ApiError::UnsupportedMediaType(
                    "the body of the request was in an unknown format - accepted media types include: \
                     application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
                        .into(),
                ));
            }
            PatchType::Strategic => patch::strategic_merge_patch(&view, body),
            PatchType::Apply => unreachable!("handled above"),
        };
        let patched = match subresource {
            Some(Subresource::Scale) => with_scale(resource, &old, &patched)?,
            _ => patched,
        };
        check_resource_version(resource, name, &patched, &old)?;
        self.write(
            resource,
            &namespace,
            name,
            Some(old),
            patched,
            options,
            subresource,
            ManagedMode::Update,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        old: Option<Arc<Value>>,
        config: &Value,
        subresource: Option<Subresource>,
        options: &WriteOptions,
        force: bool,
    ) -> Result<Written, ApiError> {
        if !config.is_object() {
            return Err(ApiError::BadRequest(
                "the apply configuration must be an object".into(),
            ));
        }
        let config_name = config["metadata"]["name"].as_str().unwrap_or_default();
        if !config_name.is_empty() && config_name != name {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({config_name}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(old) = &old {
            check_resource_version(resource, name, config, old)?;
        } else {
            self.require_namespace(resource, namespace)?;
        }
        let mut config = config.clone();
        config["metadata"]["name"] = Value::String(name.to_string());
        // What a write through a subresource may touch is all it may own.
        match subresource {
            Some(Subresource::Status) => retain_sections(&mut config, &["status"]),
            _ if resource.status_subresource => {
                if let Some(map) = config.as_object_mut() {
                    map.remove("status");
                }
            }
            _ => {}
        }
        if let (Some(schema), Some(map)) = (&resource.schema, config.as_object_mut())
            && subresource.is_none()
        {
            // Unknown fields are pruned from the configuration before ownership is computed.
            let mut candidate = Value::Object(std::mem::take(map));
            let unknown = schema.prune_unknown(&mut candidate);
            if options.field_validation == FieldValidation::Strict && !unknown.is_empty() {
                return Err(unknown_fields(resource, &unknown));
            }
            *map = candidate.as_object().cloned().unwrap_or_default();
        }
        let lists = list_types(resource);
        let writer = writer(resource, options, subresource);
        let merged = managed::apply(old.as_deref(), &config, &writer, force, lists.as_ref())
            .map_err(|conflicts| {
                let causes: Vec<Cause> = conflicts
                    .iter()
                    .map(|c| Cause {
                        reason: "FieldManagerConflict".into(),
                        message: format!("conflict with {:?}", c.manager),
                        field: c.field.clone(),
                    })
                    .collect();
                let summary: Vec<String> = conflicts
                    .iter()
                    .map(|c| format!("conflict with {:?}: {}", c.manager, c.field))
                    .collect();
                ApiError::Conflict {
                    resource: resource.id.clone(),
                    name: name.to_string(),
                    message: format!(
                        "Apply failed with {} conflict(s): {}",
                        conflicts.len(),
                        summary.join(", ")
                    ),
                    causes,
                }
            })?;
        self.write(
            resource,
            namespace,
            name,
            old,
            merged,
            options,
            subresource,
            ManagedMode::AlreadyRecorded,
        )
    }

    /// The core of every write; see the module documentation.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        old: Option<Arc<Value>>,
        mut object: Value,
        options: &WriteOptions,
        subresource: Option<Subresource>,
        managed_mode: ManagedMode,
    ) -> Result<Written, ApiError> {
        let mut warnings = Vec::new();
        if !object.is_object() {
            return Err(ApiError::BadRequest(
                "the object must be a JSON object".into(),
            ));
        }
        object["apiVersion"] = Value::String(resource.api_version());
        object["kind"] = Value::String(resource.kind.clone());
        if !object["metadata"].is_object() {
            object["metadata"] = json!({});
        }
        // Subresource rules.
        match (&old, subresource) {
            (Some(old), Some(Subresource::Status)) => {
                let status = object.get("status").cloned();
                let managed_fields = object["metadata"].get("managedFields").cloned();
                object = (**old).clone();
                match status {
                    Some(status) => object["status"] = status,
                    None => {
                        if let Some(map) = object.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
                if let Some(managed_fields) = managed_fields {
                    object["metadata"]["managedFields"] = managed_fields;
                }
            }
            (Some(old), _) if resource.status_subresource => match old.get("status") {
                Some(status) => object["status"] = status.clone(),
                None => {
                    if let Some(map) = object.as_object_mut() {
                        map.remove("status");
                    }
                }
            },
            (None, _) if resource.status_subresource => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
            _ => {}
        }
        // Server-owned metadata.
        let metadata = object["metadata"]
            .as_object_mut()
            .expect("set to an object above");
        metadata.insert("name".into(), Value::String(name.to_string()));
        if resource.namespaced {
            metadata.insert("namespace".into(), Value::String(namespace.to_string()));
        } else {
            metadata.remove("namespace");
        }
        metadata.remove("resourceVersion");
        metadata.remove("selfLink");
        match &old {
            Some(old) => {
                for field in [
                    "uid",
                    "creationTimestamp",
                    "generation",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                ] {
                    match old["metadata"].get(field) {
                        Some(value) => metadata.insert(field.into(), value.clone()),
                        None => metadata.remove(field),
                    };
                }
            }
            None => {
                metadata.insert(
                    "uid".into(),
                    Value::String(uuid::Uuid::new_v4().to_string()),
                );
                metadata.insert("creationTimestamp".into(), Value::String(timestamp_now()));
                for field in [
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ] {
                    metadata.remove(field);
                }
                if resource.tracks_generation() {
                    metadata.insert("generation".into(), json!(1));
                }
            }
        }
        check_metadata(resource, name, &object)?;

        builtin::admit(self, resource, old.as_deref(), &mut object)?;

        if let Some(schema) = &resource.schema {
            let unknown = schema.normalize(&mut object);
            if !unknown.is_empty() {
                match options.field_validation {
                    FieldValidation::Strict => return Err(unknown_fields(resource, &unknown)),
                    FieldValidation::Warn => {
                        warnings.extend(
                            unknown
                                .iter()
                                .map(|field| format!("unknown field {field:?}")),
                        );
                    }
                    FieldValidation::Ignore => {}
                }
            }
            let causes = schema.validate(&object, old.as_deref());
            if !causes.is_empty() {
                return Err(invalid(resource, name, causes));
            }
        }

        if let Some(old) = &old
            && resource.tracks_generation()
            && spec_of(&object) != spec_of(old)
        {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            object["metadata"]["generation"] = json!(generation);
        }

        if managed_mode == ManagedMode::Update {
            managed::record_update(
                old.as_deref(),
                &mut object,
                &writer(resource, options, subresource),
                list_types(resource).as_ref(),
            );
        }

        let key = ObjectKey::new(namespace, name);
        if let Some(old) = &old {
            // A write that changes nothing is not a write.
            let mut comparable = object.clone();
            comparable["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
            if comparable == **old {
                return Ok(Written {
                    object: Arc::clone(old),
                    removed: false,
                    warnings,
                    created: false,
                });
            }
            let deleting = object["metadata"].get("deletionTimestamp").is_some();
            let finalizers_left = object["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
            if deleting
                && !finalizers_left
                && !builtin::holds_deletion(resource, &object)
                && !builtin::awaits_its_kubelet(resource, &object)
            {
                if options.dry_run {
                    return Ok(Written {
                        object: Arc::new(object),
                        removed: true,
                        warnings,
                        created: false,
                    });
                }
                // Store the final state (so watches see it), then remove it.
                self.put(&resource.id, key.clone(), object);
                let last = self
                    .remove_object(resource, &key)
                    .unwrap_or_else(|| Arc::clone(old));
                return Ok(Written {
                    object: last,
                    removed: true,
                    warnings,
                    created: false,
                });
            }
        }
        if options.dry_run {
            return Ok(Written {
                object: Arc::new(object),
                removed: false,
                warnings,
                created: old.is_none(),
            });
        }
        let stored = self.put(&resource.id, key, object);
        builtin::after_write(self, resource, &stored);
        Ok(Written {
            object: stored,
            removed: false,
            warnings,
            created: old.is_none(),
        })
    }

    /// Removes an object from storage and queues its dependents for garbage collection.
    pub fn remove_object(
        &mut self,
        resource: &ResourceType,
        key: &ObjectKey,
    ) -> Option<Arc<Value>> {
        let removed = self.remove(&resource.id, key)?;
        builtin::after_remove(self, resource, &removed);
        Some(removed)
    }

    /// `DELETE`. Returns the object as it is after the request: with a `deletionTimestamp` when
    /// finalizers or a pod's grace period hold it, or its last state when it is gone (`true`).
    pub fn delete(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let old = self.fetch(resource, namespace, name)?;
        let namespace = namespace_of(resource, namespace);
        if let Some(uid) = &options.uid
            && old["metadata"]["uid"].as_str() != Some(uid.as_str())
        {
            return Err(ApiError::Conflict {
                resource: resource.id.clone(),
                name: name.to_string(),
                message: format!(
                    "Operation cannot be fulfilled on {} {name:?}: Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    resource.id,
                    old["metadata"]["uid"].as_str().unwrap_or_default()
                ),
                causes: Vec::new(),
            });
        }
        if let Some(rv) = &options.resource_version
            && old["metadata"]["resourceVersion"].as_str() != Some(rv.as_str())
        {
            return Err(ApiError::stale(&resource.id, name));
        }
        if options.dry_run {
            return Ok((old, false));
        }
        let key = ObjectKey::new(&namespace, name);
        let mut object = (*old).clone();
        let mut finalizers: Vec<Value> = object["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        match options.propagation {
            Propagation::Orphan => builtin::orphan_dependents(self, &old),
            Propagation::Foreground => {
                let marker = json!("foregroundDeletion");
                if !finalizers.contains(&marker) {
                    finalizers.push(marker);
                }
            }
            Propagation::Background => {}
        }
        let grace = builtin::grace_period(resource, &old, options.grace_period_seconds);
        if finalizers.is_empty() && grace == 0 && !builtin::holds_deletion(resource, &old) {
            let removed = self.remove_object(resource, &key).unwrap_or(old);
            return Ok((removed, true));
        }
        if object["metadata"].get("deletionTimestamp").is_none() {
            let deadline = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(grace);
            object["metadata"]["deletionTimestamp"] = Value::String(format_timestamp(deadline));
            object["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        }
        if !finalizers.is_empty() {
            object["metadata"]["finalizers"] = Value::Array(finalizers);
        }
        builtin::deletion_started(self, resource, &mut object);
        if object == *old {
            return Ok((old, false));
        }
        let stored = self.put(&resource.id, key, object);
        builtin::after_write(self, resource, &stored);
        Ok((stored, false))
    }

    /// The `autoscaling/v1` Scale of a custom object.
    pub fn get_scale(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let object = self.fetch(resource, namespace, name)?;
        scale_of(resource, &object)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ManagedMode {
    /// Record the write as an `Update` by the writer.
    Update,
    /// Server-side apply computed `managedFields` already.
    AlreadyRecorded,
}

/// The writer of a request, as `managedFields` records it.
fn writer(
    resource: &ResourceType,
    options: &WriteOptions,
    subresource: Option<Subresource>,
) -> Writer {
    Writer {
        manager: options.manager.clone(),
        subresource: subresource.map(|s| s.name().to_string()),
        api_version: resource.api_version(),
        now: timestamp_now(),
    }
}

fn invalid(resource: &ResourceType, name: &str, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: resource.id.group.clone(),
        kind: resource.kind.clone(),
        name: name.to_string(),
        causes,
    }
}

fn unknown_fields(resource: &ResourceType, unknown: &[String]) -> ApiError {
    let fields: Vec<String> = unknown
        .iter()
        .map(|field| format!("unknown field {field:?}"))
        .collect();
    ApiError::BadRequest(format!(
        "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
        resource.kind,
        resource.version,
        resource.kind,
        fields.join(", ")
    ))
}

fn retain_sections(object: &mut Value, sections: &[&str]) {
    if let Some(map) = object.as_object_mut() {
        map.retain(|key, _| {
            sections.contains(&key.as_str())
                || matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
        });
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata
                .retain(|key, _| matches!(key.as_str(), "name" | "namespace" | "resourceVersion"));
        }
    }
}

/// Everything but `metadata` and `status`: what bumps `generation`.
fn spec_of(object: &Value) -> Value {
    let mut spec = object.clone();
    if let Some(map) = spec.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    spec
}

fn check_resource_version(
    resource: &ResourceType,
    name: &str,
    body: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    match body["metadata"]["resourceVersion"].as_str() {
        Some(rv) if !rv.is_empty() && Some(rv) != old["metadata"]["resourceVersion"].as_str() => {
            Err(ApiError::stale(&resource.id, name))
        }
        _ => Ok(()),
    }
}

fn check_metadata(resource: &ResourceType, name: &str, object: &Value) -> Result<(), ApiError> {
    let mut causes = Vec::new();
    if let Some(message) = validation::syntax::dns1123_subdomain(name)
        .into_iter()
        .next()
    {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: {message}"),
        ));
    }
    let mut well_typed = true;
    for map in ["labels", "annotations"] {
        if let Some(entries) = object["metadata"].get(map) {
            match entries.as_object() {
                Some(entries) => {
                    for (key, value) in entries {
                        if !value.is_string() {
                            well_typed = false;
                            causes.push(Cause::invalid(
                                format!("metadata.{map}[{key}]"),
                                "Invalid value: must be a string",
                            ));
                        }
                    }
                }
                None if entries.is_null() => {}
                None => {
                    well_typed = false;
                    causes.push(Cause::invalid(
                        format!("metadata.{map}"),
                        "Invalid value: must be a map of strings",
                    ));
                }
            }
        }
    }
    if well_typed {
        let metadata = &object["metadata"];
        validation::metadata::labels(metadata.get("labels"), "metadata.labels", &mut causes);
        validation::metadata::annotations(metadata.get("annotations"), &mut causes);
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(resource, name, causes))
    }
}

/// The `autoscaling/v1` Scale view of a custom object.
fn scale_of(resource: &ResourceType, object: &Value) -> Result<Value, ApiError> {
    let paths = resource.scale.as_ref().ok_or_else(|| ApiError::NotFound {
        resource: resource.id.clone(),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .into(),
    })?;
    let metadata = &object["metadata"];
    let mut scale = json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "uid": metadata["uid"],
            "resourceVersion": metadata["resourceVersion"],
            "creationTimestamp": metadata["creationTimestamp"],
        },
        "spec": {"replicas": read_json_path(object, &paths.spec_replicas).and_then(Value::as_i64).unwrap_or(0)},
        "status": {"replicas": read_json_path(object, &paths.status_replicas).and_then(Value::as_i64).unwrap_or(0)},
    });
    if let Some(selector) = paths
        .label_selector
        .as_deref()
        .and_then(|p| read_json_path(object, p))
        .and_then(Value::as_str)
    {
        scale["status"]["selector"] = Value::String(selector.to_string());
    }
    Ok(scale)
}

/// The object with the desired replicas of a patched or replaced Scale.
pub fn with_scale(
    resource: &ResourceType,
    object: &Value,
    scale: &Value,
) -> Result<Value, ApiError> {
    let paths = resource
        .scale
        .as_ref()
        .ok_or_else(|| ApiError::BadRequest("no scale subresource".into()))?;
    let replicas = scale["spec"]["replicas"].as_i64().ok_or_else(|| {
        invalid(
            resource,
            object["metadata"]["name"].as_str().unwrap_or_default(),
            vec![Cause::invalid(
                "spec.replicas",
                "Invalid value: must be an integer",
            )],
        )
    })?;
    if replicas < 0 {
        return Err(invalid(
            resource,
            object["metadata"]["name"].as_str().unwrap_or_default(),
            vec![Cause::invalid(
                "spec.replicas",
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            )],
        ));
    }
    let mut updated = object.clone();
    write_json_path(&mut updated, &paths.spec_replicas, json!(replicas));
    if let Some(rv) = scale["metadata"]["resourceVersion"].as_str() {
        updated["metadata"]["resourceVersion"] = Value::String(rv.to_string());
    }
    Ok(updated)
}

impl State {
    /// `PUT` of a Scale: sets the desired replicas of a custom object.
    pub fn replace_scale(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        scale: &Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let old = self.fetch(resource, namespace, name)?;
        let updated = with_scale(resource, &old, scale)?;
        check_resource_version(resource, name, &updated, &old)?;
        let namespace = namespace_of(resource, namespace);
        let written = self.write(
            resource,
            &namespace,
            name,
            Some(old),
            updated,
            options,
            Some(Subresource::Scale),
            ManagedMode::Update,
        )?;
        scale_of(resource, &written.object)
    }

    /// The Scale after a write through `/scale`.
    pub fn scale_after(
        &self,
        resource: &ResourceType,
        written: &Written,
    ) -> Result<Value, ApiError> {
        scale_of(resource, &written.object)
    }
}
