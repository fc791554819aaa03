//! The pure planning core of eto.
//!
//! Everything here is a synchronous function of its inputs: no API client, no async runtime,
//! no clock (time is passed in). The controller observes the cluster, asks this crate what
//! should exist, and applies the answer.
//!
//! Start with [`plan::plan`], the decision function of a reconcile: from a job and its observed
//! children to the objects to apply and delete, the status and the events. Every kind of job
//! goes through it as a [`job::JobRef`]: it validates the job with [`job::JobRef::validate`],
//! which maps any kind onto one [`EffectiveSpec`], decides the workers with
//! [`target_workers::decide`], builds objects with [`builders`] and the kind's module, renders
//! host discovery with [`discovery`], and reports the status in the kind's own form
//! ([`kind::ApiStatus`]). What a kind contributes lives in its module under [`kind`].
//!
//! # Layers
//! Each module uses only modules of its own layer or of the layers before it, and no two
//! modules use each other, directly or not (`tests/layers.rs` checks both):
//! 1. Values that know no job: [`names`], [`time`], [`quantity`], [`pods`] (what a pod's
//!    status says), [`pod_metadata`], [`conditions`], [`status`] (the engine's status),
//!    [`effective_spec`], [`event_spec`], [`discovery`], [`downward_api`], [`field_error`],
//!    [`pod_group`], [`goodput`], [`affinity`], [`spot_capacity`], [`unreachable_nodes`],
//!    [`already_applied`], [`child`] (an object a job owns).
//! 2. The job model: [`job`] (a kind and its vocabulary, a job of any kind, the job context
//!    the builders take), and the reports its traits answer with: [`group_report`],
//!    [`spares`].
//! 3. The rules every kind shares: [`parse`], [`validation`], [`builders`], [`gang`],
//!    [`blacklist`], [`cooldown`], [`node_warnings`], [`disruption`], [`loss`],
//!    [`own_failure`], [`backoff`], [`saving_on_termination`], [`drain`], [`notice`],
//!    [`kubeai`], [`target_workers`], [`scaling`], [`joining`], [`group_orders`],
//!    [`reforming_group`], [`warned_handover`].
//! 4. The kinds: [`kind`] (each kind's module, and the registry that lists them).
//! 5. Planning: [`plan`].
//! 6. What a plan leaves to apply: [`children`].
//!
//! # Where each rule lives
//! `docs/development.md`, section "Where each rule lives", is the index of this crate's
//! modules and the rules each holds; a test keeps it complete.

pub mod affinity;
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
pub mod downward_api;
pub mod drain;
pub mod effective_spec;
pub mod event_spec;
pub mod field_error;
pub mod gang;
pub mod goodput;
pub mod group_orders;
pub mod group_report;
pub mod job;
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
pub mod pod_group;
pub mod pod_metadata;
pub mod pods;
pub mod quantity;
pub mod reforming_group;
pub mod saving_on_termination;
pub mod scaling;
pub mod spares;
pub mod spot_capacity;
pub mod status;
pub mod target_workers;
pub mod time;
pub mod unreachable_nodes;
pub mod validation;
pub mod warned_handover;

#[cfg(test)]
mod testing;

pub use effective_spec::EffectiveSpec;
pub use field_error::FieldError;
pub use job::InvalidSpec;
pub use plan::{Observed, Plan, plan};
