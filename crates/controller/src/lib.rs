//! The I/O side of eto: it watches the jobs of every kind it serves and the objects eto
//! creates for them, asks the engine ([`eto_engine::plan()`]) what should change, and writes
//! it.
//!
//! Everything is written with server-side apply under one field manager, `eto`, except the
//! generated SSH Secret and an MPIJob's launcher Job (created once). Children are read from
//! watch caches, so a reconcile that finds nothing to change makes no request at all; reads
//! happen only where a cache cannot answer (an object eto did not create that may hold a
//! child's name, see [`ownership`]; a worker missing from the pod cache, see
//! [`lookups::workers_behind`]; a Secret a job names). A reconcile
//! that wrote waits until the caches show its writes ([`freshness`]), so that the next one does
//! not decide from older state.
//!
//! Start with [`controllers::run`]; [`reconcile::reconcile`] is one reconcile, [`apply`] the writes.
//!
//! # Layers
//! Each module uses only modules of its own layer or of the layers before it
//! (`tests/layers.rs` checks it):
//! 1. Identities and settings: [`resources`] (the typed objects eto reads and writes, the
//!    request resources, the caches' names), [`scope`], [`first_lists`], [`error`],
//!    [`events`], [`retries`], [`job_gauges`], [`metrics`], [`rbac`], [`crds`], [`ssh_keys`],
//!    [`shutdown`], `spec_changes`, [`cache_trim`], [`name_index`], [`pod_proxy`],
//!    [`progress_reads`] (the latest progress read of each job, kept in memory).
//! 2. The caches and their context: `watches`, [`departed_pods`] (the last state of pods
//!    deleted lately), [`pod_cache`], [`warned_nodes`], [`context`] (the stores, the gang
//!    settings, the clock).
//! 3. Reading: [`lookups`] from the API server where a cache cannot answer, [`ownership`]
//!    (which objects a job may write), [`pod_groups`] (a job's PodGroup, read and written),
//!    [`observe`] from the caches only, [`group_report`] (what a run's coordinator reports).
//! 4. Writing: [`freshness`], [`kubeai_stop`], [`group_orders`] (orders to a run's
//!    coordinator), [`apply`] (children, requests, status, events).
//! 5. Reconciling and running: [`reconcile`], [`scale_requests`], `caches` (wiring the
//!    watches), [`controllers`] (the checks at start, the context, the controllers),
//!    [`leader`].

pub mod apply;
pub mod cache_trim;
mod caches;
pub mod context;
pub mod controllers;
pub mod crds;
pub mod departed_pods;
pub mod error;
pub mod events;
pub mod first_lists;
pub mod freshness;
pub mod group_orders;
pub mod group_report;
pub mod job_gauges;
pub mod kubeai_stop;
pub mod leader;
pub mod lookups;
pub mod metrics;
#[cfg(test)]
mod mock_tests;
pub mod name_index;
pub mod observe;
pub mod ownership;
pub mod pod_cache;
pub mod pod_groups;
pub mod pod_proxy;
pub mod progress_reads;
pub mod rbac;
pub mod reconcile;
pub mod resources;
pub mod retries;
pub mod scale_requests;
pub mod scope;
pub mod shutdown;
mod spec_changes;
pub mod ssh_keys;
#[cfg(test)]
mod testing;
pub mod warned_nodes;
mod watches;

pub use context::{Clock, Context, Stores};
pub use controllers::{RunError, Settings, run};
pub use crds::{CrdError, install_crds};
pub use error::Error;
pub use eto_engine::gang::COSCHEDULING_DEFAULT_SCHEDULER;
pub use eto_engine::job::Kind;
pub use eto_engine::node_warnings;
pub use eto_engine::pod_group::GangScheduler;
pub use leader::{Election, run_elected};
pub use metrics::Metrics;
pub use scope::Scope;
pub use shutdown::SHUTDOWN_GRACE;
