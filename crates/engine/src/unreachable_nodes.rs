//! How long a pod of a job stays bound to a node that stopped reporting.
//!
//! A node that stops without warning (its machine gone, its kubelet dead, cut off) leaves its
//! pods `Running` in the API. The node controller marks it `NotReady` or `Unknown` after its
//! grace period (40-50 s) and taints it `node.kubernetes.io/not-ready` or `unreachable`
//! (`NoExecute`); the taint manager deletes the pods once their toleration of the taint runs
//! out, marked `DisruptionTarget` (`DeletionByTaintManager`). Kubernetes gives every pod
//! without one a toleration of 300 s (the `DefaultTolerationSeconds` admission plugin): five
//! minutes in which a job trains a worker short and eto, which reads the pod as running,
//! replaces nothing. A training process on a node that stopped reporting is of no use to its
//! group (its collectives fail, or its peers dropped it already), so eto gives the pods it
//! creates a toleration of [`TOLERATION_SECONDS`] for each taint instead; the taint manager's
//! deletion then tells eto the pod is lost, and eto replaces it as after any disruption. A
//! template that tolerates a taint itself (with any `tolerationSeconds`, or forever) keeps
//! what it says.

use k8s_openapi::api::core::v1::{PodSpec, Toleration};

/// The taints the node controller puts on a node that stopped reporting or is not ready.
pub const TAINTS: [&str; 2] = [
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/not-ready",
];

/// How long eto's pods tolerate [`TAINTS`]: beyond a kubelet's restart, which the node
/// controller's own grace period already covers, and far short of Kubernetes's 300 s.
pub const TOLERATION_SECONDS: i64 = 30;

/// Adds to `spec` a `NoExecute` toleration of [`TOLERATION_SECONDS`] for each of [`TAINTS`]
/// it does not tolerate already.
pub fn leave_after_a_while(spec: &mut PodSpec) {
    for taint in TAINTS {
        let tolerated = spec
            .tolerations
            .iter()
            .flatten()
            .any(|toleration| tolerates(toleration, taint));
        if !tolerated {
            spec.tolerations.get_or_insert_default().push(Toleration {
                key: Some(taint.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(TOLERATION_SECONDS),
                value: None,
            });
        }
    }
}

/// Whether `toleration` tolerates the `NoExecute` taint `key`, as Kubernetes matches them: its
/// key (none with `Exists`: every key) and its effect (none: every effect).
fn tolerates(toleration: &Toleration, key: &str) -> bool {
    let key_matches = match toleration.key.as_deref() {
        None | Some("") => toleration.operator.as_deref() == Some("Exists"),
        Some(own) => own == key,
    };
    let effect_matches = matches!(toleration.effect.as_deref(), None | Some("" | "NoExecute"));
    key_matches && effect_matches
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;

    fn tolerations_after(template: Value) -> Value {
        let mut spec: PodSpec =
            serde_json::from_value(json!({"containers": [], "tolerations": template})).unwrap();
        leave_after_a_while(&mut spec);
        serde_json::to_value(spec.tolerations).unwrap()
    }

    fn ours(key: &str) -> Value {
        json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30})
    }

    #[test]
    fn a_pod_leaves_a_node_that_stopped_reporting_after_its_own_toleration() {
        let spot = json!({"key": "spot", "operator": "Exists", "effect": "NoSchedule"});
        let own_unreachable = json!({"key": "node.kubernetes.io/unreachable",
            "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600});
        let any_effect = json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists"});
        let no_schedule_only = json!({"key": "node.kubernetes.io/not-ready",
            "operator": "Exists", "effect": "NoSchedule"});
        let everything = json!({"operator": "Exists"});
        let cases = [
            (
                "none",
                json!([]),
                json!([
                    ours("node.kubernetes.io/unreachable"),
                    ours("node.kubernetes.io/not-ready")
                ]),
            ),
            (
                "another taint's",
                json!([spot]),
                json!([
                    spot,
                    ours("node.kubernetes.io/unreachable"),
                    ours("node.kubernetes.io/not-ready")
                ]),
            ),
            (
                "its own for one",
                json!([own_unreachable]),
                json!([own_unreachable, ours("node.kubernetes.io/not-ready")]),
            ),
            (
                "its own for every effect",
                json!([any_effect]),
                json!([any_effect, ours("node.kubernetes.io/unreachable")]),
            ),
            (
                "another effect's",
                json!([no_schedule_only]),
                json!([
                    no_schedule_only,
                    ours("node.kubernetes.io/unreachable"),
                    ours("node.kubernetes.io/not-ready")
                ]),
            ),
            ("every taint's", json!([everything]), json!([everything])),
        ];
        for (case, template, expected) in cases {
            assert_eq!(tolerations_after(template), expected, "{case}");
        }
    }
}
