//! What the rendezvous store of a PyTorchJob reports: the checkpoints the training code said
//! it saved, and the state of the run's rendezvous.
//!
//! The store's pod (see [`super::rendezvous`]) serves its report over HTTP on the report port.
//! The training code says it saved the checkpoint a notice asked for with one request,
//! `POST <ETO_SAVED_URL>` with `{"pod": ..., "step": ..., "since": <the notice's since>}`
//! (`eto_notice.saved(step)` in eto's Python helper sends it); eto reads `GET /report`
//! through the API server's pod proxy before it plans the job. A job whose group re-forms
//! waits for that word before the worker leaves (see [`crate::drain`]).
//!
//! The rendezvous part is torchrun's c10d backend state for the run's id, as the store holds
//! it: its round, whether it is complete, and how many agents take part or wait; the job's
//! status shows it (`rendezvous`), read at each reconcile while the store runs and every
//! [`FORMING_POLL`] while the group forms.

use crate::status::GroupStatus;
use eto_api::well_known::RUN_LABEL;
use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;

use super::rendezvous::HostedRendezvous;
use crate::kind::JobRef;
use crate::pods;

/// How often eto reads the report again while the group forms, to show when it formed.
pub const FORMING_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// The path the training code posts to.
pub const SAVED_PATH: &str = "/saved";
/// The path eto reads.
pub const REPORT_PATH: &str = "/report";

/// Where eto reads a store's report: a pod of the job's namespace and a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportSource {
    /// The store's pod.
    pub pod: String,
    /// Its report port.
    pub port: i32,
}

impl ReportSource {
    /// The pod proxy's path to the report in `namespace`.
    pub fn proxy_path(&self, namespace: &str) -> String {
        pods::proxy_path(namespace, &self.pod, self.port, REPORT_PATH)
    }
}

/// Where to read `job`'s report now: the store of the job's current run runs (its pod among
/// `pods` is running, not being deleted, and of the run).
pub fn source<'p>(
    job: JobRef<'_>,
    pods: impl IntoIterator<Item = &'p Pod>,
) -> Option<ReportSource> {
    let JobRef::PyTorch(pytorch) = job else {
        return None;
    };
    let hosted = HostedRendezvous::of(pytorch)?;
    let name = hosted.store_name();
    let run = crate::plan::current_run(&job.status()).to_string();
    pods.into_iter()
        .find(|pod| pod.metadata.name.as_deref() == Some(name.as_str()))
        .filter(|pod| pods::phase(pod) == "Running" && !pods::is_terminating(pod))
        .filter(|pod| pods::label(pod, RUN_LABEL) == Some(run.as_str()))?;
    Some(ReportSource {
        pod: name,
        port: hosted.report_port(),
    })
}

/// The store's report, as `GET /report` answers it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StoreReport {
    /// The latest checkpoints the training code said it saved, oldest first.
    #[serde(default)]
    pub saved: Vec<SavedCheckpoint>,
    /// The run's rendezvous, once an agent has joined it.
    #[serde(default)]
    pub rendezvous: Option<RendezvousState>,
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

/// torchrun's rendezvous of the run.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct RendezvousState {
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
    /// The agents of the round, as far as the store's program could name them.
    #[serde(default)]
    pub members: Vec<Member>,
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

impl RendezvousState {
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
            complete: self.complete,
            closed: self.closed,
        }
    }

    /// Whether the group is still forming: the round is not complete, or agents wait to
    /// join the next.
    pub fn forming(&self) -> bool {
        !self.complete || self.waiting > 0
    }
}

impl StoreReport {
    /// The `since` of the latest notice the training code said it saved for, if any parses.
    pub fn latest_saved(&self) -> Option<jiff::Timestamp> {
        self.saved
            .iter()
            .filter_map(|saved| saved.since.parse::<jiff::Timestamp>().ok())
            .max()
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_report_reads_as_the_store_program_writes_it() {
        let report: StoreReport = serde_json::from_str(
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
                .rendezvous
                .map(|r| (r.round, r.participants, r.closed, r.closed_for)),
            Some((3, 3, true, Some(12.5)))
        );
        let empty: StoreReport =
            serde_json::from_str(r#"{"saved": [], "rendezvous": null}"#).unwrap();
        assert_eq!(empty.latest_saved(), None);
        assert_eq!(empty, StoreReport::default());
    }

    #[test]
    fn the_report_is_read_from_a_running_store() {
        use serde_json::json;

        let mut job = crate::testing::pytorch_job();
        let mut value = serde_json::to_value(&job).unwrap();
        json_patch::merge(
            &mut value,
            &json!({"spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3},
                             "pytorchReplicaSpecs": {"Master": null}}}),
        );
        job = serde_json::from_value(value).unwrap();
        let store = |phase: &str, deleting: bool| -> Pod {
            let mut metadata = json!({"name": "ddp-rdzv", "labels": {RUN_LABEL: "0"}});
            if deleting {
                metadata["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
            }
            serde_json::from_value(json!({"metadata": metadata, "status": {"phase": phase}}))
                .unwrap()
        };
        let running = store("Running", false);
        let found = source(JobRef::PyTorch(&job), [&running]).expect("read");
        assert_eq!(
            found.proxy_path("team"),
            "/api/v1/namespaces/team/pods/ddp-rdzv:29401/proxy/report"
        );
        for pod in [
            store("Pending", false),
            store("Running", true),
            store("Failed", false),
        ] {
            assert_eq!(source(JobRef::PyTorch(&job), [&pod]), None, "{pod:?}");
        }
        assert_eq!(source(JobRef::PyTorch(&job), []), None, "no store");
        job.status.get_or_insert_default().eto.run = Some(1);
        assert_eq!(
            source(JobRef::PyTorch(&job), [&running]),
            None,
            "the store of an earlier run"
        );
    }
}
