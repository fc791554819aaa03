//! New workers: created from the kind's worker pod, away from the nodes in cooldown and those
//! that announced they go, stamped with their template's digest (see `template_change.rs`),
//! seated in their group (a waiting spare takes a group no worker holds first), and, for a
//! group that re-forms once it formed, started together behind their gate (see
//! [`crate::joining`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::{Child, SPARE_TAKES_PLACE};
use super::worker_backoff::BackedOff;
use super::{Run, RunState, template_change};
use crate::pod_metadata::PodMetadata;
use crate::target_workers::WorkerDecision;
use crate::{joining, names, node_warnings};

impl Run<'_, '_> {
    /// Creates the workers `decision` creates, but those `backed_off` holds, unless the run
    /// `holds` new workers; seats the target's groups, beside its `spares`, among `current`.
    pub(super) fn create_workers(
        &mut self,
        decision: &WorkerDecision,
        current: &BTreeMap<u32, &Pod>,
        backed_off: &BackedOff,
        holds: bool,
        spares: u32,
    ) {
        let name = self.name().to_string();
        let to_create: Vec<u32> = decision
            .create
            .iter()
            .copied()
            .filter(|index| !backed_off.held.contains(index))
            .collect();
        let creates = !to_create.is_empty() && !holds;
        // New workers avoid the nodes in cooldown and those that announced they go.
        let mut avoided = self.planner.status.nodes_in_cooldown.clone();
        avoided.extend(node_warnings::avoided(&self.planner.warned));
        let digest = self.worker_template_digest();
        let mut new: BTreeMap<u32, Pod> = to_create
            .iter()
            .filter(|_| creates)
            .filter_map(|index| {
                let mut pod = self.job().worker_pod(*index, &avoided)?;
                template_change::stamp(&mut pod.metadata, digest.clone());
                Some((*index, pod))
            })
            .collect();
        // A replica group no worker holds takes its id: a waiting spare first, else a new
        // worker (see kind::pytorch_job::replica_groups).
        let pods_per_group = self.context.job_ref.pods_per_group().max(1);
        let held_groups = u32::try_from(decision.target.len())
            .unwrap_or(u32::MAX)
            .saturating_sub(spares)
            .div_ceil(pods_per_group);
        let promoted =
            self.context
                .job_ref
                .seat_workers(held_groups, &decision.target, current, &mut new);
        self.promote_spares(&promoted, current);
        if creates {
            let created: Vec<String> = to_create.iter().map(|i| names::worker(&name, *i)).collect();
            // A group that re-forms gathers its first workers itself; those joining it once
            // it formed start together, behind their gate (see crate::joining).
            let starts_at_once = self.context.job_ref.coordinator().group_reforms
                && !matches!(
                    self.state,
                    RunState::AtMinimum | RunState::BelowMinimum { .. }
                );
            for mut pod in new.into_values() {
                if starts_at_once {
                    pod.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(joining::START_ANNOTATION.into(), joining::GO.into());
                }
                self.planner.plan.apply.push(Child::Pod(Box::new(pod)));
            }
            self.planner.event(
                false,
                "WorkersCreated",
                "Create",
                format!("created workers {}", created.join(", ")),
            );
        }
    }

    /// Shows each waiting spare of `promoted` (by index, among `current`) the labels of the
    /// place it takes, and says so once.
    fn promote_spares(
        &mut self,
        promoted: &BTreeMap<u32, BTreeMap<String, String>>,
        current: &BTreeMap<u32, &Pod>,
    ) {
        for (index, labels) in promoted {
            let Some(pod) = current.get(index) else {
                continue;
            };
            let desired = ObjectMeta {
                labels: Some(labels.clone()),
                ..ObjectMeta::default()
            };
            let Some(change) = PodMetadata::change(&desired, &pod.metadata, &[]) else {
                continue;
            };
            let place = labels
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect::<Vec<_>>()
                .join(", ");
            self.planner.event(
                false,
                SPARE_TAKES_PLACE,
                "Promote",
                format!("spare worker {} takes the place {place}", change.name),
            );
            self.planner.plan.apply.push(Child::PodMetadata(change));
        }
    }
}
