//! The garbage and namespace collectors' bookkeeping: orphans, foreground deletions,
//! terminating namespaces.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::options::{DeleteOptions, WriteOptions};
use crate::resources::{ResourceId, ResourceType};
use crate::store::{ObjectKey, State};

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
