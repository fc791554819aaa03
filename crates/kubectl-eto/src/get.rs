//! `kubectl eto get`: the jobs, or one job with its workers, launcher, conditions and events.

use eto_engine::job::JobRef;
use eto_engine::own_failure::OwnFailure;
use eto_engine::pods;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::children;
use crate::error::{Error, Request};
use crate::jobs::{self, Job, Summary};
use crate::output::Format;
use crate::table::{Table, age};

/// The table of jobs: kind, phase, workers ready/desired/min/max, restarts, goodput and the
/// largest loss, age.
pub fn summaries_table(
    summaries: &[Summary],
    with_namespace: bool,
    now: jiff::Timestamp,
) -> String {
    let mut header = vec![
        "KIND", "NAME", "PHASE", "READY", "DESIRED", "MIN", "MAX", "RESTARTS", "GOODPUT",
        "LOST TO", "AGE",
    ];
    if with_namespace {
        header.insert(0, "NAMESPACE");
    }
    let mut table = Table::new(&header);
    for summary in summaries {
        let mut row = vec![
            summary.kind.clone(),
            summary.name.clone(),
            summary.phase.clone(),
            summary.ready.to_string(),
            summary.desired.to_string(),
            summary.min.to_string(),
            summary.max.map_or("-".into(), |max| max.to_string()),
            summary.restarts.to_string(),
        ];
        let (goodput, lost) = summary.goodput_at(now);
        row.extend([goodput, lost, age(summary.created, now)]);
        if with_namespace {
            row.insert(0, summary.namespace.clone());
        }
        table.row(row);
    }
    table.render()
}

/// A job's ledger in one line: its productive share, then each other bucket with time in it,
/// largest first, and where its steps came from.
fn goodput_line(ledger: &eto_engine::goodput::Goodput, now: jiff::Timestamp) -> String {
    use eto_engine::goodput;
    let seconds = goodput::at(ledger, now);
    let Some(ratio) = goodput::ratio(&seconds) else {
        return "-".into();
    };
    let mut line = format!("{:.1}% productive", 100.0 * ratio);
    for bucket in goodput::losses(&seconds) {
        line.push_str(&format!(", {} {:.0}s", bucket.name(), seconds.get(bucket)));
    }
    let source = ledger.source.describe();
    if let Some(step) = ledger.highest_step {
        line.push_str(&format!(" (step {step}"));
        if ledger.retrained_steps > 0 {
            line.push_str(&format!(", {} trained twice", ledger.retrained_steps));
        }
        line.push_str(&format!("; {source})"));
    } else {
        line.push_str(&format!(" ({source})"));
    }
    line
}

/// `kubectl eto get` without a name.
pub async fn list(
    client: &Client,
    namespace: Option<&str>,
    format: Format,
    now: jiff::Timestamp,
) -> Result<String, Error> {
    let summaries: Vec<Summary> = jobs::list(client, namespace)
        .await?
        .iter()
        .map(Summary::of)
        .collect();
    match format {
        Format::Table if summaries.is_empty() => Ok(match namespace {
            Some(namespace) => format!("No jobs found in namespace {namespace}.\n"),
            None => "No jobs found.\n".into(),
        }),
        Format::Table => Ok(summaries_table(&summaries, namespace.is_none(), now)),
        _ => format.render(&summaries),
    }
}

/// One worker of a job as `kubectl eto get JOB` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRow {
    /// Pod name.
    pub pod: String,
    /// Node, once scheduled.
    pub node: Option<String>,
    /// Pod phase, or `Gone` for a blacklisted worker whose pod was deleted.
    pub phase: String,
    /// GPUs the worker asks for.
    pub gpus: u32,
    /// Whether it is ready.
    pub ready: bool,
    /// Why it is blacklisted, or lost, if it is.
    pub note: Option<String>,
}

/// A condition of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionRow {
    /// Type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// An event about a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    /// When it last happened.
    pub time: Option<jiff::Timestamp>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// Everything `kubectl eto get JOB` shows.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Detail {
    /// The job's line of the list.
    pub summary: Summary,
    /// What its users call the pod that coordinates its runs: `launcher`, `Master`,
    /// `rendezvous store`.
    pub launcher_called: String,
    /// That pod (its launcher's, its Master's, its rendezvous store's), phase and node.
    pub launcher: Option<WorkerRow>,
    /// Its workers, live and blacklisted.
    pub workers: Vec<WorkerRow>,
    /// Its conditions.
    pub conditions: Vec<ConditionRow>,
    /// Its most recent events, oldest first.
    pub events: Vec<EventRow>,
}

/// Events shown at most.
const RECENT_EVENTS: usize = 10;

fn gpus(pod: &Pod) -> u32 {
    let quantity = |resources: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| {
        resources
            .and_then(|r| r.get(eto_engine::validation::GPU_RESOURCE))
            .and_then(|q| q.0.parse::<u32>().ok())
    };
    pod.spec
        .iter()
        .flat_map(|spec| &spec.containers)
        .map(|container| {
            let resources = container.resources.as_ref();
            quantity(resources.and_then(|r| r.requests.as_ref()))
                .or_else(|| quantity(resources.and_then(|r| r.limits.as_ref())))
                .unwrap_or(0)
        })
        .sum()
}

fn pod_row(pod: &Pod, note: Option<String>) -> WorkerRow {
    // As `kubectl get pods` shows a pod that fails on its own: the kubelet's reason.
    let note = note.or_else(|| {
        OwnFailure::of(pod).map(|failure| match failure.exit_code {
            Some(code) if !failure.waits => format!("{} (exit code {code})", failure.reason),
            _ => failure.reason,
        })
    });
    WorkerRow {
        pod: pod.metadata.name.clone().unwrap_or_default(),
        node: pods::node(pod).map(String::from),
        phase: if pods::is_terminating(pod) {
            "Terminating".into()
        } else {
            pods::phase(pod).into()
        },
        gpus: gpus(pod),
        ready: pods::is_ready(pod),
        note,
    }
}

impl Detail {
    /// Gathers the detail of `job` from the cluster.
    pub async fn fetch(client: &Client, job: &Job) -> Result<Self, Error> {
        let job_ref = job.as_ref();
        let children = children::fetch(client, job_ref).await?;
        let status = job_ref.status();
        let blacklisted = |pod: &str| {
            status
                .blacklist
                .iter()
                .find(|entry| entry.pod == pod)
                .map(|entry| format!("blacklisted: {}", entry.reason))
        };
        let mut workers: Vec<WorkerRow> = children
            .workers(job_ref)
            .into_iter()
            .map(|pod| {
                pod_row(
                    pod,
                    blacklisted(pod.metadata.name.as_deref().unwrap_or_default()),
                )
            })
            .collect();
        for entry in &status.blacklist {
            if !workers.iter().any(|w| w.pod == entry.pod) {
                workers.push(WorkerRow {
                    pod: entry.pod.clone(),
                    node: entry.node.clone(),
                    phase: "Gone".into(),
                    gpus: 0,
                    ready: false,
                    note: Some(format!("blacklisted: {}", entry.reason)),
                });
            }
        }
        let conditions = status
            .conditions
            .iter()
            .map(|c| ConditionRow {
                type_: c.type_.clone(),
                status: format!("{:?}", c.status),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            })
            .collect();
        Ok(Self {
            summary: Summary::of(job),
            launcher_called: job_ref.launcher_called().to_string(),
            launcher: children
                .coordinator_pod(job_ref)
                .map(|pod| pod_row(pod, None)),
            workers,
            conditions,
            events: events(client, job_ref).await?,
        })
    }

    /// The detail as text.
    pub fn render(&self, now: jiff::Timestamp) -> String {
        let s = &self.summary;
        let mut out = String::new();
        let field = |out: &mut String, name: &str, value: &str| {
            let label = format!("{name}:");
            let width = label.len().max(10) + 1;
            out.push_str(&format!("{label:<width$}{value}\n"));
        };
        field(&mut out, "Name", &s.name);
        field(&mut out, "Namespace", &s.namespace);
        field(&mut out, "Kind", &s.kind);
        field(
            &mut out,
            "Phase",
            if s.phase.is_empty() {
                "<not seen by eto yet>"
            } else {
                &s.phase
            },
        );
        let max = s.max.map_or("unbounded".into(), |max| max.to_string());
        field(
            &mut out,
            "Workers",
            &format!(
                "{} ready, {} pending, {} desired (min {}, max {max})",
                s.ready, s.pending, s.desired, s.min
            ),
        );
        field(&mut out, "Restarts", &s.restarts.to_string());
        if let Some(ledger) = &s.goodput {
            field(&mut out, "Goodput", &goodput_line(ledger, now));
        }
        if let Some(failing) = self
            .conditions
            .iter()
            .find(|c| c.type_ == "PodsFailing" && c.status == "True")
        {
            field(
                &mut out,
                "Failing",
                &format!("{}: {}", failing.reason, failing.message),
            );
        }
        let launcher = match &self.launcher {
            Some(l) => format!(
                "{}   {}{}",
                l.pod,
                l.phase,
                l.node
                    .as_ref()
                    .map(|n| format!(" on {n}"))
                    .unwrap_or_default()
            ),
            None => "<none>".into(),
        };
        field(&mut out, &capitalized(&self.launcher_called), &launcher);
        field(&mut out, "Age", &age(s.created, now));

        out.push_str("\nWorkers:\n");
        if self.workers.is_empty() {
            out.push_str("  <none>\n");
        } else {
            let mut table = Table::new(&["POD", "NODE", "PHASE", "GPUS", "READY", "NOTE"]);
            for w in &self.workers {
                table.row(vec![
                    w.pod.clone(),
                    w.node.clone().unwrap_or_else(|| "<none>".into()),
                    w.phase.clone(),
                    w.gpus.to_string(),
                    w.ready.to_string(),
                    w.note.clone().unwrap_or_default(),
                ]);
            }
            out.push_str(&indent(&table.render()));
        }

        out.push_str("\nConditions:\n");
        let mut table = Table::new(&["TYPE", "STATUS", "REASON", "MESSAGE"]);
        for c in &self.conditions {
            table.row(vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            ]);
        }
        out.push_str(&if table.is_empty() {
            "  <none>\n".into()
        } else {
            indent(&table.render())
        });

        out.push_str("\nEvents:\n");
        let mut table = Table::new(&["AGE", "TYPE", "REASON", "MESSAGE"]);
        for e in &self.events {
            table.row(vec![
                age(e.time, now),
                e.type_.clone(),
                e.reason.clone(),
                e.message.clone(),
            ]);
        }
        out.push_str(&if table.is_empty() {
            "  <none>\n".into()
        } else {
            indent(&table.render())
        });
        out
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

/// The most recent events about `job`, oldest first.
async fn events(client: &Client, job: JobRef<'_>) -> Result<Vec<EventRow>, Error> {
    let namespace = job.namespace();
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let selector = format!(
        "involvedObject.name={},involvedObject.kind={}",
        job.name(),
        job.kind().vocabulary().name
    );
    let listed = api
        .list(&ListParams::default().fields(&selector))
        .await
        .map_err(|error| {
            Request {
                verb: "list",
                resource: "events",
                namespace: Some(namespace),
            }
            .failed(error)
        })?;
    let mut rows: Vec<EventRow> = listed
        .items
        .into_iter()
        .map(|event| EventRow {
            time: event
                .last_timestamp
                .map(|t| t.0)
                .or(event.event_time.map(|t| t.0))
                .or(event.metadata.creation_timestamp.map(|t| t.0)),
            type_: event.type_.unwrap_or_default(),
            reason: event.reason.unwrap_or_default(),
            message: event.message.unwrap_or_default(),
        })
        .collect();
    rows.sort_by_key(|row| row.time);
    let skip = rows.len().saturating_sub(RECENT_EVENTS);
    Ok(rows.split_off(skip))
}

/// `text` with its first letter in upper case, as a field's name.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
