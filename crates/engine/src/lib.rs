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
//! builds objects with [`builders`] and the kind's module, renders host discovery with
//! [`discovery`], and reports the status in the kind's own form ([`kind::ApiStatus`]). What a
//! kind contributes lives in its module under [`kind`].
//!
//! # Where each rule lives
//! `docs/development.md`, section "Where each rule lives", is the index of this crate's
//! modules and the rules each holds; a test keeps it complete.

pub mod already_applied;
pub mod backoff;
pub mod blacklist;
pub mod builders;
pub mod child;
pub mod children;
pub mod conditions;
pub mod cooldown;
pub mod discovery;
pub mod disruption;
pub mod drain;
pub mod effective_spec;
pub mod gang;
pub mod group_orders;
pub mod group_report;
pub mod joining;
pub mod kind;
pub mod kubeai;
pub mod loss;
pub mod names;
pub mod node_warnings;
pub mod notice;
pub mod own_failure;
pub mod parse;
pub mod plan;
pub mod pod_metadata;
pub mod pods;
pub mod quantity;
pub mod quorum_report;
pub mod regroup;
pub mod scaling;
pub mod spares;
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
