//! The nodes that announced they go away (see [`eto_engine::node_warnings`]), kept as the
//! Node watch reports them.
//!
//! eto does not cache Nodes: a node's status changes every few seconds and a cluster may have
//! thousands, while a reconcile needs only the few that show a warning. [`WarnedNodes`] holds
//! those, one [`NodeWarning`] per node, and [`WarnedNodes::apply`] keeps it in step with the
//! watch, saying which nodes' warnings appeared, changed or went, so that only the jobs with
//! pods on them are looked at again.
//!
//! # Guarantees
//! - After a watch event is applied, the map holds exactly the warnings of the nodes the
//!   watch knows of: a deleted node's warning goes with it, and a re-list (the watch
//!   restarted, events may have been missed) replaces the whole map once it is complete, so a
//!   warning withdrawn or a node deleted while the watch was down does not linger.
//! - Until the first list completes the map is empty; the controller starts reconciling only
//!   once every watch has listed (see `crate::freshness`).

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use eto_engine::node_warnings::{NodeWarning, Rules};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher;

/// The warned nodes, shared by the Node watch (which writes) and the reconciles (which read).
#[derive(Clone, Debug, Default)]
pub struct WarnedNodes {
    warnings: Arc<RwLock<BTreeMap<String, NodeWarning>>>,
}

impl WarnedNodes {
    /// Every node's warning now.
    pub fn all(&self) -> Vec<NodeWarning> {
        self.warnings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

/// Keeps a [`WarnedNodes`] in step with a Node watch.
#[derive(Debug)]
pub struct Tracker {
    rules: Rules,
    warned: WarnedNodes,
    /// The warnings of a re-list under way, until it completes.
    relisted: Option<BTreeMap<String, NodeWarning>>,
}

impl Tracker {
    /// A tracker reading warnings by `rules` into `warned`.
    pub fn new(rules: Rules, warned: WarnedNodes) -> Self {
        Self {
            rules,
            warned,
            relisted: None,
        }
    }

    /// Applies one watch event; returns the names of the nodes whose warning appeared,
    /// changed or went.
    pub fn apply(&mut self, event: &watcher::Event<Node>) -> Vec<String> {
        let mut warnings = self
            .warned
            .warnings
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Apply(node) => {
                let Some(name) = node.metadata.name.clone() else {
                    return Vec::new();
                };
                let now = self.rules.warning(node);
                let before = match now.clone() {
                    Some(warning) => warnings.insert(name.clone(), warning),
                    None => warnings.remove(&name),
                };
                if before == now {
                    Vec::new()
                } else {
                    vec![name]
                }
            }
            watcher::Event::Delete(node) => node
                .metadata
                .name
                .as_ref()
                .and_then(|name| warnings.remove_entry(name))
                .map(|(name, _)| name)
                .into_iter()
                .collect(),
            watcher::Event::Init => {
                self.relisted = Some(BTreeMap::new());
                Vec::new()
            }
            watcher::Event::InitApply(node) => {
                if let (Some(relisted), Some(warning)) =
                    (self.relisted.as_mut(), self.rules.warning(node))
                {
                    relisted.insert(warning.node.clone(), warning);
                }
                Vec::new()
            }
            watcher::Event::InitDone => {
                let relisted = self.relisted.take().unwrap_or_default();
                let mut changed: Vec<String> = warnings
                    .iter()
                    .filter(|(name, warning)| relisted.get(*name) != Some(*warning))
                    .map(|(name, _)| name.clone())
                    .collect();
                changed.extend(
                    relisted
                        .keys()
                        .filter(|name| !warnings.contains_key(*name))
                        .cloned(),
                );
                *warnings = relisted;
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn node(name: &str, taint: Option<&str>) -> Node {
        let taints: Vec<serde_json::Value> = taint
            .map(|key| json!({"key": key, "effect": "NoSchedule"}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"taints": taints}}))
            .unwrap()
    }

    fn warned_names(warned: &WarnedNodes) -> Vec<String> {
        warned.all().into_iter().map(|w| w.node).collect()
    }

    #[test]
    fn warnings_follow_the_watch_through_changes_deletions_and_relists() {
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        const KARPENTER: Option<&str> = Some("karpenter.sh/disrupted");
        let warned = WarnedNodes::default();
        let mut tracker = Tracker::new(Rules::default(), warned.clone());
        // (event, nodes changed, warned nodes after)
        let steps: Vec<(watcher::Event<Node>, &[&str], &[&str])> = vec![
            (Init, &[], &[]),
            (InitApply(node("a", KARPENTER)), &[], &[]),
            (InitApply(node("b", None)), &[], &[]),
            (InitDone, &["a"], &["a"]),
            (Apply(node("b", None)), &[], &["a"]),
            (Apply(node("a", KARPENTER)), &[], &["a"]),
            (
                Apply(node(
                    "b",
                    Some("cloud.google.com/impending-node-termination"),
                )),
                &["b"],
                &["a", "b"],
            ),
            (
                Apply(node("b", Some("aws-node-termination-handler/spot-itn"))),
                &["b"],
                &["a", "b"],
            ),
            (Apply(node("a", None)), &["a"], &["b"]),
            (Delete(node("b", None)), &["b"], &[]),
            (Delete(node("b", None)), &[], &[]),
            (Apply(node("c", KARPENTER)), &["c"], &["c"]),
            // The watch restarts: c was deleted meanwhile, d warned.
            (Init, &[], &["c"]),
            (InitApply(node("d", KARPENTER)), &[], &["c"]),
            (InitDone, &["c", "d"], &["d"]),
        ];
        for (index, (event, changed, after)) in steps.into_iter().enumerate() {
            assert_eq!(tracker.apply(&event), changed, "step {index}");
            assert_eq!(warned_names(&warned), after, "step {index}");
        }
    }
}
