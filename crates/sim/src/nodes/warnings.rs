//! Advance warnings of a node's loss, as clouds and their tools put them on the Node before
//! any pod is touched: a taint (Karpenter, the AWS Node Termination Handler, GKE) or a node
//! condition (ACK's node problem detector). eto-sim only writes them; what reads them is the
//! operator's.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A warning to put on a node: a taint with `taint` as its key, or a condition of type
/// `condition` with status `True` and `message`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    /// The key of a `NoSchedule` taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint: Option<String>,
    /// The type of a node condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// The condition's message (for example the time the node goes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Warning {
    /// Karpenter's: the taint `karpenter.sh/disrupted`.
    pub fn karpenter() -> Self {
        Self {
            taint: Some("karpenter.sh/disrupted".into()),
            ..Self::default()
        }
    }

    /// Whether it names a taint or a condition.
    pub fn is_valid(&self) -> bool {
        self.taint.is_some() != self.condition.is_some()
    }

    /// Puts the warning on `node` (a Node as JSON); a condition is stamped `now` (RFC 3339),
    /// a taint carries no time. A warning the node shows already is left as it is.
    pub fn put_on(&self, node: &mut Value, now: &str) {
        if let Some(key) = &self.taint {
            let taints = node["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !taints.iter().any(|t| t["key"] == key.as_str()) {
                let mut taints = taints;
                // As Karpenter, the Node Termination Handler and GKE put theirs: no
                // `timeAdded` (the API server adds none either).
                taints.push(json!({"key": key, "effect": "NoSchedule"}));
                node["spec"]["taints"] = Value::Array(taints);
            }
        }
        if let Some(type_) = &self.condition {
            let mut conditions = node["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            conditions.retain(|c| c["type"] != type_.as_str());
            conditions.push(json!({"type": type_, "status": "True", "reason": "Warned",
                "message": self.message.clone().unwrap_or_default(),
                "lastHeartbeatTime": now, "lastTransitionTime": now}));
            node["status"]["conditions"] = Value::Array(conditions);
        }
    }

    /// Takes the warning off `node`: the taint removed, the condition set `False`.
    pub fn take_off(&self, node: &mut Value, now: &str) {
        if let Some(key) = &self.taint
            && let Some(taints) = node["spec"]["taints"].as_array_mut()
        {
            taints.retain(|t| t["key"] != key.as_str());
        }
        if let Some(type_) = &self.condition
            && let Some(conditions) = node["status"]["conditions"].as_array_mut()
        {
            for condition in conditions
                .iter_mut()
                .filter(|c| c["type"] == type_.as_str())
            {
                condition["status"] = json!("False");
                condition["lastTransitionTime"] = json!(now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_goes_on_a_node_once_and_comes_off() {
        let mut node = json!({"metadata": {"name": "spot-1"}, "spec": {}, "status": {"conditions": [
            {"type": "Ready", "status": "True"}]}});
        let taint = Warning::karpenter();
        taint.put_on(&mut node, "2027-01-15T08:00:00Z");
        taint.put_on(&mut node, "2027-01-15T08:00:05Z");
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        );
        let condition = Warning {
            condition: Some("InstanceExpired".into()),
            message: Some("released at 2027-01-15T08:05:00Z".into()),
            ..Warning::default()
        };
        condition.put_on(&mut node, "2027-01-15T08:00:00Z");
        assert_eq!(node["status"]["conditions"][1]["status"], "True");
        taint.take_off(&mut node, "2027-01-15T08:01:00Z");
        condition.take_off(&mut node, "2027-01-15T08:01:00Z");
        assert_eq!(node["spec"]["taints"], json!([]));
        assert_eq!(node["status"]["conditions"][1]["status"], "False");
        assert!(!Warning::default().is_valid() && taint.is_valid());
    }
}
