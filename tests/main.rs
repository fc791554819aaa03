//! eto's workspace-level tests, one module per subject: the generated CRDs, the examples and
//! the Helm chart, and the operator against the simulated cluster (eto-sim) under every scenario
//! its users meet. `cluster` holds the tests that need a real cluster (`#[ignore]`d).
//!
//! Run one subject with its module path, for example
//! `cargo test -p eto-tests --test integration faults::`.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

mod argocd;
mod chaos_real;
mod chart;
mod cluster;
mod crds_fresh;
mod discovery_script;
mod docs_links;
mod e2e;
mod elastic;
mod examples;
mod failing_pods;
mod failing_pods_real;
mod faults;
mod foreign_objects;
mod gang;
mod goodput;
mod kind_boundaries;
mod kubeai;
mod launcher_loss;
mod layers;
mod lifecycle;
mod mpijob;
mod node_warnings;
mod notice_helper;
mod operator;
mod pytorch_real;
mod pytorchjob;
mod scaling;
mod suspend;
mod termination;
mod torchft_local;
mod torchft_real;
mod torchrun_local;
mod trainer_sdk;
mod trainjob;
mod trainjob_real;
mod wide_jobs;
