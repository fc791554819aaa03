//! Where eto reads the report of a PyTorchJob's rendezvous store (see
//! [`crate::group_report`]): the store's pod serves it on its report port (see
//! [`super::rendezvous`]); for replica groups, the Lighthouse's status page on its port (see
//! [`super::replica_groups`]).

use eto_api::PyTorchJob;
use eto_api::well_known::RUN_LABEL;
use k8s_openapi::api::core::v1::Pod;

use super::lighthouse_page;
use super::rendezvous::HostedRendezvous;
use super::replica_groups::{ReplicaGroups, group_of};
use crate::group_report::{self, ReportSource};
use crate::job::ServedJob;
use crate::pods;

/// Where to read `job`'s report now: the store (or Lighthouse) of the job's current run runs
/// (its pod among `pods` is running, not being deleted, and of the run).
pub fn source(job: &PyTorchJob, pods: &[&Pod]) -> Option<ReportSource> {
    let (name, port, path, read): (_, _, _, fn(&str) -> _) =
        match (HostedRendezvous::of(job), ReplicaGroups::of(job)) {
            (Some(hosted), _) => (
                hosted.store_name(),
                hosted.report_port(),
                group_report::REPORT_PATH,
                group_report::read_json,
            ),
            (None, Some(groups)) => (
                groups.lighthouse_name(),
                groups.port,
                lighthouse_page::STATUS_PATH,
                lighthouse_page::read,
            ),
            (None, None) => return None,
        };
    let run = job.engine_status().current_run().to_string();
    pods.iter()
        .find(|pod| pod.metadata.name.as_deref() == Some(name.as_str()))
        .filter(|pod| pods::phase(pod) == "Running" && !pods::is_terminating(pod))
        .filter(|pod| pods::label(pod, RUN_LABEL) == Some(run.as_str()))?;
    Some(ReportSource {
        pod: name,
        port,
        path,
        read,
    })
}

/// Where to read the progress `job`'s training serves beside its Lighthouse, whose quorum
/// step says nothing of when it came: the oldest Worker among `pods` of the current run that
/// holds a replica group (a spare waiting for its place trains nothing) and serves its
/// progress (see [`group_report::progress_source`]). `None` for a job without replica groups.
pub fn progress_beside(job: &PyTorchJob, pods: &[&Pod]) -> Option<ReportSource> {
    ReplicaGroups::of(job)?;
    let run = job.engine_status().current_run().to_string();
    let holders: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|pod| group_of(pod).is_some() && pods::label(pod, RUN_LABEL) == Some(run.as_str()))
        .collect();
    group_report::progress_source(&holders)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

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
        let found = source(&job, &[&running]).expect("read");
        assert_eq!(
            found.proxy_path("team"),
            "/api/v1/namespaces/team/pods/ddp-rdzv:29401/proxy/report"
        );
        for pod in [
            store("Pending", false),
            store("Running", true),
            store("Failed", false),
        ] {
            assert_eq!(source(&job, &[&pod]), None, "{pod:?}");
        }
        assert_eq!(source(&job, &[]), None, "no store");
        job.status.get_or_insert_default().eto.run = Some(1);
        assert_eq!(
            source(&job, &[&running]),
            None,
            "the store of an earlier run"
        );
    }

    #[test]
    fn replica_groups_progress_is_read_from_the_oldest_group_that_serves_it() {
        use serde_json::json;

        let groups = |policy: serde_json::Value| -> PyTorchJob {
            let mut value = serde_json::to_value(crate::testing::pytorch_job()).unwrap();
            json_patch::merge(
                &mut value,
                &json!({"spec": {"elasticPolicy": policy, "pytorchReplicaSpecs": {"Master": null}}}),
            );
            serde_json::from_value(value).unwrap()
        };
        let job = groups(json!({"minReplicas": 2, "maxReplicas": 4, "replicaGroups": {}}));
        let worker = |name: &str, group: Option<&str>, run: &str, created: &str| -> Pod {
            let mut labels = json!({RUN_LABEL: run});
            if let Some(group) = group {
                labels[super::super::replica_groups::GROUP_LABEL] = json!(group);
            }
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels, "creationTimestamp": created},
                "spec": {"containers": [{"name": "pytorch", "ports": [
                    {"name": group_report::PROGRESS_PORT_NAME, "containerPort": 29411}]}]},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            }))
            .unwrap()
        };
        let pods = [
            worker("ddp-worker-3", None, "0", "2027-01-15T07:00:00Z"),
            worker("ddp-worker-0", Some("0"), "1", "2027-01-15T07:00:00Z"),
            worker("ddp-worker-10", Some("1"), "0", "2027-01-15T09:00:00Z"),
            worker("ddp-worker-2", Some("2"), "0", "2027-01-15T08:00:00Z"),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let found = progress_beside(&job, &refs).expect("a group serves it");
        assert_eq!(
            found.pod, "ddp-worker-2",
            "not the waiting spare, nor a pod of another run, nor the newer group"
        );
        let torchrun = groups(json!({"minReplicas": 2, "maxReplicas": 4}));
        assert_eq!(
            progress_beside(&torchrun, &refs),
            None,
            "the rendezvous store takes the training's reports itself"
        );
    }
}
