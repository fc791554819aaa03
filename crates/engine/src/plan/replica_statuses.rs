//! The replica statuses of a job's status: its launcher's and its workers' pods, counted
//! by phase, with what the platform took counted apart.

use std::collections::BTreeMap;

use eto_api::common::ReplicaType;
use eto_api::well_known::WORKER_ROLE;
use k8s_openapi::api::core::v1::Pod;

use crate::job::Kind;
use crate::loss::Loss;
use crate::pods;

pub(super) fn replica_statuses(
    kind: Kind,
    pods: &[&Pod],
) -> BTreeMap<ReplicaType, eto_api::common::ReplicaStatus> {
    let mut statuses = BTreeMap::new();
    for (replica, role) in [
        (ReplicaType::Launcher, kind.vocabulary().launcher_role),
        (ReplicaType::Worker, WORKER_ROLE),
    ] {
        let of_role = pods
            .iter()
            .filter(|p| pods::label(p, kind.vocabulary().role_label) == Some(role));
        let mut status = eto_api::common::ReplicaStatus::default();
        for pod in of_role {
            match pods::phase(pod) {
                "Running" if !pods::is_terminating(pod) => status.active += 1,
                "Succeeded" => status.succeeded += 1,
                // What the platform took is not the training's failure.
                "Failed"
                    if matches!(
                        Loss::of(Some(pod)),
                        Some(Loss::Evicted { .. } | Loss::Disrupted(_))
                    ) =>
                {
                    status.preempted += 1;
                }
                "Failed" => status.failed += 1,
                _ => {}
            }
        }
        statuses.insert(replica, status);
    }
    statuses
}
