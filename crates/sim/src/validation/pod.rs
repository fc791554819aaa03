//! kube-apiserver's validation of a new pod, for the fields an operator writes into one:
//! containers (names, images, environment names, volume mounts), volumes (names, exactly one
//! source; Secret, ConfigMap, downward-API and projected sources with their items, paths and
//! modes), the restart and DNS policies, host name and subdomain, node selector, node affinity
//! (the operators and value counts of label expressions; `matchFields` only on
//! `metadata.name` with exactly one value for `In`/`NotIn`), tolerations, scheduling gates,
//! DNS search paths and the names of the service account, scheduler and priority class.
//!
//! Each rule answers with kube-apiserver's field path and message. Not checked: security
//! contexts, resources, probes, ports, lifecycle hooks, host aliases, topology spread, pod
//! (anti-)affinity, ephemeral containers, and the sources of volume types other than the four
//! above (they are counted, so a second source is still refused).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::field::{
    duplicate, each_invalid, forbidden, invalid, not_found, not_supported, required,
};
use super::metadata::labels;
use super::syntax::{
    dns1123_label, dns1123_subdomain, dns1123_subdomain_with_underscore, env_var_name, label_value,
    qualified_name,
};
use crate::errors::Cause;

/// Volume source fields in the order kube-apiserver counts them: the first one found is the
/// volume's source, each later one is refused.
const VOLUME_SOURCES: [&str; 27] = [
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
];
/// Volume sources kube-apiserver counts after [`VOLUME_SOURCES`].
const LATER_VOLUME_SOURCES: [&str; 3] = ["csi", "ephemeral", "image"];
/// The sources of one projection.
const PROJECTION_SOURCES: [&str; 6] = [
    "secret",
    "configMap",
    "downwardAPI",
    "serviceAccountToken",
    "clusterTrustBundle",
    "podCertificate",
];
/// What a downward-API volume file may show without a subscript.
const DOWNWARD_API_FIELDS: [&str; 5] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];
const FILE_MODE_MESSAGE: &str = "must be a number between 0 and 0777 (octal), both inclusive";
const MAX_DNS_SEARCH_PATHS: usize = 32;
const MAX_DNS_SEARCH_CHARS: usize = 2048;

/// Fills in what kube-apiserver defaults in the parts of a new pod [`validate`] reads: a
/// downward-API field reference's `apiVersion` (`v1`) and the file modes of Secret, ConfigMap,
/// downward-API and projected volumes (`0644`).
pub fn default(pod: &mut Value) {
    let Some(volumes) = pod
        .pointer_mut("/spec/volumes")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for volume in volumes {
        for source in ["secret", "configMap", "downwardAPI", "projected"] {
            if let Some(source) = volume.get_mut(source).and_then(Value::as_object_mut) {
                source.entry("defaultMode").or_insert(json!(0o644));
            }
        }
        if let Some(items) = volume.pointer_mut("/downwardAPI/items") {
            default_api_versions(items);
        }
        for source in volume
            .pointer_mut("/projected/sources")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(items) = source.pointer_mut("/downwardAPI/items") {
                default_api_versions(items);
            }
        }
    }
}

/// Sets `apiVersion: v1` on the field references of downward-API `items` that lack one.
fn default_api_versions(items: &mut Value) {
    for file in items.as_array_mut().into_iter().flatten() {
        if let Some(field_ref) = file.get_mut("fieldRef").and_then(Value::as_object_mut) {
            field_ref.entry("apiVersion").or_insert(json!("v1"));
        }
    }
}

/// Every rule of the module documentation that the new `pod` breaks, after [`default`].
pub fn validate(pod: &Value) -> Vec<Cause> {
    let spec = &pod["spec"];
    let mut causes = Vec::new();
    let volumes = volumes(spec, &mut causes);
    let mut container_names = BTreeSet::new();
    for list in ["containers", "initContainers"] {
        containers(spec, list, &volumes, &mut container_names, &mut causes);
    }
    if spec["containers"].as_array().is_none_or(Vec::is_empty) {
        causes.push(required("spec.containers", ""));
    }
    one_of(
        spec,
        "restartPolicy",
        &["Always", "OnFailure", "Never"],
        &mut causes,
    );
    one_of(
        spec,
        "dnsPolicy",
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        &mut causes,
    );
    labels(spec.get("nodeSelector"), "spec.nodeSelector", &mut causes);
    node_affinity(&spec["affinity"]["nodeAffinity"], &mut causes);
    dns_config(&spec["dnsConfig"], &mut causes);
    scheduling_gates(spec, &mut causes);
    for (field, check) in [
        ("hostname", dns1123_label as fn(&str) -> Vec<String>),
        ("subdomain", dns1123_label),
        ("serviceAccountName", dns1123_subdomain),
        ("schedulerName", dns1123_subdomain),
        ("priorityClassName", dns1123_subdomain),
        ("nodeName", dns1123_subdomain),
    ] {
        if let Some(value) = spec[field].as_str().filter(|v| !v.is_empty()) {
            causes.extend(each_invalid(&format!("spec.{field}"), value, check(value)));
        }
    }
    tolerations(spec, &mut causes);
    causes
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_default()
}

fn one_of(spec: &Value, field: &str, supported: &[&str], causes: &mut Vec<Cause>) {
    if let Some(value) = spec.get(field).filter(|v| !v.is_null())
        && !value.as_str().is_some_and(|v| supported.contains(&v))
    {
        causes.push(not_supported(&format!("spec.{field}"), value, supported));
    }
}

fn mode(source: &Value, field: &str, path: &str, causes: &mut Vec<Cause>) {
    if let Some(mode) = source.get(field).filter(|m| !m.is_null())
        && !mode.as_i64().is_some_and(|m| (0..=0o777).contains(&m))
    {
        causes.push(invalid(&format!("{path}.{field}"), mode, FILE_MODE_MESSAGE));
    }
}

/// A path inside a volume: relative, without `..` elements, not starting with `..`.
fn local_path(path: &str, field: &str, causes: &mut Vec<Cause>) {
    let value = Value::String(path.to_string());
    if path.starts_with('/') {
        causes.push(invalid(field, &value, "must be a relative path"));
    }
    if path.split('/').any(|part| part == "..") {
        causes.push(invalid(field, &value, "must not contain '..'"));
    } else if path.starts_with("..") {
        causes.push(invalid(field, &value, "must not start with '..'"));
    }
}

fn key_to_path(item: &Value, path: &str, causes: &mut Vec<Cause>) {
    if text(item, "key").is_empty() {
        causes.push(required(&format!("{path}.key"), ""));
    }
    let file = text(item, "path");
    if file.is_empty() {
        causes.push(required(&format!("{path}.path"), ""));
    }
    local_path(file, &format!("{path}.path"), causes);
    mode(item, "mode", path, causes);
}

/// The elements of the array at `key` of `value` (none when it is missing), with their
/// positions.
fn each<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    value[key].as_array().into_iter().flatten().enumerate()
}

/// A downward-API file; kube-apiserver reports its errors at the source's path, not the
/// item's.
fn downward_api_file(file: &Value, path: &str, causes: &mut Vec<Cause>) {
    let target = text(file, "path");
    if target.is_empty() {
        causes.push(required(&format!("{path}.path"), ""));
    }
    local_path(target, &format!("{path}.path"), causes);
    let field_ref = &file["fieldRef"];
    if field_ref.is_object() {
        let ref_path = format!("{path}.fieldRef");
        let field_path = text(field_ref, "fieldPath");
        if text(field_ref, "apiVersion").is_empty() {
            causes.push(required(&format!("{ref_path}.apiVersion"), ""));
        } else if field_path.is_empty() {
            causes.push(required(&format!("{ref_path}.fieldPath"), ""));
        } else if let Some((base, subscript)) = field_path
            .strip_suffix("']")
            .and_then(|p| p.split_once("['"))
        {
            match base {
                "metadata.annotations" => causes.extend(each_invalid(
                    &ref_path,
                    &subscript.to_lowercase(),
                    qualified_name(&subscript.to_lowercase()),
                )),
                "metadata.labels" => {
                    causes.extend(each_invalid(
                        &ref_path,
                        subscript,
                        qualified_name(subscript),
                    ));
                }
                _ => causes.push(invalid(
                    &ref_path,
                    &Value::String(base.into()),
                    "does not support subscript",
                )),
            }
        } else if !DOWNWARD_API_FIELDS.contains(&field_path) {
            causes.push(not_supported(
                &format!("{ref_path}.fieldPath"),
                &Value::String(field_path.into()),
                &DOWNWARD_API_FIELDS,
            ));
        }
        if file["resourceFieldRef"].is_object() {
            causes.push(invalid(
                path,
                &json!("resource"),
                "fieldRef and resourceFieldRef can not be specified simultaneously",
            ));
        }
    } else if !file["resourceFieldRef"].is_object() {
        causes.push(required(
            path,
            "one of fieldRef and resourceFieldRef is required",
        ));
    }
    mode(file, "mode", path, causes);
}

/// A Secret or ConfigMap volume, whose object is named by `name_field` (`secretName`,
/// `name`).
fn key_source(source: &Value, name_field: &str, path: &str, causes: &mut Vec<Cause>) {
    if text(source, name_field).is_empty() {
        causes.push(required(&format!("{path}.{name_field}"), ""));
    }
    mode(source, "defaultMode", path, causes);
    for (index, item) in each(source, "items") {
        key_to_path(item, &format!("{path}.items[{index}]"), causes);
    }
}

fn projected_source(projected: &Value, path: &str, causes: &mut Vec<Cause>) {
    mode(projected, "defaultMode", path, causes);
    let mut paths = BTreeSet::new();
    let mut claim = |file: &str, conflict: &str, causes: &mut Vec<Cause>| {
        if !file.is_empty() && !paths.insert(file.to_string()) {
            causes.push(invalid(
                path,
                &Value::String(conflict.into()),
                "conflicting duplicate paths",
            ));
        }
    };
    for (index, source) in each(projected, "sources") {
        let source_path = format!("{path}.sources[{index}]");
        for kind in ["secret", "configMap"] {
            let Some(object) = source.get(kind).filter(|s| s.is_object()) else {
                continue;
            };
            let object_path = format!("{source_path}.{kind}");
            let name = text(object, "name");
            if name.is_empty() {
                causes.push(required(&format!("{object_path}.name"), ""));
            }
            for (item_index, item) in each(object, "items") {
                key_to_path(item, &format!("{object_path}.items[{item_index}]"), causes);
                claim(text(item, "path"), name, causes);
            }
        }
        if let Some(downward) = source.get("downwardAPI").filter(|s| s.is_object()) {
            let downward_path = format!("{source_path}.downwardAPI");
            for (_, file) in each(downward, "items") {
                downward_api_file(file, &downward_path, causes);
                let target = text(file, "path");
                claim(target, target, causes);
            }
        }
        let kinds = PROJECTION_SOURCES
            .iter()
            .filter(|kind| source.get(**kind).is_some_and(|s| !s.is_null()))
            .count();
        if kinds > 1 {
            causes.push(forbidden(
                &source_path,
                "may not specify more than 1 volume type per source",
            ));
        }
    }
}

/// Validates `spec.volumes`; returns the names of the valid ones, which mounts may refer to.
fn volumes(spec: &Value, causes: &mut Vec<Cause>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (index, volume) in each(spec, "volumes") {
        let path = format!("spec.volumes[{index}]");
        let mut errors = Vec::new();
        let mut sources = 0;
        for kind in VOLUME_SOURCES.iter().chain(&LATER_VOLUME_SOURCES) {
            let Some(source) = volume.get(*kind).filter(|s| !s.is_null()) else {
                continue;
            };
            let source_path = format!("{path}.{kind}");
            if sources > 0 {
                errors.push(forbidden(
                    &source_path,
                    "may not specify more than 1 volume type",
                ));
                continue;
            }
            sources += 1;
            match *kind {
                "secret" => key_source(source, "secretName", &source_path, &mut errors),
                "configMap" => key_source(source, "name", &source_path, &mut errors),
                "downwardAPI" => {
                    mode(source, "defaultMode", &source_path, &mut errors);
                    for (_, file) in each(source, "items") {
                        downward_api_file(file, &source_path, &mut errors);
                    }
                }
                "projected" => projected_source(source, &source_path, &mut errors),
                _ => {}
            }
        }
        if sources == 0 {
            errors.push(required(&path, "must specify a volume type"));
        }
        let name = text(volume, "name");
        let name_path = format!("{path}.name");
        if name.is_empty() {
            errors.push(required(&name_path, ""));
        } else {
            errors.extend(each_invalid(&name_path, name, dns1123_label(name)));
        }
        if names.contains(name) {
            errors.push(duplicate(&name_path, &Value::String(name.into())));
        }
        if errors.is_empty() {
            names.insert(name.to_string());
        }
        causes.extend(errors);
    }
    names
}

fn containers(
    spec: &Value,
    list: &str,
    volumes: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    causes: &mut Vec<Cause>,
) {
    for (index, container) in each(spec, list) {
        let path = format!("spec.{list}[{index}]");
        let name = text(container, "name");
        if name.is_empty() {
            causes.push(required(&format!("{path}.name"), ""));
        } else {
            causes.extend(each_invalid(
                &format!("{path}.name"),
                name,
                dns1123_label(name),
            ));
            if !names.insert(name.to_string()) {
                causes.push(duplicate(
                    &format!("{path}.name"),
                    &Value::String(name.into()),
                ));
            }
        }
        if text(container, "image").is_empty() {
            causes.push(required(&format!("{path}.image"), ""));
        }
        for (env_index, var) in each(container, "env") {
            let var_path = format!("{path}.env[{env_index}].name");
            let var_name = text(var, "name");
            if var_name.is_empty() {
                causes.push(required(&var_path, ""));
            } else {
                causes.extend(each_invalid(&var_path, var_name, env_var_name(var_name)));
            }
        }
        let mut mount_points = BTreeSet::new();
        for (mount_index, mount) in each(container, "volumeMounts") {
            let mount_path = format!("{path}.volumeMounts[{mount_index}]");
            let volume = text(mount, "name");
            if volume.is_empty() {
                causes.push(required(&format!("{mount_path}.name"), ""));
            }
            if !volumes.contains(volume) {
                causes.push(not_found(
                    &format!("{mount_path}.name"),
                    &Value::String(volume.into()),
                ));
            }
            let target = text(mount, "mountPath");
            if target.is_empty() {
                causes.push(required(&format!("{mount_path}.mountPath"), ""));
            }
            if !mount_points.insert(target.to_string()) {
                causes.push(invalid(
                    &format!("{mount_path}.mountPath"),
                    &Value::String(target.into()),
                    "must be unique",
                ));
            }
        }
    }
}

/// A label expression of a node selector term; `check_values` also checks that each value is
/// a label value (required terms; preferred ones may hold any value).
fn node_selector_requirement(
    requirement: &Value,
    check_values: bool,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let values: Vec<&Value> = requirement["values"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let operator = &requirement["operator"];
    match operator.as_str().unwrap_or_default() {
        "In" | "NotIn" if values.is_empty() => causes.push(required(
            &format!("{path}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !values.is_empty() => causes.push(forbidden(
            &format!("{path}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => causes.push(required(
            &format!("{path}.values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        _ => causes.push(invalid(
            &format!("{path}.operator"),
            operator,
            "not a valid selector operator",
        )),
    }
    let key = text(requirement, "key");
    causes.extend(each_invalid(
        &format!("{path}.key"),
        key,
        qualified_name(key),
    ));
    if check_values {
        for (index, value) in values.iter().enumerate() {
            let value = value.as_str().unwrap_or_default();
            causes.extend(each_invalid(
                &format!("{path}.values[{index}]"),
                value,
                label_value(value),
            ));
        }
    }
}

/// A field expression of a node selector term: only `metadata.name`, and `In` or `NotIn`
/// with exactly one node name.
fn node_field_requirement(requirement: &Value, path: &str, causes: &mut Vec<Cause>) {
    let values: Vec<&Value> = requirement["values"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let operator = &requirement["operator"];
    match operator.as_str().unwrap_or_default() {
        "In" | "NotIn" => {
            if values.len() != 1 {
                causes.push(required(
                    &format!("{path}.values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                ));
            }
        }
        _ => causes.push(invalid(
            &format!("{path}.operator"),
            operator,
            "not a valid selector operator",
        )),
    }
    let key = &requirement["key"];
    if key.as_str() == Some("metadata.name") {
        for (index, value) in values.iter().enumerate() {
            let value = value.as_str().unwrap_or_default();
            causes.extend(each_invalid(
                &format!("{path}.values[{index}]"),
                value,
                dns1123_subdomain(value),
            ));
        }
    } else {
        causes.push(invalid(
            &format!("{path}.key"),
            key,
            "not a valid field selector key",
        ));
    }
}

fn node_selector_term(term: &Value, check_values: bool, path: &str, causes: &mut Vec<Cause>) {
    for (index, requirement) in each(term, "matchExpressions") {
        node_selector_requirement(
            requirement,
            check_values,
            &format!("{path}.matchExpressions[{index}]"),
            causes,
        );
    }
    for (index, requirement) in each(term, "matchFields") {
        node_field_requirement(requirement, &format!("{path}.matchFields[{index}]"), causes);
    }
}

fn node_affinity(affinity: &Value, causes: &mut Vec<Cause>) {
    let path = "spec.affinity.nodeAffinity";
    let required_terms = &affinity["requiredDuringSchedulingIgnoredDuringExecution"];
    if required_terms.is_object() {
        let terms_path =
            format!("{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
        let terms = required_terms["nodeSelectorTerms"].as_array();
        if terms.is_none_or(Vec::is_empty) {
            causes.push(required(
                &terms_path,
                "must have at least one node selector term",
            ));
        }
        for (index, term) in terms.into_iter().flatten().enumerate() {
            node_selector_term(term, true, &format!("{terms_path}[{index}]"), causes);
        }
    }
    for (index, preferred) in each(affinity, "preferredDuringSchedulingIgnoredDuringExecution") {
        let term_path = format!("{path}.preferredDuringSchedulingIgnoredDuringExecution[{index}]");
        let weight = &preferred["weight"];
        if !weight.as_i64().is_some_and(|w| (1..=100).contains(&w)) {
            causes.push(invalid(
                &format!("{term_path}.weight"),
                weight,
                "must be in the range 1-100",
            ));
        }
        node_selector_term(
            &preferred["preference"],
            false,
            &format!("{term_path}.preference"),
            causes,
        );
    }
}

fn tolerations(spec: &Value, causes: &mut Vec<Cause>) {
    for (index, toleration) in each(spec, "tolerations") {
        let path = format!("spec.tolerations[{index}]");
        let key = text(toleration, "key");
        let operator = toleration["operator"].as_str().unwrap_or_default();
        let effect = text(toleration, "effect");
        if !key.is_empty() {
            causes.extend(each_invalid(
                &format!("{path}.key"),
                key,
                qualified_name(key),
            ));
        } else if operator != "Exists" {
            causes.push(invalid(
                &format!("{path}.operator"),
                &Value::String(operator.into()),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if !toleration["tolerationSeconds"].is_null() && effect != "NoExecute" {
            causes.push(invalid(
                &format!("{path}.effect"),
                &Value::String(effect.into()),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        let value = text(toleration, "value");
        match operator {
            "Equal" | "" => causes.extend(label_value(value).into_iter().map(|m| {
                invalid(
                    &format!("{path}.operator"),
                    &Value::String(value.into()),
                    &m,
                )
            })),
            "Exists" if !value.is_empty() => causes.push(invalid(
                &format!("{path}.operator"),
                &Value::String(value.into()),
                "value must be empty when `operator` is 'Exists'",
            )),
            "Exists" => {}
            other => causes.push(not_supported(
                &format!("{path}.operator"),
                &Value::String(other.into()),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect)
        {
            causes.push(not_supported(
                &format!("{path}.effect"),
                &Value::String(effect.into()),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}

fn scheduling_gates(spec: &Value, causes: &mut Vec<Cause>) {
    let mut seen = BTreeSet::new();
    for (index, gate) in each(spec, "schedulingGates") {
        let path = format!("spec.schedulingGates[{index}]");
        let name = text(gate, "name");
        causes.extend(each_invalid(&path, name, qualified_name(name)));
        if !seen.insert(name) {
            causes.push(duplicate(&path, &Value::String(name.into())));
        }
    }
}

fn dns_config(config: &Value, causes: &mut Vec<Cause>) {
    let Some(searches) = config["searches"].as_array() else {
        return;
    };
    let path = "spec.dnsConfig.searches";
    let all = Value::Array(searches.clone());
    if searches.len() > MAX_DNS_SEARCH_PATHS {
        causes.push(invalid(
            path,
            &all,
            &format!("must not have more than {MAX_DNS_SEARCH_PATHS} search paths"),
        ));
    }
    let names: Vec<&str> = searches.iter().filter_map(Value::as_str).collect();
    if names.join(" ").len() > MAX_DNS_SEARCH_CHARS {
        causes.push(invalid(
            path,
            &all,
            &format!(
                "must not have more than {MAX_DNS_SEARCH_CHARS} characters (including spaces) in the search list"
            ),
        ));
    }
    for (index, search) in names.iter().enumerate().filter(|(_, s)| **s != ".") {
        let search = search.strip_suffix('.').unwrap_or(search);
        causes.extend(each_invalid(
            &format!("{path}[{index}]"),
            search,
            dns1123_subdomain_with_underscore(search),
        ));
    }
}
