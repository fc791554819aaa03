//! kube-apiserver's checks of every object's labels and annotations.

use serde_json::Value;

use super::field::{each_invalid, too_long};
use super::syntax::{label_value, qualified_name};
use crate::errors::Cause;

/// kube-apiserver's checks of labels (or a node selector) at `path`: keys are qualified
/// names, values label values.
pub fn labels(labels: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    for (key, value) in labels.and_then(Value::as_object).into_iter().flatten() {
        causes.extend(each_invalid(path, key, qualified_name(key)));
        let value = value.as_str().unwrap_or_default();
        causes.extend(each_invalid(path, value, label_value(value)));
    }
}

/// The largest total size of an object's annotations, keys and values, in bytes.
pub const ANNOTATIONS_SIZE_LIMIT: usize = 256 * 1024;

/// kube-apiserver's checks of annotations: keys are qualified names (of any case), and
/// together with their values they take at most [`ANNOTATIONS_SIZE_LIMIT`] bytes.
pub fn annotations(annotations: Option<&Value>, causes: &mut Vec<Cause>) {
    let path = "metadata.annotations";
    let Some(annotations) = annotations.and_then(Value::as_object) else {
        return;
    };
    let mut size = 0;
    for (key, value) in annotations {
        causes.extend(each_invalid(path, key, qualified_name(&key.to_lowercase())));
        size += key.len() + value.as_str().map_or(0, str::len);
    }
    if size > ANNOTATIONS_SIZE_LIMIT {
        causes.push(too_long(path, ANNOTATIONS_SIZE_LIMIT));
    }
}
