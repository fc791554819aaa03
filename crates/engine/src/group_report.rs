//! What a run's coordinator reports about its group: the checkpoints the training code said
//! it saved, and the state of the group's rendezvous.
//!
//! A kind whose runs have such a coordinator says where its report is read
//! ([`crate::job::ReportingCoordinator::report_source`]; a PyTorchJob whose rendezvous eto hosts
//! serves it from its rendezvous store). The training code says it saved the checkpoint a
//! notice asked for with one request, `POST <ETO_SAVED_URL>` with `{"pod": ..., "step": ...,
//! "since": <the notice's since>}` (`eto_notice.saved(step)` in eto's Python helper sends it);
//! eto reads `GET /report` through the API server's pod proxy before it plans the job. A job
//! whose group re-forms waits for that word before the worker leaves (see [`crate::drain`]).
//!
//! The rendezvous part is the group's state as the coordinator holds it (torchrun's c10d
//! backend state for the run's id): its round, whether it is complete, and how many agents
//! take part or wait; the job's status shows it (`rendezvous`), read at each reconcile while
//! the coordinator runs and every [`FORMING_POLL`] while the group forms.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use crate::goodput::ReportedProgress;
use crate::status::{GroupStatus, Reformation};

use crate::pods;

/// How often eto reads the report again while the group forms, to show when it formed.
pub const FORMING_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// The path the training code posts to.
pub const SAVED_PATH: &str = "/saved";
/// The path eto reads.
pub const REPORT_PATH: &str = "/report";

/// Where eto reads a report: a pod of the job's namespace, a port, and what answers there, as
/// the kind says (see [`crate::job::ReportingCoordinator::report_source`]). Two sources are
/// the same when they name the same pod, port and path.
#[derive(Clone, Debug)]
pub struct ReportSource {
    /// The coordinator's pod.
    pub pod: String,
    /// Its report port.
    pub port: i32,
    /// The path the pod serves its report at.
    pub path: &'static str,
    /// The report the text served there says; `None` if it is not one.
    pub read: fn(&str) -> Option<GroupReport>,
}

impl PartialEq for ReportSource {
    fn eq(&self, other: &Self) -> bool {
        (&self.pod, self.port, self.path) == (&other.pod, other.port, other.path)
    }
}

impl ReportSource {
    /// The pod proxy's path to the report in `namespace`.
    pub fn proxy_path(&self, namespace: &str) -> String {
        pods::proxy_path(namespace, &self.pod, self.port, self.path)
    }

    /// The report `text` says, as this source serves it; `None` if it is not one.
    pub fn read(&self, text: &str) -> Option<GroupReport> {
        (self.read)(text)
    }
}

/// The name of the container port on which a training pod serves its progress (eto's
/// helper, `progress(step)`, without a coordinator to send it to, serves `GET /progress`).
pub const PROGRESS_PORT_NAME: &str = "eto-progress";

/// The path a training pod serves its progress at.
pub const PROGRESS_PATH: &str = "/progress";

/// Where the progress of a job whose kind reads no coordinator's report comes from (and,
/// beside a coordinator that knows only a step it saw, see
/// [`crate::job::ReportingCoordinator::progress_beside`]): the oldest (then the first by name)
/// of `pods` that runs, is ready, is not being deleted and declares a container port named
/// [`PROGRESS_PORT_NAME`]. A job whose pods declare none is not read. The oldest, so that the
/// pod read stays the same while it lives: each pod's helper tells the stretches of training
/// it saw itself.
pub fn progress_source(pods: &[&k8s_openapi::api::core::v1::Pod]) -> Option<ReportSource> {
    pods.iter()
        .filter(|pod| {
            pods::phase(pod) == "Running" && pods::is_ready(pod) && !pods::is_terminating(pod)
        })
        .filter_map(|pod| {
            let port = pod
                .spec
                .iter()
                .flat_map(|spec| &spec.containers)
                .flat_map(|container| container.ports.iter().flatten())
                .find(|port| port.name.as_deref() == Some(PROGRESS_PORT_NAME))?;
            let created = pod.metadata.creation_timestamp.as_ref().map(|time| time.0);
            Some((created, pod.metadata.name.clone()?, port.container_port))
        })
        .min()
        .map(|(_, pod, port)| ReportSource {
            pod,
            port,
            path: PROGRESS_PATH,
            read: read_progress,
        })
}

/// A training pod's progress (`GET /progress`) as a report of its own.
pub fn read_progress(text: &str) -> Option<GroupReport> {
    let progress = serde_json::from_str::<ReportedProgress>(text).ok()?;
    Some(GroupReport {
        progress: Some(progress),
        ..GroupReport::default()
    })
}

/// A report as eto's store program writes it: `GET /report`, a [`GroupReport`] in JSON.
pub fn read_json(text: &str) -> Option<GroupReport> {
    serde_json::from_str(text).ok()
}

/// The coordinator's report, as `GET /report` answers it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct GroupReport {
    /// The latest checkpoints the training code said it saved, oldest first.
    #[serde(default)]
    pub saved: Vec<SavedCheckpoint>,
    /// The run's group as the coordinator holds it (torchrun's rendezvous, for eto's store
    /// program), once an agent has joined it.
    #[serde(default, rename = "rendezvous")]
    pub group: Option<GroupState>,
    /// The orders the coordinator holds (see [`crate::group_orders`]); `None` from one that
    /// takes none.
    #[serde(default)]
    pub orders: Option<GroupOrders>,
    /// The replica groups' quorum, from a Lighthouse's status page.
    #[serde(skip)]
    pub quorum: Option<QuorumReport>,
    /// The latest step the training code reported (`POST /progress`, see
    /// [`crate::goodput`]), once it reported one; one that does not read as a report is
    /// none, and the rest of the report stands.
    #[serde(default, deserialize_with = "progress_or_none")]
    pub progress: Option<ReportedProgress>,
}

impl GroupReport {
    /// Whether the training groups the coordinator reports on all wait for groups that are
    /// gone (see [`QuorumReport::waiting_for_groups`]): none can save, or hear a notice.
    pub fn groups_stuck(&self) -> bool {
        self.quorum
            .as_ref()
            .is_some_and(|quorum| quorum.waiting_for_groups)
    }

    /// The coordinator's report (`coordinator`, if it answered) with the progress a training
    /// pod served beside it (`served`, see
    /// [`crate::job::ReportingCoordinator::progress_beside`]) in place of its own: where a pod
    /// serves the training's steps, the coordinator's step is not taken, even while the pod
    /// does not answer (two sources would tell two different stretches of training).
    pub fn with_served_progress(coordinator: Option<Self>, served: Option<Self>) -> Option<Self> {
        let progress = served.and_then(|served| served.progress);
        match coordinator {
            Some(report) => Some(Self { progress, ..report }),
            None => progress.map(|progress| Self {
                progress: Some(progress),
                ..Self::default()
            }),
        }
    }
}

fn progress_or_none<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ReportedProgress>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

/// Seconds as a coordinator writes them back, whole or not (a store's Python may hold `15.0`),
/// rounded up; anything else reads as 0, so that one odd field does not hide the report.
fn whole_seconds<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(value
        .as_f64()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .map_or(0, |seconds| seconds.ceil() as u64))
}

/// The quorum of a run's replica groups, as their coordinator shows it (a TorchFT
/// Lighthouse's status page, read by the kind's module).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuorumReport {
    /// The latest quorum's id (0 before the first).
    pub quorum_id: i64,
    /// Groups in the latest quorum.
    pub participants: i64,
    /// The highest step of a group in the latest quorum.
    pub step: i64,
    /// Groups heartbeating.
    pub heartbeating: i64,
    /// Every Manager's latest heartbeat the page lists: its replica id (`<id>:<uuid>`) and the
    /// seconds since it came. A Manager that stopped (its group frozen or cut off) stays
    /// listed, its heartbeat ageing.
    pub heartbeats: Vec<(String, f64)>,
    /// Whether every group heartbeating waits in a quorum that cannot form without more
    /// groups (fewer have asked than the coordinator's minimum): none of them trains a step,
    /// or can save one, until groups come.
    pub waiting_for_groups: bool,
}

/// One word of the training code that it saved.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct SavedCheckpoint {
    /// The pod that said it.
    #[serde(default)]
    pub pod: String,
    /// The step it saved, if it said.
    #[serde(default)]
    pub step: Option<i64>,
    /// The `since` of the notice it answers (RFC 3339).
    pub since: String,
}

/// The run's group as its store holds it: torchrun's rendezvous, for eto's store program.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct GroupState {
    /// The round: one more each time the group re-forms.
    pub round: i64,
    /// Whether the round's group has formed.
    pub complete: bool,
    /// Whether an agent closed it (the run's training ended, or an agent failed for good).
    pub closed: bool,
    /// For how long the store has seen it closed, in seconds (it looks every second).
    #[serde(default)]
    pub closed_for: Option<f64>,
    /// The agents of the round.
    pub participants: i64,
    /// Agents waiting for the next round.
    pub waiting: i64,
    /// Agents waiting beside a full round as spares (torch 2.3 and later; see
    /// [`crate::spares`]); reported by eto's store program since spares exist.
    #[serde(default)]
    pub spares: i64,
    /// The agents of the round, as far as the store's program could name them.
    #[serde(default)]
    pub members: Vec<Member>,
    /// The agents waiting for the next round (and, on torch 2.x, those waiting as spares).
    #[serde(default)]
    pub others: Vec<Member>,
    /// The latest rounds that formed, oldest first.
    #[serde(default)]
    pub reformations: Vec<FormedRound>,
}

/// A round that formed, as the store saw it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct FormedRound {
    /// The round.
    pub round: i64,
    /// When the group before it broke up (RFC 3339); `None` for the run's first group.
    #[serde(default)]
    pub since: Option<String>,
    /// When it formed (RFC 3339).
    pub formed: String,
    /// Seconds from `since` to `formed`.
    #[serde(default)]
    pub paused: Option<f64>,
    /// The hosts of its agents.
    #[serde(default)]
    pub members: Vec<String>,
    /// Hosts of the group before it that it lacks.
    #[serde(default)]
    pub left: Vec<String>,
    /// Hosts new in it.
    #[serde(default)]
    pub joined: Vec<String>,
}

impl FormedRound {
    /// The round as the status shows it, its times in whole seconds as the status keeps them
    /// (so that it compares equal to itself read back); `None` for the run's first group (it
    /// re-formed nothing) or a time that does not parse.
    pub fn reformation(&self) -> Option<Reformation> {
        let since = self.since.as_deref()?.parse::<jiff::Timestamp>().ok()?;
        let formed = self.formed.parse::<jiff::Timestamp>().ok()?;
        Some(Reformation {
            round: self.round,
            since: Some(Time(crate::time::as_stored(since))),
            formed: Time(crate::time::as_stored(formed)),
            paused: self.paused.map(|seconds| format!("{seconds:.1}s")),
            left: self.left.clone(),
            joined: self.joined.clone(),
        })
    }
}

/// An agent of a round.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Member {
    /// Its host: the pod it runs in (the first label of the name it joined with).
    pub host: String,
    /// Seconds since its heartbeat last came, if one did: an agent keeps beating while it
    /// lives, whatever its training does.
    #[serde(default)]
    pub heartbeat_age: Option<f64>,
}

impl GroupState {
    /// The pods whose agents train in the round's group: the round formed, and their
    /// heartbeat came within `dead_after` (after which torchrun itself takes an agent for
    /// dead). An agent that left to re-form the group, or waits to join one, trains nothing.
    pub fn training_hosts(&self, dead_after: std::time::Duration) -> Vec<&str> {
        if !self.complete {
            return Vec::new();
        }
        self.members
            .iter()
            .filter(|member| {
                member
                    .heartbeat_age
                    .is_some_and(|age| age < dead_after.as_secs_f64())
            })
            .map(|member| member.host.as_str())
            .collect()
    }

    /// The state as the job's status shows it.
    pub fn status(&self) -> GroupStatus {
        GroupStatus {
            round: self.round,
            members: self.participants,
            waiting: self.waiting,
            spares: self.spares,
            complete: self.complete,
            closed: self.closed,
            last_reformation: self.last_reformation(),
        }
    }

    /// The latest time the group re-formed, if it did.
    pub fn last_reformation(&self) -> Option<Reformation> {
        self.last_reformed_round()?.reformation()
    }

    /// The latest round that re-formed the group (not the run's first group), if any.
    pub fn last_reformed_round(&self) -> Option<&FormedRound> {
        self.reformations
            .iter()
            .rev()
            .find(|round| round.reformation().is_some())
    }

    /// The hosts of the round's members.
    pub fn member_hosts(&self) -> Vec<&str> {
        self.members
            .iter()
            .map(|member| member.host.as_str())
            .collect()
    }

    /// Every host the rendezvous knows: its members and the agents waiting.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.members
            .iter()
            .chain(&self.others)
            .map(|member| member.host.as_str())
    }

    /// Whether the group is still forming: the round is not complete, or agents wait to
    /// join the next.
    pub fn forming(&self) -> bool {
        !self.complete || self.waiting > 0
    }
}

impl GroupReport {
    /// The `since` of the latest notice the training code said it saved for, if any parses.
    pub fn latest_saved(&self) -> Option<jiff::Timestamp> {
        self.saved
            .iter()
            .filter_map(|saved| saved.since.parse::<jiff::Timestamp>().ok())
            .max()
    }
}

/// eto's orders to the coordinator.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub struct GroupOrders {
    /// Hosts (pod names) whose agents leave the rendezvous now.
    #[serde(default)]
    pub departed: Vec<String>,
    /// Hosts whose agents a forming round waits for and no others.
    #[serde(default)]
    pub expected: Vec<String>,
    /// The fewest agents a round forms with (`minReplicas`).
    #[serde(default)]
    pub min_nodes: u32,
    /// The most agents a round takes (`maxReplicas`, torchrun's `--nnodes` maximum); 0: not
    /// said. An agent that waits beside a complete round this full waits as a spare.
    #[serde(default)]
    pub max_nodes: u32,
    /// Seconds without a heartbeat after which an agent is gone, as torchrun judges it (its
    /// `keep_alive_interval` times `keep_alive_max_attempt`); 0: never.
    #[serde(default, deserialize_with = "whole_seconds")]
    pub dead_after: u64,
    /// Seconds a forming round waits, at most, for an expected agent that has never been at
    /// the rendezvous (its training starts), from the orders that first named it; once a
    /// round formed, an expected agent the store took out (its pod gone, its heartbeat
    /// stopped) is not waited for unless it came back.
    #[serde(default, deserialize_with = "whole_seconds")]
    pub join_wait: u64,
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn orders_held_with_seconds_written_as_fractions_still_read() {
        let report: GroupReport = serde_json::from_value(serde_json::json!({
            "saved": [{"pod": "ddp-worker-0", "step": 12, "since": "2027-01-15T08:00:00Z"}],
            "rendezvous": null,
            "orders": {"departed": [], "expected": ["ddp-worker-0"], "min_nodes": 2,
                       "max_nodes": 3, "dead_after": 14.5, "join_wait": 15.0}
        }))
        .expect("the report reads");
        let orders = report.orders.expect("its orders");
        assert_eq!((orders.dead_after, orders.join_wait), (15, 15));
        assert_eq!(
            report.saved.len(),
            1,
            "the training's word is not lost with them"
        );
    }

    #[test]
    fn a_pod_that_declares_its_progress_port_is_read_oldest_first_once_it_runs() {
        let pod = |name: &str,
                   port: Option<&str>,
                   ready: bool|
         -> k8s_openapi::api::core::v1::Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "creationTimestamp": "2027-01-15T08:00:00Z"},
                "spec": {"containers": [{"name": "main", "ports": port.map(|port| vec![
                    serde_json::json!({"name": port, "containerPort": 29411})
                ])}]},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            }))
            .unwrap()
        };
        let pods = [
            pod("job-worker-2", Some(PROGRESS_PORT_NAME), true),
            pod("job-worker-0", Some(PROGRESS_PORT_NAME), false),
            pod("job-worker-1", Some(PROGRESS_PORT_NAME), true),
            pod("job-launcher", Some("http"), true),
        ];
        let refs: Vec<&k8s_openapi::api::core::v1::Pod> = pods.iter().collect();
        let source = progress_source(&refs).expect("a source");
        assert_eq!((source.pod.as_str(), source.port), ("job-worker-1", 29411));
        assert_eq!(
            source.proxy_path("team"),
            "/api/v1/namespaces/team/pods/job-worker-1:29411/proxy/progress"
        );
        let report = source
            .read(r#"{"step": 7, "at": "2027-01-15T08:00:05Z", "first_step": 1, "first_at": "2027-01-15T08:00:00Z"}"#)
            .expect("a report");
        assert_eq!(report.progress.map(|p| p.step), Some(7));
        assert!(source.read("{}").is_none());
        assert_eq!(progress_source(&refs[3..]), None, "no pod declares it");

        // A pod that replaced another (`job-worker-10` sorts before `job-worker-2`) is read
        // only once the older ones are gone.
        let mut newer = pod("job-worker-10", Some(PROGRESS_PORT_NAME), true);
        newer.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2027-01-15T09:00:00Z".parse().unwrap(),
            ));
        let with_newer = [&newer, refs[0], refs[2]];
        let source = progress_source(&with_newer).expect("a source");
        assert_eq!(source.pod, "job-worker-1");
        let source = progress_source(&with_newer[..1]).expect("a source");
        assert_eq!(source.pod, "job-worker-10");
    }

    #[test]
    fn progress_a_pod_serves_replaces_the_coordinators_step() {
        let lighthouse = |step| GroupReport {
            quorum: Some(QuorumReport {
                step,
                ..QuorumReport::default()
            }),
            progress: Some(ReportedProgress {
                step,
                at: None,
                first_step: None,
                first_at: None,
                total: None,
                restored: None,
                ended: None,
                source: crate::goodput::ProgressSource::Lighthouse,
            }),
            ..GroupReport::default()
        };
        let served = read_progress(
            r#"{"step": 41, "at": "2027-01-15T08:00:05Z", "first_step": 1, "first_at": "2027-01-15T08:00:00Z"}"#,
        );
        let both = GroupReport::with_served_progress(Some(lighthouse(40)), served.clone())
            .expect("a report");
        assert_eq!(both.quorum.map(|q| q.step), Some(40), "the quorum stays");
        let progress = both.progress.expect("the pod's progress");
        assert_eq!(
            (progress.step, progress.source),
            (41, crate::goodput::ProgressSource::TrainingReports)
        );
        let silent =
            GroupReport::with_served_progress(Some(lighthouse(40)), None).expect("a report");
        assert_eq!(silent.progress, None, "not the Lighthouse's step instead");
        let alone = GroupReport::with_served_progress(None, served).expect("a report");
        assert_eq!(alone.progress.map(|p| p.step), Some(41));
        assert_eq!(GroupReport::with_served_progress(None, None), None);
    }

    #[test]
    fn a_report_reads_as_the_store_program_writes_it() {
        let report: GroupReport = serde_json::from_str(
            r#"{"saved": [{"pod": "ddp-worker-1", "step": 12, "since": "2027-01-15T08:00:05Z"},
                          {"pod": "ddp-worker-0", "step": null, "since": "2027-01-15T08:00:00Z"},
                          {"pod": "x", "step": 1, "since": "not a time"}],
                "rendezvous": {"round": 3, "complete": true, "closed": true,
                               "participants": 3, "waiting": 1, "closed_for": 12.5}}"#,
        )
        .unwrap();
        assert_eq!(
            report.latest_saved(),
            Some("2027-01-15T08:00:05Z".parse().unwrap()),
            "the latest notice answered, whatever the order"
        );
        assert_eq!(
            report
                .group
                .map(|r| (r.round, r.participants, r.closed, r.closed_for)),
            Some((3, 3, true, Some(12.5)))
        );
        let with_steps: GroupReport = serde_json::from_str(
            r#"{"saved": [], "rendezvous": null, "progress": {"step": 120,
                "at": "2027-01-15T08:10:00.250000Z", "first_step": 101,
                "first_at": "2027-01-15T08:09:40Z", "total": 1000,
                "restored": {"from": "2027-01-15T08:09:30Z", "to": "2027-01-15T08:09:36Z"}}}"#,
        )
        .unwrap();
        let progress = with_steps.progress.unwrap();
        assert_eq!(
            (progress.step, progress.first_step, progress.total),
            (120, Some(101), Some(1000))
        );
        assert_eq!(
            progress.at,
            Some(
                "2027-01-15T08:10:00.25Z"
                    .parse::<jiff::Timestamp>()
                    .unwrap()
            )
        );
        let garbled: GroupReport = serde_json::from_str(
            r#"{"saved": [], "rendezvous": {"round": 3, "complete": true, "closed": false,
                "participants": 3, "waiting": 0}, "progress": {"step": "x"}}"#,
        )
        .unwrap();
        assert_eq!(garbled.progress, None, "a garbled progress is none");
        assert_eq!(garbled.group.map(|g| g.round), Some(3), "the rest stands");
        let empty: GroupReport =
            serde_json::from_str(r#"{"saved": [], "rendezvous": null}"#).unwrap();
        assert_eq!(empty.latest_saved(), None);
        assert_eq!(empty, GroupReport::default());
    }
}
