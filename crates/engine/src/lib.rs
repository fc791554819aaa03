//! The pure planning core of eto.
//!
//! Everything here is a synchronous function of its inputs: no API client, no async runtime,
//! no clock (time is passed in). The controller observes the cluster, asks this crate what
//! should exist, and applies the answer.
//!
//! Start with [`plan::plan`], the decision function of a reconcile: from a job and its observed
//! children to the objects to apply and delete, the status and the events. Every kind of job
//! goes through it as a [`kind::JobRef`]: it validates the job with [`kind::JobRef::validate`],
//! which maps any kind onto one [`EffectiveSpec`], decides the workers with [`target_workers::decide`],
//! builds objects with [`build`] and the kind's module, renders host discovery with
//! [`discovery`], and reports the status in the kind's own form ([`kind::ApiStatus`]). What a
//! kind contributes lives in its module under [`kind`].
//!
//! # Where each rule lives
//! - The run's states (waiting for the minimum, at it, below it, suspending, suspended) and
//!   their transitions: `plan/run/state.rs` and `plan/run/suspension.rs`; a launcher the
//!   platform takes: `plan/run/launcher_loss.rs`; a torchrun group that cannot go on:
//!   `plan/run/lost_group.rs`; a run the workers' own failure ended:
//!   `plan/run/worker_failure.rs`; the launcher: `plan/run/launcher.rs`; a run's own end (its
//!   success, its deadline, a restart): `plan/run/outcome.rs`; what keeps it from going on:
//!   `plan/run/stalls.rs`; notices and gates: `plan/run/notices.rs`; the phase:
//!   `plan/run/phase.rs`; the order of all these: `plan/run/mod.rs`; a finished job:
//!   `plan/mod.rs`.
//! - Whether the platform, not the training code, took a pod: [`disruption`]; where a
//!   launcher would rather not run: [`spot_capacity`].
//! - Which workers a job should have: [`target_workers`]; why a worker stopped counting: [`loss`];
//!   the blacklist and the rule that an index is never used again: [`blacklist`]; nodes to
//!   avoid: [`cooldown`]; draining removed workers: [`drain`].
//! - ScaleIn and ScaleOut requests: [`scaling`]; notices to the training code: [`notice`],
//!   and the `kubeai` SDK's stop signal with them: [`kubeai`]; PodGroups: [`gang`].
//! - Nodes that announced they go away (advance warnings of a spot reclaim), and what their
//!   workers count as: [`node_warnings`].
//! - A job's children, as the operator and `kubectl eto` both select them: [`children`].

pub mod applied;
pub mod blacklist;
pub mod build;
pub mod child;
pub mod children;
pub mod conditions;
pub mod cooldown;
pub mod discovery;
pub mod disruption;
pub mod drain;
pub mod effective_spec;
pub mod gang;
pub mod joining;
pub mod kind;
pub mod kubeai;
pub mod loss;
pub mod names;
pub mod node_warnings;
pub mod notice;
pub mod parse;
pub mod plan;
pub mod pod_metadata;
pub mod pods;
pub mod quantity;
pub mod regroup;
pub mod scaling;
pub mod spot_capacity;
pub mod status;
pub mod target_workers;
pub mod time;
pub mod validation;

#[cfg(test)]
mod testing;

pub use effective_spec::EffectiveSpec;
pub use plan::{Observed, Plan, plan};
pub use validation::{FieldError, InvalidSpec};
