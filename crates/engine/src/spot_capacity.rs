//! Spot capacity, as the common providers label their nodes, and the preference that keeps a
//! launcher off it.
//!
//! A launcher (or an MPIJob's launcher Job) asks for no GPU, so a scheduler places it on any
//! node with a CPU to spare, spot nodes included; and a run that loses its launcher must start
//! again from its checkpoint (see `plan/run/launcher_loss.rs`). Unless the launcher's template
//! sets a node affinity of its own, eto gives it a *preferred* node affinity term (weight
//! [`SPOT_AVOIDANCE_WEIGHT`]) whose requirements all say "not spot", one per provider's label
//! ([`SPOT_LABELS`]). `NotIn` holds on a node without the label, so an on-demand node of any
//! provider matches the whole term and a spot node of any provider does not. It is a
//! preference, never a requirement: where only spot nodes fit, the launcher goes there.
//! `elasticPolicy.launcherAvoidsSpot: false` turns it off.

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodSpec, PreferredSchedulingTerm,
};

/// The node labels that mark spot (preemptible) capacity, and their spot values:
/// - Karpenter's well-known `karpenter.sh/capacity-type` (`spot`, `on-demand`, `reserved`);
/// - EKS managed node groups' `eks.amazonaws.com/capacityType` (`SPOT`, `ON_DEMAND`);
/// - GKE's `cloud.google.com/gke-spot` (Spot VMs) and `cloud.google.com/gke-preemptible`
///   (preemptible VMs), both `"true"`;
/// - AKS's `kubernetes.azure.com/scalesetpriority` (`spot`);
/// - ACK's `node.alibabacloud.com/spot-strategy`, set by its cloud-controller-manager (from
///   v2.10.2): `SpotWithPriceLimit` or `SpotAsPriceGo` on spot instances, `NoSpot` otherwise.
pub const SPOT_LABELS: [(&str, &[&str]); 6] = [
    ("karpenter.sh/capacity-type", &["spot"]),
    ("eks.amazonaws.com/capacityType", &["SPOT"]),
    ("cloud.google.com/gke-spot", &["true"]),
    ("cloud.google.com/gke-preemptible", &["true"]),
    ("kubernetes.azure.com/scalesetpriority", &["spot"]),
    (
        "node.alibabacloud.com/spot-strategy",
        &["SpotWithPriceLimit", "SpotAsPriceGo"],
    ),
];

/// Weight of the preference against spot nodes: the highest the scheduler accepts.
pub const SPOT_AVOIDANCE_WEIGHT: i32 = 100;

/// Adds the preference against spot nodes to a launcher's `spec`, unless its template set a
/// node affinity of its own (then where it runs is the template's to say).
pub fn avoid(spec: &mut PodSpec) {
    let own = spec
        .affinity
        .as_ref()
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .is_some();
    if own {
        return;
    }
    let requirements = SPOT_LABELS
        .iter()
        .map(|(key, values)| NodeSelectorRequirement {
            key: (*key).into(),
            operator: "NotIn".into(),
            values: Some(values.iter().map(|value| (*value).into()).collect()),
        })
        .collect();
    let term = PreferredSchedulingTerm {
        weight: SPOT_AVOIDANCE_WEIGHT,
        preference: NodeSelectorTerm {
            match_expressions: Some(requirements),
            match_fields: None,
        },
    };
    crate::affinity::prefer_nodes(spec, term);
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_preference_is_one_term_of_not_spot_requirements_unless_the_template_has_its_own() {
        let mut spec = PodSpec::default();
        avoid(&mut spec);
        let affinity = serde_json::to_value(&spec.affinity).unwrap();
        assert_eq!(
            affinity,
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "preference": {"matchExpressions": [
                    {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
                    {"key": "eks.amazonaws.com/capacityType", "operator": "NotIn", "values": ["SPOT"]},
                    {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]},
                    {"key": "cloud.google.com/gke-preemptible", "operator": "NotIn", "values": ["true"]},
                    {"key": "kubernetes.azure.com/scalesetpriority", "operator": "NotIn", "values": ["spot"]},
                    {"key": "node.alibabacloud.com/spot-strategy", "operator": "NotIn",
                     "values": ["SpotWithPriceLimit", "SpotAsPriceGo"]},
                ]}
            }]}})
        );

        // A template that places its launcher itself, even by a preference, is left alone;
        // other affinities (pod affinity) are not a node affinity.
        let own: PodSpec = serde_json::from_value(json!({"containers": [],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["cpu"]}]}}]}}}))
        .unwrap();
        let mut kept = own.clone();
        avoid(&mut kept);
        assert_eq!(kept, own);
        let mut with_pod_affinity: PodSpec = serde_json::from_value(json!({"containers": [],
            "affinity": {"podAffinity": {}}}))
        .unwrap();
        avoid(&mut with_pod_affinity);
        assert!(with_pod_affinity.affinity.unwrap().node_affinity.is_some());
    }
}
