//! eto-sim: a simulated Kubernetes cluster for eto's integration tests, demo and benchmarks.
//!
//! It is a stateful API server speaking Kubernetes' HTTP/JSON API on `127.0.0.1`, usable by
//! `kube::Client` and by `kubectl`, plus a scheduler and kubelets for simulated GPU nodes and
//! the fault injection tests need. Start one in-process with [`SimCluster::start`], or as a
//! process with `eto-sim serve`.
//!
//! # What behaves as in kube-apiserver
//! - Objects get a `uid`, `creationTimestamp`, `generation` (custom resources: bumped on spec
//!   changes only) and a global, monotonic `resourceVersion`; lists carry one too.
//! - Create, get, list (label and field selectors, `limit`/`continue`), replace (`409` on a
//!   stale resourceVersion), JSON patch (with `test`), JSON merge patch, strategic merge patch
//!   of built-in types (`415` for custom resources, as in kube-apiserver), server-side apply
//!   (see [`merge::managed`]), delete (finalizers, grace periods for running pods,
//!   `propagationPolicy`), `deletecollection`, `dryRun`, `fieldValidation`.
//! - Request bodies in JSON, YAML (apply) or, for built-in kinds, Kubernetes' protobuf
//!   encoding, as client-go and kubectl's typed commands send them (see
//!   [`apiserver::protobuf`]); custom resources in protobuf and any CBOR body get
//!   kube-apiserver's `415`.
//! - Errors are `Status` objects with the standard reasons and codes (`NotFound`,
//!   `AlreadyExists`, `Conflict`, `Invalid`, `Expired`, ...).
//! - Watches resume from a resourceVersion, send bookmarks and initial events when asked,
//!   turn selector transitions into ADDED/DELETED, honour `timeoutSeconds`, and answer `410`
//!   for a resourceVersion older than the window of changes kept, which starts once the
//!   cluster is set up and drops changes older than 75 s beyond the latest 100, as
//!   kube-apiserver's watch cache does (see [`store::History`] and [`apiserver::watch`]).
//! - New pods are validated as kube-apiserver validates them, for the fields an operator
//!   writes into a pod (see [`validation::pod`]); every object's labels and annotations too.
//! - `/status` and `/scale` subresources as CRDs declare them; pods' `/status`, `/binding`,
//!   `/eviction` and `/log`.
//! - Custom objects are pruned, defaulted and validated against their CRD's schema and CEL
//!   rules (see [`schema`] for exactly what is checked).
//! - Owner-reference garbage collection (background, foreground, orphan) and namespace
//!   deletion.
//! - Discovery and the `Table` form, so `kubectl get`, `apply --server-side`, `scale`, `patch`,
//!   `delete` and `wait` work.
//! - Events written through `events.k8s.io/v1` are read through core `v1` too, and an Event
//!   with an `eventTime` is refused as kube-apiserver refuses it: a note over 1,024 bytes, a
//!   missing or overlong reporter, action or reason.
//! - Optionally, lists take longer the more objects they return ([`SimConfig::list_latency`]),
//!   so a client's concurrent lists of several kinds finish in the order a real cluster
//!   usually shows, not all at once.
//!
//! # Fault injection
//! [`SimCluster::inject`] fails or delays the next requests that match a method, a path and a
//! Kubernetes verb (a [`Fault`]: for example "the next list of pods in all namespaces waits
//! five seconds"); [`SimCluster::drop_watches`] ends every watch; [`SimCluster::restart`]
//! restarts the API server with its state kept. `eto-sim inject-fault` does the same from a
//! shell.
//!
//! # What it does not do
//! No authentication, authorization or admission webhooks; no TLS (plain HTTP on loopback);
//! answers are always JSON, also to a client whose `Accept` asks for protobuf only (client-go
//! decodes by the answer's `Content-Type`, so it copes; kube-apiserver would answer in
//! protobuf), and protobuf bodies are read for the groups listed in [`apiserver::protobuf`]
//! only; one version per resource (no conversion); no OpenAPI
//! documents (so no `kubectl explain` and no client-side `kubectl apply` of custom resources);
//! no aggregated discovery; pods' containers run nothing (their lifecycle is driven by the
//! simulated kubelet and by fault injection); Services get a cluster IP but nothing routes to
//! it; the pod spec immutability check is simplified; of the workload controllers only the part of
//! the Job controller that single-pod Jobs need (see [`jobs`]); Deployments,
//! PodDisruptionBudgets and HorizontalPodAutoscalers are stored (so an operator's own
//! manifests apply, and a PyTorchJob's autoscaler is kept) but nothing acts on them; no StatefulSets. Its scheduler stands in for Volcano and the scheduler-plugins
//! coscheduling plugin only as far as gang admission and the preemption of members above a
//! group's minimum go (see [`nodes::gang`]): no queues, no admission by `minResources`, no
//! schedule timeouts.

pub mod apiserver;
pub mod builtin;
pub mod cause;
pub mod cluster;
pub mod control;
pub mod errors;
pub mod http;
pub mod jobs;
pub mod merge;
pub mod nodes;
pub mod operations;
pub mod options;
pub mod resources;
pub mod schema;
pub mod selectors;
pub mod store;
pub mod validation;

pub use apiserver::faults::{Fault, FaultAction};
pub use apiserver::latency::ListLatency;
pub use apiserver::routes::Verb;
pub use cluster::{SimCluster, SimConfig, StartError, kubeconfig_for};
pub use nodes::NodeSpec;
pub use nodes::kubelet::{KubeletConfig, Termination};
pub use store::History;
