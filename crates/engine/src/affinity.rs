//! Scheduling preferences eto adds to a pod's spec, beside whatever its template asks: the
//! terms are appended, never replacing the template's own.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, PodAntiAffinity, PodSpec, PreferredSchedulingTerm,
    WeightedPodAffinityTerm,
};

/// Adds `term` to the node affinity `spec` prefers.
pub fn prefer_nodes(spec: &mut PodSpec, term: PreferredSchedulingTerm) {
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(NodeAffinity::default)
        .preferred_during_scheduling_ignored_during_execution
        .get_or_insert_default()
        .push(term);
}

/// Adds `term` to the pod anti-affinity `spec` prefers: pods it would rather not run beside.
pub fn prefer_apart_from(spec: &mut PodSpec, term: WeightedPodAffinityTerm) {
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .pod_anti_affinity
        .get_or_insert_with(PodAntiAffinity::default)
        .preferred_during_scheduling_ignored_during_execution
        .get_or_insert_default()
        .push(term);
}
