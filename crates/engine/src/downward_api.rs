//! Files of a downward-API volume: a pod's annotation or label as a file its containers
//! read, which the kubelet rewrites when the value changes.

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, ObjectFieldSelector};

/// A downward-API file at `path` holding the pod's annotation `annotation`.
pub fn annotation_file(path: &str, annotation: &str, mode: i32) -> DownwardAPIVolumeFile {
    metadata_file(path, &format!("metadata.annotations['{annotation}']"), mode)
}

/// A downward-API file at `path` holding the pod's label `label` (empty while it has none).
pub fn label_file(path: &str, label: &str, mode: i32) -> DownwardAPIVolumeFile {
    metadata_file(path, &format!("metadata.labels['{label}']"), mode)
}

/// A downward-API file at `path` holding the pod's field `field_path`.
fn metadata_file(path: &str, field_path: &str, mode: i32) -> DownwardAPIVolumeFile {
    DownwardAPIVolumeFile {
        path: path.into(),
        field_ref: Some(ObjectFieldSelector {
            api_version: None,
            field_path: field_path.into(),
        }),
        mode: Some(mode),
        resource_field_ref: None,
    }
}
