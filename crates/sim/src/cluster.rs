//! A running simulated cluster: the API server on a local port, the scheduler, the kubelets,
//! the garbage collector, and the handles tests use to inject faults.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::Response;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::apiserver::ApiServer;
use crate::apiserver::faults::{ApiFaults, Fault};
use crate::apiserver::latency::ListLatency;
use crate::apiserver::pod_proxy::PodPorts;
use crate::builtin;
use crate::control::{self, Command};
use crate::errors::ApiError;
use crate::http::Body;
use crate::jobs::JobController;
use crate::nodes::kubelet::{self, KubeletConfig, Kubelets, Termination};
use crate::nodes::scheduler::Scheduler;
use crate::nodes::unreachable;
use crate::nodes::warnings::Warning;
use crate::nodes::{Changed, NodeSpec, Taint};
use crate::options::{DeleteOptions, Subresource, WriteOptions};
use crate::resources::ResourceId;
use crate::store::{History, ObjectKey, State, Store};

/// How a simulated cluster starts.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Nodes present from the start.
    pub nodes: Vec<NodeSpec>,
    /// Namespaces present from the start (besides `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease`).
    pub namespaces: Vec<String>,
    /// Kubelet timings.
    pub kubelet: KubeletConfig,
    /// Changes kept for watches to resume from; older resourceVersions get `410 Gone`. The
    /// history starts once the cluster is set up (its namespaces and nodes), as a watch cache
    /// starts at the list it was filled from.
    pub history: History,
    /// The taint a spot reclaim puts on its node.
    pub reclaim_taint: Taint,
    /// How long lists take (none by default; see [`ListLatency`] for why tests want some).
    pub list_latency: ListLatency,
    /// How long after it is stored a new CRD is established and its resource served: until
    /// then its `Established` condition is `False` and requests for the resource get `404`,
    /// as on kube-apiserver, whose establishing controller takes a moment. Zero establishes
    /// it with the write that stores it.
    pub crd_establish_delay: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            namespaces: Vec::new(),
            kubelet: KubeletConfig::default(),
            history: History::default(),
            reclaim_taint: Taint {
                key: "sim.eto.dev/reclaimed".into(),
                value: "true".into(),
                effect: "NoSchedule".into(),
            },
            list_latency: ListLatency::NONE,
            crd_establish_delay: Duration::from_millis(200),
        }
    }
}

impl SimConfig {
    /// `count` nodes named `gpu-node-<i>` with `gpus` GPUs each.
    #[must_use]
    pub fn gpu_nodes(mut self, count: usize, gpus: u32) -> Self {
        let first = self.nodes.len();
        self.nodes.extend(
            (first..first + count).map(|index| NodeSpec::gpu(format!("gpu-node-{index}"), gpus)),
        );
        self
    }
}

struct Inner {
    store: Arc<Store>,
    faults: Arc<ApiFaults>,
    pod_ports: Arc<PodPorts>,
    address: SocketAddr,
    server: Mutex<CancellationToken>,
    stopped: CancellationToken,
    config: SimConfig,
}

/// A running simulated cluster. Dropping the last handle stops it.
#[derive(Clone)]
pub struct SimCluster {
    inner: Arc<Inner>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stopped.cancel();
        self.server
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cancel();
    }
}

impl SimCluster {
    /// Starts a cluster on `127.0.0.1` on a free port.
    ///
    /// # Errors
    /// The port cannot be bound, or a configured node or namespace is invalid.
    pub async fn start(config: SimConfig) -> Result<Self, StartError> {
        Self::start_on(config, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts a cluster on `address` (port 0 picks a free port).
    ///
    /// # Errors
    /// The port cannot be bound, or a configured node or namespace is invalid.
    pub async fn start_on(config: SimConfig, address: SocketAddr) -> Result<Self, StartError> {
        let listener = TcpListener::bind(address).await.map_err(StartError::Bind)?;
        let address = listener.local_addr().map_err(StartError::Bind)?;
        let store = Store::new(config.history);
        store.write(|state| state.crd_establish_delay = config.crd_establish_delay);
        let cluster = Self {
            inner: Arc::new(Inner {
                store,
                faults: Arc::new(ApiFaults::default()),
                pod_ports: Arc::new(PodPorts::default()),
                address,
                server: Mutex::new(CancellationToken::new()),
                stopped: CancellationToken::new(),
                config: config.clone(),
            }),
        };
        let mut namespaces = vec![
            "default".to_string(),
            "kube-system".into(),
            "kube-public".into(),
            "kube-node-lease".into(),
        ];
        namespaces.extend(config.namespaces.iter().cloned());
        for namespace in namespaces {
            cluster
                .create_namespace(&namespace)
                .map_err(StartError::Setup)?;
        }
        for node in &config.nodes {
            cluster.add_node(node).map_err(StartError::Setup)?;
        }
        cluster.inner.store.write(crate::store::State::compact);
        cluster.spawn_control_plane();
        cluster.serve(listener);
        Ok(cluster)
    }

    fn serve(&self, listener: TcpListener) {
        let token = CancellationToken::new();
        *self
            .inner
            .server
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = token.clone();
        let api = ApiServer {
            store: Arc::clone(&self.inner.store),
            pod_ports: Arc::clone(&self.inner.pod_ports),
            faults: Arc::clone(&self.inner.faults),
            list_latency: self.inner.config.list_latency,
        };
        let weak = Arc::downgrade(&self.inner);
        let handler = Arc::new(move |request: http::Request<hyper::body::Incoming>| {
            let api = api.clone();
            let cluster = weak.upgrade().map(|inner| SimCluster { inner });
            async move {
                match cluster {
                    Some(cluster) if request.uri().path().starts_with("/sim/v1/") => {
                        match control::parse(request).await {
                            Ok(command) => cluster.control(command),
                            Err(answer) => answer,
                        }
                    }
                    _ => api.handle(request).await,
                }
            }
        });
        tokio::spawn(crate::http::serve(listener, handler, token));
    }

    /// Carries out a control `command` (see [`control`]) and answers it.
    fn control(&self, command: Command) -> Response<Body> {
        let done = command.done();
        let outcome = match command {
            Command::AddNode(node) => self.add_node(&node),
            Command::RemoveNode(name) => self.remove_node(&name),
            Command::ReclaimNode {
                name,
                grace,
                warning,
                ..
            } if warning.is_zero() => self.reclaim_node(&name, grace),
            Command::ReclaimNode {
                name,
                grace,
                warning,
                announcement,
            } => self.announce_reclaim(&name, &announcement, warning, grace),
            Command::WarnNode { name, warning } => self.warn_node(&name, &warning),
            Command::WithdrawNodeWarning { name, warning } => {
                self.withdraw_node_warning(&name, &warning)
            }
            Command::TerminatePod {
                namespace,
                name,
                termination,
            } => self.terminate_pod(&namespace, &name, &termination),
            Command::InjectFault(fault) => {
                self.inject(fault);
                Ok(())
            }
            Command::ClearFaults => {
                self.clear_faults();
                Ok(())
            }
            Command::DropWatches => {
                self.drop_watches();
                Ok(())
            }
            Command::Restart { downtime } => {
                // The restart closes this very connection: answer first, restart just after.
                let cluster = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let _ = cluster.restart(downtime).await;
                });
                Ok(())
            }
        };
        match outcome {
            Ok(()) => control::reply(done.0, done.1),
            Err(error) => control::refused(&error),
        }
    }

    fn spawn_control_plane(&self) {
        let store = Arc::clone(&self.inner.store);
        let stopped = self.inner.stopped.clone();
        let kubelet_config = self.inner.config.kubelet;
        tokio::spawn(async move {
            let mut updates = store.subscribe();
            let mut kubelets = Kubelets::default();
            let mut scheduler = Scheduler::default();
            let mut job_controller = JobController::default();
            let mut cursor = 0;
            let mut changed = Changed::Everything;
            let mut wake_at: Option<Instant> = None;
            loop {
                let relevant = store.read(|state| {
                    let touched = match state.changes_since(cursor) {
                        Ok(changes) => {
                            changed.absorb(Changed::of(&changes));
                            changes.iter().any(|c| {
                                match (c.resource.group.as_str(), c.resource.plural.as_str()) {
                                    ("", plural) => matches!(plural, "pods" | "nodes"),
                                    ("batch", plural) => plural == "jobs",
                                    (group, plural) => {
                                        group == "apiextensions.k8s.io"
                                            && plural == "customresourcedefinitions"
                                    }
                                }
                            })
                        }
                        Err(_) => {
                            changed = Changed::Everything;
                            true
                        }
                    };
                    cursor = state.resource_version();
                    touched
                });
                if relevant || wake_at.is_some_and(|at| at <= Instant::now()) {
                    let pass = std::mem::replace(&mut changed, Changed::Pods(BTreeSet::new()));
                    wake_at = store.write(|state| {
                        let establish_at = builtin::establish_due(state, Instant::now());
                        job_controller.sync(state);
                        scheduler.schedule(state, &pass);
                        let kubelet_at = kubelets.sync(state, &kubelet_config, &pass).1;
                        [establish_at, kubelet_at].into_iter().flatten().min()
                    });
                }
                let sleep = async {
                    match wake_at {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = stopped.cancelled() => return,
                    result = updates.changed() => if result.is_err() { return },
                    () = sleep => {}
                }
            }
        });
        let store = Arc::clone(&self.inner.store);
        let stopped = self.inner.stopped.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stopped.cancelled() => return,
                    () = store.garbage_queued() => {}
                }
                while store.write(builtin::collect_garbage) {}
            }
        });
    }

    /// The API server's address.
    pub fn address(&self) -> SocketAddr {
        self.inner.address
    }

    /// The API server's URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.address)
    }

    /// A kube client configuration for this cluster, defaulting to namespace `default`.
    pub fn config(&self) -> kube::Config {
        let uri: http::Uri = self.url().parse().expect("the cluster URL is a valid URI");
        kube::Config::new(uri)
    }

    /// A kube client for this cluster, defaulting to namespace `default`.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("a plain-HTTP client needs no TLS setup")
    }

    /// A kubeconfig that points kubectl or any client at this cluster.
    pub fn kubeconfig(&self) -> String {
        kubeconfig_for(&self.url())
    }

    /// The stored state, for assertions that the API cannot express.
    pub fn store(&self) -> &Arc<Store> {
        &self.inner.store
    }

    fn create_namespace(&self, name: &str) -> Result<(), ApiError> {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        self.inner.store.write(|state| {
            let resource = state.resource(&ResourceId::new("", "namespaces"))?;
            state
                .create(&resource, "", object, &WriteOptions::internal("eto-sim"))
                .map(drop)
        })
    }

    /// Adds a node (what cluster-autoscaler does).
    ///
    /// # Errors
    /// A node with that name exists, or the name is invalid.
    pub fn add_node(&self, node: &NodeSpec) -> Result<(), ApiError> {
        self.inner.store.write(|state| {
            let resource = kubelet::node_resource(state)?;
            let index = state.list(&resource.id, None).count();
            let object = node.to_object(index);
            let options = WriteOptions::internal("eto-sim");
            let created = state.create(&resource, "", object.clone(), &options)?;
            let mut with_status = (*created.object).clone();
            with_status["status"] = object["status"].clone();
            state
                .replace(
                    &resource,
                    "",
                    &node.name,
                    with_status,
                    Some(Subresource::Status),
                    &options,
                )
                .map(drop)
        })
    }

    /// Removes a node at once; its pods are collected after the orphan delay.
    ///
    /// # Errors
    /// No such node.
    pub fn remove_node(&self, name: &str) -> Result<(), ApiError> {
        self.inner.store.write(|state| {
            let resource = kubelet::node_resource(state)?;
            state
                .delete(&resource, "", name, &DeleteOptions::default())
                .map(drop)
        })
    }

    /// Ends a running pod's containers: see [`kubelet::terminate`].
    ///
    /// # Errors
    /// No such pod, or it is not running on a node.
    pub fn terminate_pod(
        &self,
        namespace: &str,
        name: &str,
        termination: &Termination,
    ) -> Result<(), ApiError> {
        self.inner
            .store
            .write(|state| kubelet::terminate(state, namespace, name, termination))
    }

    /// Fails a pod's containers with `exit_code` and container `reason` (for example `Error`).
    ///
    /// # Errors
    /// No such pod, or it is not running on a node.
    pub fn fail_pod(
        &self,
        namespace: &str,
        name: &str,
        exit_code: i32,
        reason: &str,
    ) -> Result<(), ApiError> {
        let termination = Termination {
            exit_code,
            reason: reason.into(),
            pod_reason: None,
            message: None,
            final_: false,
            disruption: None,
            crash_loop: false,
            container_message: None,
        };
        self.terminate_pod(namespace, name, &termination)
    }

    /// Fails a pod's containers with `exit_code` for good: those its restart policy restarts
    /// wait in `CrashLoopBackOff`, the pod `Running` but not Ready, as a real kubelet shows a
    /// container that fails at every start.
    ///
    /// # Errors
    /// No such pod, or it is not running on a node.
    pub fn crash_loop_pod(
        &self,
        namespace: &str,
        name: &str,
        exit_code: i32,
    ) -> Result<(), ApiError> {
        let termination = Termination {
            exit_code,
            reason: "Error".into(),
            pod_reason: None,
            message: None,
            final_: false,
            disruption: None,
            crash_loop: true,
            container_message: None,
        };
        self.terminate_pod(namespace, name, &termination)
    }

    /// Ends a pod's containers successfully (exit 0, `Completed`).
    ///
    /// # Errors
    /// No such pod, or it is not running on a node.
    pub fn succeed_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let termination = Termination {
            exit_code: 0,
            reason: "Completed".into(),
            pod_reason: None,
            message: None,
            final_: false,
            disruption: None,
            crash_loop: false,
            container_message: None,
        };
        self.terminate_pod(namespace, name, &termination)
    }

    /// Evicts a pod as the kubelet does under node pressure: `Failed` with reason `Evicted`
    /// and `DisruptionTarget=True` (reason `TerminationByKubelet`), as kubelets do since
    /// Kubernetes 1.26.
    ///
    /// # Errors
    /// No such pod, or it is not running on a node.
    pub fn evict_pod(&self, namespace: &str, name: &str, message: &str) -> Result<(), ApiError> {
        let termination = Termination {
            exit_code: 137,
            reason: "Error".into(),
            pod_reason: Some("Evicted".into()),
            message: Some(message.into()),
            final_: true,
            disruption: Some("TerminationByKubelet".into()),
            crash_loop: false,
            container_message: None,
        };
        self.terminate_pod(namespace, name, &termination)
    }

    /// Reclaims a spot node: taints it with the reclaim taint and marks its pods
    /// `DisruptionTarget`; after `grace` fails them (exit 137, pod reason `Terminated`) and
    /// deletes the node. Returns once the node is tainted; the rest happens in the background.
    /// A zero `grace` does it all in one step, as when a node vanishes without notice: its
    /// pods are seen `Failed` and `DisruptionTarget` at once, never one without the other (a
    /// real cluster's node-lifecycle and pod garbage collectors show them so).
    ///
    /// # Errors
    /// No such node.
    pub fn reclaim_node(&self, name: &str, grace: Duration) -> Result<(), ApiError> {
        let taint = self.inner.config.reclaim_taint.clone();
        let vanish = grace.is_zero();
        self.inner.store.write(|state| {
            let resource = kubelet::node_resource(state)?;
            let node = state.fetch(&resource, "", name)?;
            let mut tainted = (*node).clone();
            let mut taints = tainted["spec"]["taints"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            taints.push(serde_json::to_value(&taint).unwrap_or(Value::Null));
            tainted["spec"]["taints"] = Value::Array(taints);
            state.replace(
                &resource,
                "",
                name,
                tainted,
                None,
                &WriteOptions::internal("cloud-controller-manager"),
            )?;
            kubelet::mark_disruption(
                state,
                name,
                "TerminationByKubelet",
                &format!("node {name} is being reclaimed (spot instance interruption)"),
            );
            if vanish {
                shut_down(state, name);
            }
            Ok::<_, ApiError>(())
        })?;
        if vanish {
            return Ok(());
        }
        let store = Arc::clone(&self.inner.store);
        let stopped = self.inner.stopped.clone();
        let name = name.to_string();
        tokio::spawn(async move {
            tokio::select! {
                () = stopped.cancelled() => return,
                () = tokio::time::sleep(grace) => {}
            }
            store.write(|state| shut_down(state, &name));
        });
        Ok(())
    }

    /// Stops node `name` without warning, keeping it in the API, as a machine that died or
    /// was cut off: see [`unreachable`] (its pods stay `Running` but not ready, until the
    /// taint manager deletes them as their toleration of the node's taint says).
    ///
    /// # Errors
    /// No such node.
    pub fn stop_node(&self, name: &str) -> Result<(), ApiError> {
        self.change_node(name, unreachable::stop)?;
        self.inner.store.write(|state| {
            let resource = state.resource(&ResourceId::new("", "pods"))?;
            for (key, pod) in kubelet::pods_on(state, name) {
                state.replace(
                    &resource,
                    &key.namespace,
                    &key.name,
                    unreachable::not_ready(&pod),
                    Some(Subresource::Status),
                    &WriteOptions::internal("node-controller"),
                )?;
            }
            Ok::<_, ApiError>(())
        })
    }

    /// Puts `warning` on node `name`, as a cloud announces that the node goes away: nothing
    /// else changes (pods run on; see [`SimCluster::announce_reclaim`] for the loss that
    /// follows).
    ///
    /// # Errors
    /// No such node.
    pub fn warn_node(&self, name: &str, warning: &Warning) -> Result<(), ApiError> {
        self.change_node(name, |node, now| warning.put_on(node, now))
    }

    /// Takes `warning` off node `name`: the announcement is withdrawn.
    ///
    /// # Errors
    /// No such node.
    pub fn withdraw_node_warning(&self, name: &str, warning: &Warning) -> Result<(), ApiError> {
        self.change_node(name, |node, now| warning.take_off(node, now))
    }

    /// A spot reclaim announced `lead` ahead: `warning` goes on node `name` now, and after
    /// `lead` the node is reclaimed, its pods getting `grace` (see
    /// [`SimCluster::reclaim_node`]). Returns once the warning is on; the rest happens in the
    /// background.
    ///
    /// # Errors
    /// No such node.
    pub fn announce_reclaim(
        &self,
        name: &str,
        warning: &Warning,
        lead: Duration,
        grace: Duration,
    ) -> Result<(), ApiError> {
        self.warn_node(name, warning)?;
        let cluster = self.clone();
        let stopped = self.inner.stopped.clone();
        let name = name.to_string();
        tokio::spawn(async move {
            tokio::select! {
                () = stopped.cancelled() => {}
                () = tokio::time::sleep(lead) => {
                    let _ = cluster.reclaim_node(&name, grace);
                }
            }
        });
        Ok(())
    }

    /// Rewrites node `name` with `change` (given the node and the time now, RFC 3339).
    fn change_node(
        &self,
        name: &str,
        change: impl FnOnce(&mut Value, &str),
    ) -> Result<(), ApiError> {
        let now = jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .unwrap_or_else(|_| jiff::Timestamp::now())
            .to_string();
        self.inner.store.write(|state| {
            let resource = kubelet::node_resource(state)?;
            let node = state.fetch(&resource, "", name)?;
            let mut changed = (*node).clone();
            change(&mut changed, &now);
            let writer = WriteOptions::internal("node-termination-handler");
            // Taints are the spec's, conditions the status subresource's: two writes.
            let status = changed["status"].clone();
            state.replace(&resource, "", name, changed, None, &writer)?;
            let mut stored = (*state.fetch(&resource, "", name)?).clone();
            if stored["status"] != status {
                stored["status"] = status;
                state.replace(
                    &resource,
                    "",
                    name,
                    stored,
                    Some(Subresource::Status),
                    &writer,
                )?;
            }
            Ok::<_, ApiError>(())
        })
    }

    /// Makes `port` of pod `namespace/pod` lead to `to` for the API server's pod proxy
    /// (`pods/<pod>:<port>/proxy/...`): pods run nothing, so a test stands in for what
    /// listens there.
    pub fn forward_pod_port(&self, namespace: &str, pod: &str, port: u16, to: SocketAddr) {
        self.inner.pod_ports.forward(namespace, pod, port, to);
    }

    /// Makes `port` of every pod (without a forward of its own) lead to `to`.
    pub fn forward_every_pod_port(&self, port: u16, to: SocketAddr) {
        self.inner.pod_ports.forward_every(port, to);
    }

    /// Injects an API fault.
    pub fn inject(&self, fault: Fault) {
        self.inner.faults.inject(fault);
    }

    /// Removes every injected API fault.
    pub fn clear_faults(&self) {
        self.inner.faults.clear();
    }

    /// How many times an injected fault has acted on a request.
    pub fn faults_acted(&self) -> u64 {
        self.inner.faults.acted()
    }

    /// How many requests that change state (`POST`, `PUT`, `PATCH`, `DELETE`) the API server
    /// has received, served or failed.
    pub fn writes_received(&self) -> u64 {
        self.inner.faults.writes_received()
    }

    /// How many requests of any kind the API server has received (a watch counts once).
    pub fn requests_received(&self) -> u64 {
        self.inner.faults.requests_received()
    }

    /// Ends every open watch; clients must watch again.
    pub fn drop_watches(&self) {
        self.inner.faults.drop_watches();
    }

    /// Restarts the API server keeping its state: every connection (watches included) is
    /// closed, the port refuses connections for `downtime`, and the watch history is gone, so
    /// watches resuming from an older resourceVersion get `410 Gone` and must list again.
    ///
    /// # Errors
    /// The port cannot be bound again.
    pub async fn restart(&self, downtime: Duration) -> std::io::Result<()> {
        self.inner
            .server
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cancel();
        self.inner.faults.drop_watches();
        self.inner.store.write(crate::store::State::compact);
        tokio::time::sleep(downtime).await;
        let listener = TcpListener::bind(self.inner.address).await?;
        self.serve(listener);
        Ok(())
    }
}

/// Why a cluster did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listening socket could not be bound.
    #[error("cannot listen: {0}")]
    Bind(#[source] std::io::Error),
    /// A configured node or namespace was rejected.
    #[error("cannot set up the cluster: {0}")]
    Setup(#[source] ApiError),
}

/// The end of a reclaimed node: its pods' containers are killed (exit 137, pod reason
/// `Terminated`) and the node is deleted.
fn shut_down(state: &mut State, node: &str) {
    let termination = Termination {
        exit_code: 137,
        reason: "Error".into(),
        pod_reason: Some("Terminated".into()),
        message: Some("Pod was terminated in response to imminent node shutdown.".into()),
        final_: true,
        // Marked when the reclaim began (see `kubelet::mark_disruption`).
        disruption: None,
        crash_loop: false,
        container_message: None,
    };
    for (key, _) in kubelet::pods_on(state, node) {
        let _ = kubelet::terminate(state, &key.namespace, &key.name, &termination);
    }
    if let Ok(resource) = kubelet::node_resource(state) {
        state.remove_object(&resource, &ObjectKey::new("", node));
    }
}

/// A kubeconfig for an unauthenticated API server at `url`.
pub fn kubeconfig_for(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: eto-sim\n  cluster:\n    server: {url}\n\
         contexts:\n- name: eto-sim\n  context:\n    cluster: eto-sim\n    user: eto-sim\n    namespace: default\n\
         current-context: eto-sim\nusers:\n- name: eto-sim\n  user: {{}}\n"
    )
}
