//! What eto tells the coordinator of a group that re-forms (a PyTorchJob's rendezvous store,
//! see [`crate::group_report`]) so that the group re-forms in seconds after a loss.
//!
//! torchrun's agents learn of a lost agent only from its silence: it stays a member of the
//! round that trained until its heartbeats are missed three times (15 s), and the next round
//! then waits its last call (30 s) for agents that might still come. eto sees the pod go and
//! knows which agents can come, so it orders the store, which holds the rendezvous:
//!
//! - **departed**: the hosts the rendezvous knows (members and waiting agents) whose pods are
//!   gone, and every Worker whose pod is being deleted (by this reconcile too) or finished,
//!   known to the rendezvous or not, but for one the platform takes while the group waits
//!   for its save (see [`crate::saving_on_termination`]): it stays until the group saved.
//!   The store takes them out at once, as torchrun itself does once their heartbeats
//!   expire, and keeps them out for the run: an agent lives until
//!   its pod's containers stop (after a force deletion, some time after the pod left the
//!   API), and once taken out it comes back to the rendezvous, where a forming round would
//!   take it in, and one not there yet may still come before its containers stop.
//! - **expected**: the agents a forming round waits for, and no others: the Workers of the
//!   run that eto keeps (`status.targetWorkers`) whose pods run with their gate open (see
//!   [`crate::joining`]). Once every one of them has joined a forming round (and at least
//!   `min_nodes`), the store ends its last call and the round forms. Once the run's first
//!   group formed, the store waits no longer for one it took out (its pod gone, its
//!   heartbeat stopped) unless it came back, and for one never there yet, whose training
//!   starts behind a gate that opened, at most [`JOIN_WAIT`] from the orders that first
//!   named it. One away for a moment (its agent restarting for the group) is waited for.
//! - **max_nodes**: the most agents a round takes. An agent that comes to the rendezvous
//!   while the group restarts (a spare, or one of two replacements started together) can find
//!   the round a member short for a moment and wait for the next; torchrun leaves it waiting
//!   once the round formed full without it, and every agent restarts for it, again and again,
//!   another one left over each time. The store moves an agent that waits beside a complete
//!   round of `max_nodes` to the spares, where torchrun puts one that comes to a full round,
//!   and moves agents in the wait list into a forming round at once (up to `max_nodes`), so
//!   that the round fills with them first and forms with any left over made a spare in the
//!   same write, before its members can see one waiting.
//!
//! The policy for replacements follows: after a loss the survivors re-form at once, without
//! a replacement that is still being scheduled or started (its gate shut), and it joins
//! when it comes, with the others started with it: the group re-forms once more. Waiting
//! for it would cost the survivors its whole start (scheduling, image pull, the interpreter
//! and torch's import: tens of seconds on a real cluster, 10 s even on a machine with the
//! image at hand), where forming without it costs one more restart of the group (a few
//! seconds). A replacement whose pod runs and whose gate opened is waited for, up to
//! [`JOIN_WAIT`]: what is left of its start is torchrun's, shorter than a restart of the
//! group, which it would cost when it came a moment after the round formed. The run's first
//! group waits for every Worker that runs, as torchrun's own last call would. Where an
//! expected agent never joins, torchrun's last call still ends the wait.
//!
//! The coordinator answers the orders it holds in its report; eto sends orders only when they
//! differ, and only to a coordinator that reports orders (one that takes them).

use k8s_openapi::api::core::v1::Pod;

use crate::group_report::{GroupOrders, GroupReport};
use crate::pods;

/// The path eto posts the orders to, on the report's port.
pub const ORDERS_PATH: &str = "/orders";

/// How long a forming round waits, at most, for an expected agent whose training starts (its
/// Worker's gate opened, its agent not at the rendezvous yet): about what torchrun's start,
/// `import torch` included, takes, and less than the restart of the whole group that
/// forming without it costs once it comes.
pub const JOIN_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The Workers of a reconcile that leave, or are about to, beside those whose pods show it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Leaving<'a> {
    /// Those this reconcile deletes: gone as surely as a pod being deleted, and told a
    /// reconcile sooner (an agent left at the rendezvous for it may take a place in the round
    /// that forms next).
    pub deleting: &'a [&'a str],
    /// Those being deleted whose save the group waits for: not departed yet (see
    /// [`crate::saving_on_termination`]).
    pub saving: &'a [&'a str],
}

/// The orders for a group whose coordinator reported `report`, with the job's Worker `pods`
/// and those `leaving`, the Workers whose agents may be `expected` (see [`is_expected`]),
/// `min_nodes` and `max_nodes` (0: unbounded); `None` when
/// the coordinator holds them already, takes none, or reported no rendezvous. Agents silent
/// for `dead_after` are gone too (see [`GroupOrders::dead_after`]).
pub fn orders(
    report: &GroupReport,
    pods: &[&Pod],
    leaving: Leaving<'_>,
    mut expected: Vec<String>,
    min_nodes: u32,
    max_nodes: u32,
    dead_after: Option<std::time::Duration>,
) -> Option<GroupOrders> {
    let held = report.orders.as_ref()?;
    let group = report.group.as_ref()?;
    let going = |pod: &Pod| pods::is_terminating(pod) || pods::is_finished(pod);
    let vanished = group.hosts().filter(|host| {
        !pods
            .iter()
            .any(|pod| pod.metadata.name.as_deref() == Some(*host))
    });
    let still_there = pods
        .iter()
        .filter(|pod| going(pod))
        .filter_map(|pod| pod.metadata.name.as_deref())
        .filter(|name| !leaving.saving.contains(name));
    let mut departed: Vec<String> = vanished
        .chain(still_there)
        .chain(leaving.deleting.iter().copied())
        .map(str::to_string)
        .collect();
    departed.sort();
    departed.dedup();
    expected.sort();
    expected.dedup();
    let orders = GroupOrders {
        departed,
        expected,
        min_nodes,
        max_nodes,
        dead_after: dead_after.map_or(0, |after| after.as_secs_f64().ceil() as u64),
        join_wait: JOIN_WAIT.as_secs(),
    };
    (held != &orders).then_some(orders)
}

/// Whether a Worker's agent is at, or about to be at, the rendezvous: its pod runs, is not
/// going, and its gate is open (see [`crate::joining`]) or opens now (`opening`).
pub fn is_expected(pod: &Pod, opening: bool) -> bool {
    pods::phase(pod) == "Running"
        && !pods::is_terminating(pod)
        && (opening || crate::joining::is_open(pod))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn pod(name: &str, phase: &str, deleting: bool, gate: Option<&str>) -> Pod {
        let mut metadata = json!({"name": name});
        if deleting {
            metadata["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
        }
        if let Some(gate) = gate {
            metadata["annotations"] = json!({crate::joining::START_ANNOTATION: gate});
        }
        serde_json::from_value(json!({"metadata": metadata, "status": {"phase": phase}})).unwrap()
    }

    fn report(members: &[&str], waiting: &[&str], held: Option<GroupOrders>) -> GroupReport {
        let member = |host: &&str| json!({"host": host, "heartbeat_age": 1.0});
        serde_json::from_value(json!({
            "saved": [],
            "rendezvous": {"round": 2, "complete": true, "closed": false,
                           "participants": members.len(), "waiting": waiting.len(),
                           "members": members.iter().map(member).collect::<Vec<_>>(),
                           "others": waiting.iter().map(member).collect::<Vec<_>>()},
            "orders": held,
        }))
        .unwrap()
    }

    #[test]
    fn agents_whose_pods_went_depart_and_the_others_stay() {
        let running = pod("ddp-worker-0", "Running", false, Some("go"));
        let deleting = pod("ddp-worker-1", "Running", true, Some("go"));
        let failed = pod("ddp-worker-2", "Failed", false, Some("go"));
        let joining = pod("ddp-worker-5", "Running", false, Some("go"));
        let live_1 = pod("ddp-worker-1", "Running", false, Some("go"));
        let live_2 = pod("ddp-worker-2", "Running", false, Some("go"));
        let cases: [(&str, Vec<&Pod>, Vec<&str>); 4] = [
            (
                "all live",
                vec![&running, &live_1, &live_2, &joining],
                vec![],
            ),
            (
                "one being deleted",
                vec![&running, &deleting, &live_2, &joining],
                vec!["ddp-worker-1"],
            ),
            (
                "one failed, one gone",
                vec![&running, &failed, &joining],
                vec!["ddp-worker-1", "ddp-worker-2"],
            ),
            (
                "none left",
                vec![],
                vec![
                    "ddp-worker-0",
                    "ddp-worker-1",
                    "ddp-worker-2",
                    "ddp-worker-5",
                ],
            ),
        ];
        for (case, pods, departed) in cases {
            let report = report(
                &["ddp-worker-0", "ddp-worker-1", "ddp-worker-2"],
                &["ddp-worker-5"],
                Some(GroupOrders::default()),
            );
            let found = orders(
                &report,
                &pods,
                Leaving::default(),
                vec!["ddp-worker-0".into()],
                2,
                3,
                None,
            );
            assert_eq!(
                found.map(|o| o.departed),
                Some(departed.into_iter().map(String::from).collect::<Vec<_>>()),
                "{case}"
            );
        }
        let report = report(
            &["ddp-worker-0", "ddp-worker-1"],
            &["ddp-worker-5"],
            Some(GroupOrders::default()),
        );
        let all_live = [&running, &live_1, &joining];
        let found = orders(
            &report,
            &all_live,
            Leaving {
                deleting: &["ddp-worker-5"],
                ..Leaving::default()
            },
            vec![],
            2,
            3,
            None,
        );
        assert_eq!(
            found.map(|o| o.departed),
            Some(vec!["ddp-worker-5".to_string()]),
            "one this reconcile deletes departs now, not once its deletion is seen"
        );
    }

    #[test]
    fn a_worker_the_group_waits_for_stays_until_it_saved() {
        let running = pod("ddp-worker-0", "Running", false, Some("go"));
        let evicted = pod("ddp-worker-1", "Running", true, Some("go"));
        let report = report(
            &["ddp-worker-0", "ddp-worker-1"],
            &[],
            Some(GroupOrders {
                departed: vec!["ddp-worker-9".into()],
                ..GroupOrders::default()
            }),
        );
        let pods = [&running, &evicted];
        let saving = orders(
            &report,
            &pods,
            Leaving {
                saving: &["ddp-worker-1"],
                ..Leaving::default()
            },
            vec![],
            1,
            3,
            None,
        );
        assert_eq!(
            saving.map(|o| o.departed),
            Some(vec![]),
            "a member while the group saves"
        );
        let saved = orders(&report, &pods, Leaving::default(), vec![], 1, 3, None);
        assert_eq!(
            saved.map(|o| o.departed),
            Some(vec!["ddp-worker-1".to_string()]),
            "departed once the group saved"
        );
    }

    #[test]
    fn a_worker_going_departs_whether_or_not_the_rendezvous_still_knows_it() {
        let running = pod("ddp-worker-0", "Running", false, Some("go"));
        let deleting = pod("ddp-worker-1", "Running", true, Some("go"));
        let failed = pod("ddp-worker-2", "Failed", false, Some("go"));
        let report = report(&["ddp-worker-0"], &[], Some(GroupOrders::default()));
        let found = orders(
            &report,
            &[&running, &deleting, &failed],
            Leaving {
                deleting: &["ddp-worker-3"],
                ..Leaving::default()
            },
            vec![],
            1,
            3,
            None,
        );
        assert_eq!(
            found.map(|o| o.departed),
            Some(
                ["ddp-worker-1", "ddp-worker-2", "ddp-worker-3"]
                    .map(String::from)
                    .to_vec()
            ),
            "taken out by the store already, their agents may come back until their pods stop"
        );
    }

    #[test]
    fn orders_go_only_where_they_change_something_and_are_taken() {
        let running = pod("ddp-worker-0", "Running", false, Some("go"));
        let held = GroupOrders {
            departed: vec!["ddp-worker-1".into()],
            expected: vec!["ddp-worker-0".into()],
            min_nodes: 1,
            max_nodes: 3,
            dead_after: 0,
            join_wait: JOIN_WAIT.as_secs(),
        };
        let members = ["ddp-worker-0", "ddp-worker-1"];
        let expected = || vec!["ddp-worker-0".to_string(), "ddp-worker-0".to_string()];
        assert_eq!(
            orders(
                &report(&members, &[], Some(held.clone())),
                &[&running],
                Leaving::default(),
                expected(),
                1,
                3,
                None
            ),
            None,
            "held already (the expected hosts deduplicated)"
        );
        assert_eq!(
            orders(
                &report(&members, &[], None),
                &[&running],
                Leaving::default(),
                expected(),
                1,
                3,
                None
            ),
            None,
            "a store that takes no orders"
        );
        let mut no_group = report(&members, &[], Some(GroupOrders::default()));
        no_group.group = None;
        assert_eq!(
            orders(
                &no_group,
                &[&running],
                Leaving::default(),
                expected(),
                1,
                3,
                None
            ),
            None
        );
        assert_eq!(
            orders(
                &report(&members, &[], Some(held.clone())),
                &[&running],
                Leaving::default(),
                expected(),
                2,
                3,
                None
            ),
            Some(GroupOrders {
                min_nodes: 2,
                ..held.clone()
            }),
            "a new minimum"
        );
        assert_eq!(
            orders(
                &report(&members, &[], Some(held.clone())),
                &[&running],
                Leaving::default(),
                expected(),
                1,
                4,
                None
            ),
            Some(GroupOrders {
                max_nodes: 4,
                ..held.clone()
            }),
            "a new maximum"
        );
        assert_eq!(
            orders(
                &report(&members, &[], Some(held.clone())),
                &[&running],
                Leaving::default(),
                expected(),
                1,
                3,
                Some(std::time::Duration::from_millis(14_500))
            )
            .map(|o| o.dead_after),
            Some(15),
            "torchrun's expiry, in whole seconds, rounded up"
        );
    }

    #[test]
    fn an_agent_is_expected_while_its_pod_runs_with_its_gate_open() {
        let cases = [
            (
                "running, gate open",
                pod("w", "Running", false, Some("go")),
                false,
                true,
            ),
            (
                "running, gate opening now",
                pod("w", "Running", false, None),
                true,
                true,
            ),
            (
                "running, gate shut",
                pod("w", "Running", false, None),
                false,
                false,
            ),
            (
                "pending",
                pod("w", "Pending", false, Some("go")),
                true,
                false,
            ),
            (
                "being deleted",
                pod("w", "Running", true, Some("go")),
                true,
                false,
            ),
            ("failed", pod("w", "Failed", false, Some("go")), true, false),
        ];
        for (case, pod, opening, expected) in cases {
            assert_eq!(is_expected(&pod, opening), expected, "{case}");
        }
    }
}
