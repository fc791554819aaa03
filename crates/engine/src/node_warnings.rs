//! Advance warnings that a node goes away: a spot reclaim announced before any pod is touched.
//!
//! Clusters announce a coming node loss on the Node object: Karpenter and the AWS Node
//! Termination Handler with a taint, GKE with a taint, ACK's `ack-node-problem-detector` with
//! the node condition `InstanceExpired`. Which marks count is configurable ([`Signal`],
//! [`DEFAULT_SIGNALS`]); [`warning`] reads one node, [`resolve`] gives each warning its time.
//!
//! # When a warning starts and ends
//! A warning's start is the time it carries (a condition's `lastTransitionTime`, a taint's
//! `timeAdded`); most taints carry none (Karpenter, the Node Termination Handler and GKE set
//! no `timeAdded` on a `NoSchedule` taint), and then it starts when eto first saw it, as
//! `status.nodeWarnings` recorded: the same for every reconcile, across restarts of the
//! operator. Its deadline is the time it names (a condition's message, the node's
//! [`TERMINATION_TIME_ANNOTATION`]), else its start plus the configured lead.
//!
//! # What a warning does
//! A worker on a warned node is seen as Kubernetes will see it once the reclaim starts: as if
//! its pod had `DisruptionTarget=True` ([`as_disrupted`]), only minutes earlier. So everything
//! eto does for a disrupted worker happens at the warning: the worker gets its own `Reclaim`
//! notice (deadline: the warning's), leaves host discovery at once and is replaced, the loss
//! counts as certain (a job left below its minimum posts its `Suspend` notice at once, without
//! `belowMinSeconds`), and new workers prefer other nodes ([`avoided`]). The pod itself is not
//! deleted: it runs on, out of discovery (Horovod stops using it), until its node goes.
//! Replica groups whose leaving would take the job below its minimum train on until spares
//! wait to take their places instead (see [`crate::warned_handover`]).
//!
//! A warning that is withdrawn (the taint removed, the condition cleared) takes its `Reclaim`
//! notice with it, and a worker it took out that still runs comes back (see
//! [`crate::target_workers`]): into its replacement's place while that is not ready yet, else it is
//! deleted, its replacement having taken over.

use std::collections::BTreeMap;
use std::time::Duration;

use eto_api::job_status::{NODE_WARNINGS_LIMIT, NodeCooldown, WarnedNode};
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::pods;

/// The annotation a tool may set on a node to say when it goes (RFC 3339), for warnings that
/// carry no time of their own.
pub const TERMINATION_TIME_ANNOTATION: &str = "eto.dev/node-termination-time";

/// The reason of the `DisruptionTarget` condition eto sees on the pods of a warned node, and of
/// their `Reclaim` notices.
pub const NODE_WARNING: &str = "NodeWarning";

/// The warnings eto acts on unless told otherwise.
pub const DEFAULT_SIGNALS: &[&str] = &[
    "taint:karpenter.sh/disrupted",
    "taint:aws-node-termination-handler/spot-itn",
    "taint:aws-node-termination-handler/asg-lifecycle-termination",
    "taint:aws-node-termination-handler/scheduled-maintenance",
    "taint:cloud.google.com/impending-node-termination",
    "condition:InstanceExpired",
];

/// How long a node warned of without a time of its own is taken to last.
pub const DEFAULT_LEAD: Duration = Duration::from_secs(120);

/// A mark on a Node that says it goes away soon.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    /// A taint with this key (any value and effect).
    Taint(String),
    /// A node condition of this type with status `True`.
    Condition(String),
}

/// A signal that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid node warning {0:?}: expected taint:<key> or condition:<type>")]
pub struct InvalidSignal(String);

impl std::str::FromStr for Signal {
    type Err = InvalidSignal;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once(':') {
            Some(("taint", key)) if !key.is_empty() => Ok(Self::Taint(key.into())),
            Some(("condition", type_)) if !type_.is_empty() => Ok(Self::Condition(type_.into())),
            _ => Err(InvalidSignal(text.into())),
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Taint(key) => write!(f, "taint {key}"),
            Self::Condition(type_) => write!(f, "condition {type_}"),
        }
    }
}

/// The signals of [`DEFAULT_SIGNALS`].
pub fn default_signals() -> Vec<Signal> {
    DEFAULT_SIGNALS
        .iter()
        .filter_map(|text| text.parse().ok())
        .collect()
}

/// Which warnings eto reads, and how long a warning without a time of its own is taken to
/// last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// The marks that count.
    pub signals: Vec<Signal>,
    /// The lead of a warning without a time of its own.
    pub lead: Duration,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            signals: default_signals(),
            lead: DEFAULT_LEAD,
        }
    }
}

impl Rules {
    /// The warning `node` shows, if any (see [`warning`]).
    pub fn warning(&self, node: &Node) -> Option<NodeWarning> {
        warning(node, &self.signals, self.lead)
    }
}

/// A node that announced it goes away, as the Node shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeWarning {
    /// The node.
    pub node: String,
    /// What announced it, as people read it: `taint karpenter.sh/disrupted`.
    pub signal: String,
    /// When it was announced, if the taint or condition says.
    pub since: Option<jiff::Timestamp>,
    /// When the node goes, if the warning or the node's annotation says.
    pub deadline: Option<jiff::Timestamp>,
    /// How long after its start a warning without a deadline is taken to last.
    pub lead: Duration,
}

/// An RFC 3339 time among the words of `text`, if any (a condition message that names the
/// release time).
fn time_in(text: &str) -> Option<jiff::Timestamp> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '(' || c == ')')
        .map(|word| word.trim_end_matches('.'))
        .find_map(|word| word.parse::<jiff::Timestamp>().ok())
}

/// The warning `node` shows, by the first of `signals` it carries; `lead` is how long a
/// warning without a deadline of its own is taken to last.
pub fn warning(node: &Node, signals: &[Signal], lead: Duration) -> Option<NodeWarning> {
    let name = node.metadata.name.clone()?;
    let annotated = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TERMINATION_TIME_ANNOTATION))
        .and_then(|time| time.parse::<jiff::Timestamp>().ok());
    let taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default();
    let conditions = node
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_deref())
        .unwrap_or_default();
    signals.iter().find_map(|signal| {
        let (since, carried) = match signal {
            Signal::Taint(key) => {
                let taint = taints.iter().find(|taint| &taint.key == key)?;
                (taint.time_added.as_ref().map(|t| t.0), None)
            }
            Signal::Condition(type_) => {
                let condition = conditions
                    .iter()
                    .find(|c| &c.type_ == type_ && c.status == "True")?;
                (
                    condition.last_transition_time.as_ref().map(|t| t.0),
                    condition.message.as_deref().and_then(time_in),
                )
            }
        };
        Some(NodeWarning {
            node: name.clone(),
            signal: signal.to_string(),
            since,
            deadline: carried.or(annotated),
            lead,
        })
    })
}

/// `warnings` with their start and deadline (see the module documentation): a warning
/// without a start of its own keeps the one `recorded` (the job's `status.nodeWarnings`) for
/// its node and signal, else starts `now`. The workers are left for the caller to fill in.
pub fn resolve(
    warnings: &[NodeWarning],
    recorded: &[WarnedNode],
    now: jiff::Timestamp,
) -> Vec<WarnedNode> {
    warnings
        .iter()
        .map(|warning| {
            let since = warning.since.unwrap_or_else(|| {
                recorded
                    .iter()
                    .find(|r| r.node == warning.node && r.signal == warning.signal)
                    .map_or(now, |r| r.since.0)
            });
            WarnedNode {
                node: warning.node.clone(),
                signal: warning.signal.clone(),
                since: Time(since),
                deadline: Time(
                    warning
                        .deadline
                        .unwrap_or_else(|| crate::time::after(since, warning.lead)),
                ),
                workers: Vec::new(),
            }
        })
        .collect()
}

/// What `status.nodeWarnings` lists: the warned nodes of `warned` that run one of `workers`
/// (live worker pods), with their names, those ending first first, at most
/// [`NODE_WARNINGS_LIMIT`].
pub fn recorded(warned: &[WarnedNode], workers: &[&Pod]) -> Vec<WarnedNode> {
    let mut listed: Vec<WarnedNode> = warned
        .iter()
        .filter_map(|warning| {
            let on: Vec<String> = workers
                .iter()
                .filter(|pod| pods::node(pod) == Some(warning.node.as_str()))
                .filter_map(|pod| pod.metadata.name.clone())
                .collect();
            (!on.is_empty()).then(|| WarnedNode {
                workers: on,
                ..warning.clone()
            })
        })
        .collect();
    listed.sort_by(|a, b| (a.deadline.0, &a.node).cmp(&(b.deadline.0, &b.node)));
    listed.truncate(NODE_WARNINGS_LIMIT);
    listed
}

/// The warnings of `warnings` by node.
pub fn by_node(warnings: &[WarnedNode]) -> BTreeMap<&str, &WarnedNode> {
    warnings.iter().map(|w| (w.node.as_str(), w)).collect()
}

/// `pod` as eto sees it while its node is warned of: with `DisruptionTarget=True` (reason
/// [`NODE_WARNING`]), or `None` when its node is not warned of, or it is disrupted already.
pub fn as_disrupted(pod: &Pod, warnings: &BTreeMap<&str, &WarnedNode>) -> Option<Pod> {
    let warning = warnings.get(pods::node(pod)?)?;
    if pods::is_disrupted(pod) || pods::is_terminating(pod) {
        return None;
    }
    let mut seen = pod.clone();
    seen.status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default()
        .push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some(NODE_WARNING.into()),
            message: Some(describe(warning)),
            last_transition_time: Some(warning.since.clone()),
            ..PodCondition::default()
        });
    Some(seen)
}

/// How a warning reads in a notice or an event.
pub fn describe(warning: &WarnedNode) -> String {
    format!(
        "node {} goes away by {} ({})",
        warning.node, warning.deadline.0, warning.signal
    )
}

/// The warned nodes as entries new workers avoid, as they avoid nodes in cooldown (see
/// [`crate::cooldown::avoiding`]); each until its deadline.
pub fn avoided(warnings: &[WarnedNode]) -> Vec<NodeCooldown> {
    warnings
        .iter()
        .map(|warning| NodeCooldown {
            node: warning.node.clone(),
            pod: String::new(),
            until: warning.deadline.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn node(
        spec: serde_json::Value,
        status: serde_json::Value,
        annotations: serde_json::Value,
    ) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "spot-1", "annotations": annotations},
            "spec": spec, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn signals_parse_and_say_what_is_wrong() {
        assert_eq!(
            "taint:karpenter.sh/disrupted".parse(),
            Ok(Signal::Taint("karpenter.sh/disrupted".into()))
        );
        assert_eq!(
            "condition:InstanceExpired".parse(),
            Ok(Signal::Condition("InstanceExpired".into()))
        );
        for bad in ["karpenter.sh/disrupted", "taint:", "label:x"] {
            assert_eq!(bad.parse::<Signal>(), Err(InvalidSignal(bad.into())));
        }
        assert_eq!(default_signals().len(), DEFAULT_SIGNALS.len());
    }

    #[test]
    fn a_warning_is_read_from_a_taint_or_a_condition_with_its_time() {
        let signals = default_signals();
        let lead = Duration::from_secs(120);
        // (node, warning: signal, since, deadline)
        let cases = [
            (node(json!({}), json!({}), json!({})), None),
            (
                node(
                    json!({"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}),
                    json!({}),
                    json!({}),
                ),
                Some(("taint karpenter.sh/disrupted", None, None)),
            ),
            (
                node(
                    json!({"taints": [{"key": "cloud.google.com/impending-node-termination", "effect": "NoSchedule",
                    "timeAdded": "2027-01-15T07:59:50Z"}]}),
                    json!({}),
                    json!({}),
                ),
                Some((
                    "taint cloud.google.com/impending-node-termination",
                    Some(at(-10)),
                    None,
                )),
            ),
            (
                node(
                    json!({"taints": [{"key": "aws-node-termination-handler/spot-itn", "effect": "NoSchedule"}]}),
                    json!({}),
                    json!({TERMINATION_TIME_ANNOTATION: "2027-01-15T08:01:00Z"}),
                ),
                Some((
                    "taint aws-node-termination-handler/spot-itn",
                    None,
                    Some(at(60)),
                )),
            ),
            (
                node(
                    json!({}),
                    json!({"conditions": [{"type": "InstanceExpired", "status": "True",
                    "lastTransitionTime": "2027-01-15T07:59:00Z",
                    "message": "instance will be released at 2027-01-15T08:04:00Z."}]}),
                    json!({}),
                ),
                Some(("condition InstanceExpired", Some(at(-60)), Some(at(240)))),
            ),
            (
                node(
                    json!({}),
                    json!({"conditions": [{"type": "InstanceExpired", "status": "False"}]}),
                    json!({}),
                ),
                None,
            ),
            (
                node(
                    json!({"taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}),
                    json!({}),
                    json!({}),
                ),
                None,
            ),
        ];
        for (node, expected) in cases {
            let got = warning(&node, &signals, lead);
            let got = got
                .as_ref()
                .map(|w| (w.signal.as_str(), w.since, w.deadline));
            assert_eq!(got, expected, "{node:?}");
        }
        let cordon = vec![Signal::Taint("node.kubernetes.io/unschedulable".into())];
        let cordoned = node(
            json!({"taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}),
            json!({}),
            json!({}),
        );
        assert!(warning(&cordoned, &cordon, lead).is_some(), "configurable");
    }

    #[test]
    fn a_pod_on_a_warned_node_is_seen_as_disrupted_with_the_warnings_time() {
        let warned = WarnedNode {
            node: "spot-1".into(),
            signal: "taint karpenter.sh/disrupted".into(),
            since: Time(at(0)),
            deadline: Time(at(120)),
            workers: Vec::new(),
        };
        let warnings = by_node(std::slice::from_ref(&warned));
        let pod = |node: &str| -> Pod {
            serde_json::from_value(
                json!({"metadata": {"name": "w-0"}, "spec": {"nodeName": node,
                "containers": []}, "status": {"phase": "Running"}}),
            )
            .unwrap()
        };
        let seen = as_disrupted(&pod("spot-1"), &warnings).expect("disrupted");
        assert!(pods::is_disrupted(&seen));
        assert!(as_disrupted(&pod("spot-2"), &warnings).is_none());
        assert!(as_disrupted(&seen, &warnings).is_none(), "once");
        assert_eq!(avoided(std::slice::from_ref(&warned))[0].until.0, at(120));
    }

    #[test]
    fn a_warning_without_a_time_starts_when_first_seen_and_keeps_that_start() {
        let lead = Duration::from_secs(120);
        let read = |since: Option<i64>, deadline: Option<i64>| NodeWarning {
            node: "spot-1".into(),
            signal: "taint karpenter.sh/disrupted".into(),
            since: since.map(at),
            deadline: deadline.map(at),
            lead,
        };
        let times = |warned: &[WarnedNode]| {
            warned
                .iter()
                .map(|w| (w.since.0, w.deadline.0))
                .collect::<Vec<_>>()
        };
        let first = resolve(&[read(None, None)], &[], at(5));
        assert_eq!(times(&first), [(at(5), at(125))], "first seen");
        let later = resolve(&[read(None, None)], &first, at(50));
        assert_eq!(times(&later), [(at(5), at(125))], "kept, not moved");
        let other_signal = WarnedNode {
            signal: "condition InstanceExpired".into(),
            ..first[0].clone()
        };
        assert_eq!(
            times(&resolve(&[read(None, None)], &[other_signal], at(50))),
            [(at(50), at(170))],
            "another signal is another warning"
        );
        assert_eq!(
            times(&resolve(&[read(Some(1), Some(90))], &first, at(50))),
            [(at(1), at(90))],
            "its own times win"
        );
    }

    #[test]
    fn the_status_lists_the_warned_nodes_running_workers_ending_first_first() {
        let warned = |node: &str, deadline: i64| WarnedNode {
            node: node.into(),
            signal: "taint karpenter.sh/disrupted".into(),
            since: Time(at(0)),
            deadline: Time(at(deadline)),
            workers: Vec::new(),
        };
        let worker = |name: &str, node: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"nodeName": node, "containers": []}}))
            .unwrap()
        };
        let pods = [
            worker("w-0", "spot-1"),
            worker("w-1", "spot-2"),
            worker("w-2", "spot-2"),
        ];
        let workers: Vec<&Pod> = pods.iter().collect();
        let listed = recorded(
            &[
                warned("spot-1", 300),
                warned("spot-2", 60),
                warned("spot-3", 10),
            ],
            &workers,
        );
        let seen: Vec<(&str, Vec<&str>)> = listed
            .iter()
            .map(|w| {
                (
                    w.node.as_str(),
                    w.workers.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [("spot-2", vec!["w-1", "w-2"]), ("spot-1", vec!["w-0"])]
        );
    }
}
