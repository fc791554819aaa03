//! What kube-apiserver does specially for some built-in types: pod defaults and spec
//! immutability, Job defaults and selectors, HorizontalPodAutoscaler defaults and bounds,
//! service cluster IPs, namespace life cycle, the
//! limits of Events, CustomResourceDefinition registration, and the garbage collector's
//! bookkeeping.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::errors::{ApiError, Cause};
use crate::options::{DeleteOptions, Subresource, WriteOptions, timestamp_now};
use crate::resources::{PrinterColumn, ResourceId, ResourceType, ScalePaths};
use crate::schema::CompiledCrdSchema;
use crate::store::{ObjectKey, State};
use crate::validation::{pod as pod_rules, syntax};

fn is(resource: &ResourceType, group: &str, plural: &str) -> bool {
    resource.id.group == group && resource.id.plural == plural
}

fn invalid(resource: &ResourceType, object: &Value, causes: Vec<Cause>) -> ApiError {
    ApiError::Invalid {
        group: resource.id.group.clone(),
        kind: resource.kind.clone(),
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        causes,
    }
}

/// Type-specific defaults and checks of a write, after the generic metadata handling.
pub fn admit(
    state: &State,
    resource: &ResourceType,
    old: Option<&Value>,
    object: &mut Value,
) -> Result<(), ApiError> {
    if is(resource, "", "pods") {
        admit_pod(resource, old, object)
    } else if is(resource, "", "services") {
        admit_service(state, resource, old, object)
    } else if is(resource, "batch", "jobs") {
        admit_job(resource, old, object)
    } else if is(resource, "", "namespaces") {
        if old.is_none() {
            object["spec"]["finalizers"] = json!(["kubernetes"]);
            object["status"]["phase"] = json!("Active");
        }
        // As kube-apiserver's admission: a label naming the namespace, always.
        let name = object["metadata"]["name"].clone();
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        Ok(())
    } else if is(resource, "", "events") {
        admit_event(resource, object)
    } else if is(resource, "", "secrets") {
        if object["type"].as_str().is_none_or(str::is_empty) {
            object["type"] = json!("Opaque");
        }
        Ok(())
    } else if is(resource, "autoscaling", "horizontalpodautoscalers") {
        admit_autoscaler(resource, object)
    } else if is(
        resource,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ) {
        let established = is_established(object)
            || old.is_some_and(is_established)
            || state.crd_establish_delay.is_zero();
        admit_crd(resource, object, established).map(drop)
    } else {
        Ok(())
    }
}

/// The longest note (core: `message`) of an Event with an `eventTime`, in bytes.
const EVENT_NOTE_LIMIT: usize = 1024;
/// The longest `reportingInstance`, `action` and `reason` of such an Event, in bytes.
const EVENT_FIELD_LIMIT: usize = 128;

/// kube-apiserver's checks of an Event written the new way, with an `eventTime` (every
/// `events.k8s.io/v1` Event is): who reported it, what it did and why are required and short,
/// and its note is at most 1,024 bytes. `event` is in its stored (core `v1`) form, so the
/// fields carry their core names, as kube-apiserver's messages do.
fn admit_event(resource: &ResourceType, event: &Value) -> Result<(), ApiError> {
    if event["eventTime"].is_null() {
        return Ok(());
    }
    let text = |field: &str| event[field].as_str().unwrap_or_default();
    let mut causes = Vec::new();
    let controller = text("reportingComponent");
    if controller.is_empty() {
        causes.push(Cause::required("reportingComponent"));
    } else if !syntax::qualified_name(controller).is_empty() {
        causes.push(Cause::invalid(
            "reportingComponent",
            format!("Invalid value: {controller:?}: must be a qualified name"),
        ));
    }
    // (field, required, longest)
    for (field, required, limit) in [
        ("reportingInstance", true, EVENT_FIELD_LIMIT),
        ("action", true, EVENT_FIELD_LIMIT),
        ("reason", true, EVENT_FIELD_LIMIT),
        ("message", false, EVENT_NOTE_LIMIT),
    ] {
        let value = text(field);
        if required && value.is_empty() {
            causes.push(Cause::required(field));
        } else if value.len() > limit {
            causes.push(Cause::invalid(
                field,
                format!("Invalid value: \"\": can have at most {limit} characters"),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(resource, event, causes))
    }
}

/// kube-apiserver's defaults and checks of an autoscaling/v2 HorizontalPodAutoscaler: at
/// least one replica (1 by default), no more than `maxReplicas`, a target with a kind and a
/// name, and 80% CPU when no metric is given. Its metrics are stored as written (the API
/// server's metric rules are not checked here).
fn admit_autoscaler(resource: &ResourceType, hpa: &mut Value) -> Result<(), ApiError> {
    let spec = &mut hpa["spec"];
    if spec["minReplicas"].is_null() {
        spec["minReplicas"] = json!(1);
    }
    if spec["metrics"].as_array().is_none_or(Vec::is_empty) {
        spec["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]);
    }
    let min = spec["minReplicas"].as_i64().unwrap_or_default();
    let max = spec["maxReplicas"].as_i64().unwrap_or_default();
    let mut causes = Vec::new();
    if min < 1 {
        causes.push(Cause::invalid(
            "spec.minReplicas",
            format!("Invalid value: {min}: must be greater than or equal to 1"),
        ));
    }
    if max < min {
        causes.push(Cause::invalid(
            "spec.maxReplicas",
            format!("Invalid value: {max}: must be greater than or equal to `minReplicas`"),
        ));
    }
    for field in ["kind", "name"] {
        if spec["scaleTargetRef"][field]
            .as_str()
            .is_none_or(str::is_empty)
        {
            causes.push(Cause::required(format!("spec.scaleTargetRef.{field}")));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(resource, hpa, causes))
    }
}

fn admit_pod(
    resource: &ResourceType,
    old: Option<&Value>,
    pod: &mut Value,
) -> Result<(), ApiError> {
    let Some(old) = old else {
        let spec = &mut pod["spec"];
        for (field, default) in [
            ("restartPolicy", json!("Always")),
            ("schedulerName", json!("default-scheduler")),
            ("dnsPolicy", json!("ClusterFirst")),
            ("terminationGracePeriodSeconds", json!(30)),
            ("enableServiceLinks", json!(true)),
        ] {
            if spec.get(field).is_none_or(Value::is_null) {
                spec[field] = default;
            }
        }
        for container in spec["containers"].as_array_mut().into_iter().flatten() {
            if container.get("imagePullPolicy").is_none() {
                let latest = container["image"]
                    .as_str()
                    .is_some_and(|image| !image.contains(':') || image.ends_with(":latest"));
                container["imagePullPolicy"] =
                    json!(if latest { "Always" } else { "IfNotPresent" });
            }
        }
        pod_rules::default(pod);
        let causes = pod_rules::validate(pod);
        if !causes.is_empty() {
            return Err(invalid(resource, pod, causes));
        }
        pod["status"] = json!({"phase": "Pending"});
        return Ok(());
    };
    // Only images, activeDeadlineSeconds and added tolerations may change in a pod's spec,
    // and `nodeName` once (kube-apiserver takes it through the `binding` subresource only).
    let binding = old["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .is_empty();
    let masked = |spec: &Value| {
        let mut spec = spec.clone();
        for list in ["containers", "initContainers"] {
            for container in spec[list].as_array_mut().into_iter().flatten() {
                if let Some(container) = container.as_object_mut() {
                    container.remove("image");
                }
            }
        }
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("activeDeadlineSeconds");
            spec.remove("tolerations");
            if binding {
                spec.remove("nodeName");
            }
        }
        spec
    };
    if masked(&pod["spec"]) != masked(&old["spec"]) {
        return Err(invalid(resource, pod, vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, \
                      `spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` \
                      (only additions to existing tolerations)"
                .into(),
            field: "spec".into(),
        }]));
    }
    Ok(())
}

fn admit_service(
    state: &State,
    resource: &ResourceType,
    old: Option<&Value>,
    service: &mut Value,
) -> Result<(), ApiError> {
    let old_ip = old
        .and_then(|old| old["spec"]["clusterIP"].as_str())
        .map(String::from);
    match (&old_ip, service["spec"]["clusterIP"].as_str()) {
        (Some(old_ip), Some(new_ip)) if old_ip != new_ip => {
            return Err(invalid(
                resource,
                service,
                vec![Cause::invalid(
                    "spec.clusterIP",
                    format!("Invalid value: {new_ip:?}: field is immutable"),
                )],
            ));
        }
        (Some(old_ip), None) => service["spec"]["clusterIP"] = json!(old_ip),
        (None, None | Some("")) => {
            let n = state.resource_version() + 1;
            service["spec"]["clusterIP"] =
                json!(format!("10.96.{}.{}", (n / 250) % 250, n % 250 + 1));
        }
        _ => {}
    }
    let ip = service["spec"]["clusterIP"].clone();
    service["spec"]["clusterIPs"] = json!([ip]);
    if service["spec"].get("type").is_none() {
        service["spec"]["type"] = json!("ClusterIP");
    }
    if service["spec"].get("sessionAffinity").is_none() {
        service["spec"]["sessionAffinity"] = json!("None");
    }
    // The defaults of a single-stack IPv4 cluster.
    if service["spec"]["type"] != "ExternalName" {
        let spec = &mut service["spec"];
        if spec.get("ipFamilies").is_none() {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
        if spec.get("ipFamilyPolicy").is_none() {
            let headless_without_selector = spec["clusterIP"] == "None"
                && spec["selector"].as_object().is_none_or(Map::is_empty);
            spec["ipFamilyPolicy"] = json!(if headless_without_selector {
                "RequireDualStack"
            } else {
                "SingleStack"
            });
        }
        if spec.get("internalTrafficPolicy").is_none() {
            spec["internalTrafficPolicy"] = json!("Cluster");
        }
    }
    if service["status"].get("loadBalancer").is_none() {
        service["status"]["loadBalancer"] = json!({});
    }
    for port in service["spec"]["ports"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if port.get("protocol").is_none() {
            port["protocol"] = json!("TCP");
        }
        if port.get("targetPort").is_none() {
            port["targetPort"] = port["port"].clone();
        }
    }
    Ok(())
}

/// A new Job gets kube-apiserver's defaults: a selector on its own uid (unless
/// `manualSelector`), the labels that selector and `kubectl logs job/<name>` rely on in its
/// template, and the defaults of its counts and policies. Its pods must not restart in place,
/// and its pod template cannot change afterwards.
fn admit_job(
    resource: &ResourceType,
    old: Option<&Value>,
    job: &mut Value,
) -> Result<(), ApiError> {
    if let Some(old) = old {
        if old["spec"]["template"] != job["spec"]["template"] && old["spec"]["suspend"] != true {
            return Err(invalid(
                resource,
                job,
                vec![Cause::invalid(
                    "spec.template",
                    "Invalid value: field is immutable",
                )],
            ));
        }
        return Ok(());
    }
    let restart_policy = job["spec"]["template"]["spec"]["restartPolicy"].as_str();
    if !matches!(restart_policy, Some("Never" | "OnFailure")) {
        return Err(invalid(
            resource,
            job,
            vec![Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {:?}: supported values: \"OnFailure\", \"Never\"",
                    restart_policy.unwrap_or_default()
                ),
                field: "spec.template.spec.restartPolicy".into(),
            }],
        ));
    }
    let uid = job["metadata"]["uid"].clone();
    let name = job["metadata"]["name"].clone();
    if job["spec"]["manualSelector"] != true {
        job["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
        let labels = &mut job["spec"]["template"]["metadata"]["labels"];
        for (key, value) in [
            ("batch.kubernetes.io/controller-uid", &uid),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("job-name", &name),
        ] {
            labels[key] = value.clone();
        }
    }
    let spec = &mut job["spec"];
    for (field, default) in [
        ("parallelism", json!(1)),
        ("completions", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
    ] {
        if spec.get(field).is_none_or(Value::is_null) {
            spec[field] = default;
        }
    }
    Ok(())
}

/// Whether a CRD's `Established` condition holds: the API server serves its resource.
fn is_established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

/// Checks a CRD and sets its status, `Established` or not yet; returns the resource type it
/// defines.
fn admit_crd(
    resource: &ResourceType,
    crd: &mut Value,
    established: bool,
) -> Result<ResourceType, ApiError> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default().to_string();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default().to_string();
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    let mut causes = Vec::new();
    if group.is_empty() {
        causes.push(Cause::invalid("spec.group", "Required value"));
    }
    if plural.is_empty() || kind.is_empty() {
        causes.push(Cause::invalid(
            "spec.names",
            "Required value: plural and kind are required",
        ));
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    if name != format!("{plural}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let Some(version) = versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true) && v["served"].as_bool() != Some(false))
        .cloned()
    else {
        causes.push(Cause::invalid(
            "spec.versions",
            "Invalid value: one served version must be the storage version",
        ));
        return Err(invalid(resource, crd, causes));
    };
    let schema = version["schema"]["openAPIV3Schema"].clone();
    if !schema.is_object() {
        causes.push(Cause::invalid(
            "spec.versions[0].schema.openAPIV3Schema",
            "Required value: schemas are required",
        ));
    }
    let compiled = match CompiledCrdSchema::compile(schema) {
        Ok(compiled) => Some(compiled),
        Err(errors) => {
            causes.extend(errors.into_iter().map(|error| {
                Cause::invalid(
                    "spec.validation.openAPIV3Schema",
                    format!("Invalid value: compilation failed: {error}"),
                )
            }));
            None
        }
    };
    if !causes.is_empty() {
        return Err(invalid(resource, crd, causes));
    }
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    let subresources = &version["subresources"];
    let scale = subresources
        .get("scale")
        .filter(|s| s.is_object())
        .map(|scale| ScalePaths {
            spec_replicas: scale["specReplicasPath"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            status_replicas: scale["statusReplicasPath"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            label_selector: scale["labelSelectorPath"].as_str().map(String::from),
        });
    let printer_columns = version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|column| PrinterColumn {
            name: column["name"].as_str().unwrap_or_default().to_string(),
            type_: column["type"].as_str().unwrap_or("string").to_string(),
            json_path: column["jsonPath"].as_str().unwrap_or_default().to_string(),
            description: column["description"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            priority: column["priority"].as_i64().unwrap_or(0) as i32,
        })
        .collect();
    let defined = ResourceType {
        id: ResourceId::new(&group, &plural),
        version: version["name"].as_str().unwrap_or("v1").to_string(),
        kind,
        singular: names["singular"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| names["kind"].as_str().unwrap_or_default().to_lowercase()),
        short_names: strings(&names["shortNames"]),
        namespaced: spec["scope"].as_str() != Some("Cluster"),
        status_subresource: subresources.get("status").is_some_and(Value::is_object),
        scale,
        printer_columns,
        schema: compiled.map(Arc::new),
        custom: true,
    };
    let now = timestamp_now();
    let condition = |type_: &str, holds: bool, reason: &str, message: &str| json!({"type": type_, "status": if holds { "True" } else { "False" }, "reason": reason, "message": message, "lastTransitionTime": now});
    let established = if established {
        condition(
            "Established",
            true,
            "InitialNamesAccepted",
            "the initial names have been accepted",
        )
    } else {
        condition(
            "Established",
            false,
            "Installing",
            "the initial names have been accepted",
        )
    };
    crd["status"] = json!({
        "acceptedNames": names,
        "conditions": [
            condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
            established,
        ],
        "storedVersions": [version["name"]],
    });
    Ok(defined)
}

/// Effects of a stored write: an established CRD (re)defines its resource type; one not yet
/// established is established [`State::crd_establish_delay`] later (see [`establish_due`]).
pub fn after_write(state: &mut State, resource: &ResourceType, stored: &Value) {
    if is(
        resource,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ) && stored["metadata"].get("deletionTimestamp").is_none()
    {
        let established = is_established(stored);
        let mut crd = stored.clone();
        if let Ok(defined) = admit_crd(resource, &mut crd, established) {
            let name = stored["metadata"]["name"].as_str().unwrap_or_default();
            if established {
                state.establishing.remove(name);
                state.registry.insert(defined);
            } else {
                let due = std::time::Instant::now() + state.crd_establish_delay;
                state.establishing.entry(name.to_string()).or_insert(due);
            }
        }
    }
}

/// What kube-apiserver's establishing controller does: sets `Established` on the CRDs whose
/// time has come, which makes their resources served. Returns when the next one is due.
pub fn establish_due(state: &mut State, now: std::time::Instant) -> Option<std::time::Instant> {
    let due: Vec<String> = state
        .establishing
        .iter()
        .filter(|(_, at)| **at <= now)
        .map(|(name, _)| name.clone())
        .collect();
    let crds = ResourceId::new("apiextensions.k8s.io", "customresourcedefinitions");
    for name in due {
        state.establishing.remove(&name);
        let Some(resource) = state.registry.get(&crds).cloned() else {
            continue;
        };
        let Ok(crd) = state.fetch(&resource, "", &name) else {
            continue;
        };
        let mut established = (*crd).clone();
        let conditions = established["status"]["conditions"]
            .as_array_mut()
            .into_iter()
            .flatten();
        for condition in conditions.filter(|c| c["type"] == "Established") {
            condition["status"] = json!("True");
            condition["reason"] = json!("InitialNamesAccepted");
        }
        let _ = state.replace(
            &resource,
            "",
            &name,
            established,
            Some(Subresource::Status),
            &WriteOptions::internal("apiextensions-apiserver"),
        );
    }
    state.establishing.values().min().copied()
}

/// Effects of a removal: dependents are queued for garbage collection, and a CRD takes its
/// objects and its resource type with it.
pub fn after_remove(state: &mut State, resource: &ResourceType, removed: &Value) {
    if let Some(uid) = removed["metadata"]["uid"].as_str() {
        state.gc_queue.push(uid.to_string());
    }
    if is(
        resource,
        "apiextensions.k8s.io",
        "customresourcedefinitions",
    ) {
        let group = removed["spec"]["group"].as_str().unwrap_or_default();
        let plural = removed["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default();
        let id = ResourceId::new(group, plural);
        let keys: Vec<ObjectKey> = state.list(&id, None).map(|(key, _)| key.clone()).collect();
        for key in keys {
            if let Some(object) = state.remove(&id, &key)
                && let Some(uid) = object["metadata"]["uid"].as_str()
            {
                state.gc_queue.push(uid.to_string());
            }
        }
        state.drop_resource(&id);
        state.registry.remove(&id);
        if let Some(name) = removed["metadata"]["name"].as_str() {
            state.establishing.remove(name);
        }
    }
}

/// The grace period of a delete: pods that run on a node get theirs (the request's, else
/// `terminationGracePeriodSeconds`); everything else goes at once.
pub fn grace_period(resource: &ResourceType, object: &Value, requested: Option<i64>) -> i64 {
    if !is(resource, "", "pods")
        || object["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    {
        return 0;
    }
    requested
        .or_else(|| object["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0)
}

/// Whether a delete only marks the object: namespaces wait for their contents to go.
pub fn holds_deletion(resource: &ResourceType, object: &Value) -> bool {
    is(resource, "", "namespaces")
        && object["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
}

/// Marks an object whose deletion started: namespaces become `Terminating`, and the
/// collector is told about namespaces and foreground deletions it has to finish.
pub fn deletion_started(state: &mut State, resource: &ResourceType, object: &mut Value) {
    let foreground = object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.contains(&json!("foregroundDeletion")));
    if is(resource, "", "namespaces") {
        object["status"]["phase"] = json!("Terminating");
    }
    if (is(resource, "", "namespaces") || foreground)
        && let Some(uid) = object["metadata"]["uid"].as_str()
    {
        state.gc_queue.push(uid.to_string());
    }
}

fn owner_uids(object: &Value) -> Vec<&str> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|reference| reference["uid"].as_str())
        .collect()
}

fn without_owners(object: &Value, doomed: &dyn Fn(&str) -> bool) -> Value {
    let mut updated = object.clone();
    if let Some(references) = updated["metadata"]["ownerReferences"].as_array_mut() {
        references.retain(|reference| !reference["uid"].as_str().is_some_and(doomed));
    }
    if updated["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(Vec::is_empty)
        && let Some(metadata) = updated["metadata"].as_object_mut()
    {
        metadata.remove("ownerReferences");
    }
    updated
}

/// `propagationPolicy: Orphan`: the dependents of `owner` lose their reference to it.
pub fn orphan_dependents(state: &mut State, owner: &Value) {
    let Some(uid) = owner["metadata"]["uid"].as_str() else {
        return;
    };
    let dependents: Vec<(ResourceId, ObjectKey, Arc<Value>)> = state
        .all_objects()
        .filter(|(_, _, object)| owner_uids(object).contains(&uid))
        .map(|(id, key, object)| (id.clone(), key.clone(), Arc::clone(object)))
        .collect();
    for (id, key, object) in dependents {
        let Ok(resource) = state.resource(&id) else {
            continue;
        };
        let updated = without_owners(&object, &|u| u == uid);
        let _ = state.replace(
            &resource,
            &key.namespace,
            &key.name,
            updated,
            None,
            &WriteOptions::internal("generic-garbage-collector"),
        );
    }
}

/// One pass of the garbage and namespace collectors: deletes objects whose owners are all
/// gone (and drops dangling references of objects that keep another owner), finishes
/// foreground deletions whose dependents are gone, and empties then removes terminating
/// namespaces. Returns whether it wrote anything.
///
/// Passes run when [`State::gc_queue`] is not empty: removals, namespace deletions and
/// foreground deletions queue uids there.
pub fn collect_garbage(state: &mut State) -> bool {
    let mut changed = false;
    state.gc_queue.clear();
    let gc = WriteOptions::internal("generic-garbage-collector");

    // Dependents whose owners are gone.
    let orphans: Vec<(ResourceId, ObjectKey, Arc<Value>)> = state
        .all_objects()
        .filter(|(_, _, object)| {
            let owners = owner_uids(object);
            !owners.is_empty() && owners.iter().any(|uid| state.locate_uid(uid).is_none())
        })
        .map(|(id, key, object)| (id.clone(), key.clone(), Arc::clone(object)))
        .collect();
    for (id, key, object) in orphans {
        let Ok(resource) = state.resource(&id) else {
            continue;
        };
        let live_owner = owner_uids(&object)
            .iter()
            .any(|uid| state.locate_uid(uid).is_some());
        if live_owner {
            let updated = without_owners(&object, &|uid| state.locate_uid(uid).is_none());
            changed |= state
                .replace(&resource, &key.namespace, &key.name, updated, None, &gc)
                .is_ok();
        } else if object["metadata"].get("deletionTimestamp").is_none() {
            changed |= state
                .delete(
                    &resource,
                    &key.namespace,
                    &key.name,
                    &DeleteOptions::default(),
                )
                .is_ok();
        }
    }

    // Foreground deletions.
    let waiting: Vec<(ResourceId, ObjectKey, Arc<Value>)> = state
        .all_objects()
        .filter(|(_, _, object)| {
            object["metadata"]["finalizers"]
                .as_array()
                .is_some_and(|f| f.contains(&json!("foregroundDeletion")))
                && object["metadata"].get("deletionTimestamp").is_some()
        })
        .map(|(id, key, object)| (id.clone(), key.clone(), Arc::clone(object)))
        .collect();
    for (id, key, owner) in waiting {
        let uid = owner["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let dependents: Vec<(ResourceId, ObjectKey, bool)> = state
            .all_objects()
            .filter(|(_, _, object)| owner_uids(object).contains(&uid.as_str()))
            .map(|(id, key, object)| {
                (
                    id.clone(),
                    key.clone(),
                    object["metadata"].get("deletionTimestamp").is_some(),
                )
            })
            .collect();
        if dependents.is_empty() {
            let Ok(resource) = state.resource(&id) else {
                continue;
            };
            let mut updated = (*owner).clone();
            if let Some(finalizers) = updated["metadata"]["finalizers"].as_array_mut() {
                finalizers.retain(|f| f != "foregroundDeletion");
            }
            changed |= state
                .replace(&resource, &key.namespace, &key.name, updated, None, &gc)
                .is_ok();
        }
        for (dependent_id, dependent_key, deleting) in dependents {
            if deleting {
                continue;
            }
            let Ok(resource) = state.resource(&dependent_id) else {
                continue;
            };
            let options = DeleteOptions {
                propagation: crate::options::Propagation::Foreground,
                ..Default::default()
            };
            changed |= state
                .delete(
                    &resource,
                    &dependent_key.namespace,
                    &dependent_key.name,
                    &options,
                )
                .is_ok();
        }
    }

    // Terminating namespaces.
    let namespaces_id = ResourceId::new("", "namespaces");
    let terminating: Vec<ObjectKey> = state
        .list(&namespaces_id, None)
        .filter(|(_, namespace)| namespace["metadata"].get("deletionTimestamp").is_some())
        .map(|(key, _)| key.clone())
        .collect();
    for key in terminating {
        let contents: Vec<(Arc<ResourceType>, ObjectKey, bool)> = state
            .all_objects()
            .filter(|(_, object_key, _)| object_key.namespace == key.name)
            .filter_map(|(id, object_key, object)| {
                let resource = state.registry.get(id)?.clone();
                Some((
                    resource,
                    object_key.clone(),
                    object["metadata"].get("deletionTimestamp").is_some(),
                ))
            })
            .collect();
        if contents.is_empty() {
            let Ok(resource) = state.resource(&namespaces_id) else {
                continue;
            };
            changed |= state.remove_object(&resource, &key).is_some();
            continue;
        }
        for (resource, object_key, deleting) in contents {
            if !deleting {
                changed |= state
                    .delete(
                        &resource,
                        &object_key.namespace,
                        &object_key.name,
                        &DeleteOptions::default(),
                    )
                    .is_ok();
            }
        }
    }
    changed
}
