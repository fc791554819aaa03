//! A simulated cluster with eto's CRDs installed and the operator running in-process.

use std::sync::Arc;
use std::time::Duration;

use eto_api::TrainingJob;
use eto_controller::{Metrics, Settings};
use eto_sim::{
    Fault, FaultAction, KubeletConfig, ListLatency, NodeSpec, SimCluster, SimConfig, Verb,
};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

/// How long a test waits for a condition before failing.
pub const WAIT: Duration = Duration::from_secs(20);

/// Longer than any test waits: a request delayed this long gets no answer while a test runs.
pub const FOREVER: Duration = Duration::from_secs(3600);

/// A fault that delays the first `count` lists whose path contains `path_contains` by
/// `delay`. Paths of all namespaces (`/api/v1/pods`, `.../v1alpha1/trainingjobs`) are the
/// operator's: the tests' own requests name a namespace.
pub fn slow_list(path_contains: &str, count: u32, delay: Duration) -> Fault {
    Fault {
        action: FaultAction::Delay(delay),
        remaining: count,
        method: None,
        path_contains: Some(path_contains.into()),
        verb: Some(Verb::List),
        writes_only: false,
        skip: 0,
    }
}

/// A fault that leaves the next `count` pod writes (applies) without an answer: a reconcile
/// that writes a pod is stuck there.
pub fn hanging_pod_writes(count: u32) -> Fault {
    Fault {
        action: FaultAction::Delay(FOREVER),
        remaining: count,
        method: None,
        path_contains: Some("/pods/".into()),
        verb: Some(Verb::Patch),
        writes_only: false,
        skip: 0,
    }
}

/// The operator, running in-process against the simulated cluster.
pub struct Operator {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// Its metrics.
    pub metrics: Arc<Metrics>,
}

/// A simulated cluster with eto installed.
pub struct Env {
    /// The cluster.
    pub cluster: SimCluster,
    /// A client for it.
    pub client: Client,
    /// The running operator, if any.
    pub operator: Option<Operator>,
}

/// The timings tests use: pods start and stop after a short, observable delay, and lists take
/// longer the more they return, so that the operator's caches finish their first lists in the
/// order a real cluster usually shows: a few jobs first, many pods last.
pub fn sim_config(nodes: usize, gpus_per_node: u32) -> SimConfig {
    SimConfig {
        kubelet: KubeletConfig {
            start_delay: Duration::from_millis(50),
            termination_delay: Duration::from_millis(50),
            orphan_gc_delay: Duration::ZERO,
        },
        list_latency: ListLatency {
            base: Duration::from_millis(5),
            per_object: Duration::from_millis(2),
        },
        ..SimConfig::default()
    }
    .gpu_nodes(nodes, gpus_per_node)
}

/// A CPU node `on-demand` (for launchers) and three spot nodes of 2 GPUs: `spot-a`, `spot-b`,
/// `spot-c`.
pub fn spot_nodes() -> SimConfig {
    SimConfig {
        nodes: vec![
            NodeSpec::gpu("on-demand", 0),
            NodeSpec::gpu("spot-a", 2),
            NodeSpec::gpu("spot-b", 2),
            NodeSpec::gpu("spot-c", 2),
        ],
        ..sim_config(0, 0)
    }
}

/// A small TrainingJob: `replicas` workers with one GPU each, at least `min` of them ready to
/// run, the worker restart policy `worker_policy`; `extra_spec` is inserted under `spec:`
/// (start it with a newline and two spaces).
pub fn job_yaml(
    name: &str,
    replicas: u32,
    min: u32,
    extra_spec: &str,
    worker_policy: &str,
) -> String {
    JobYaml {
        name,
        replicas,
        min,
        max: None,
        extra_spec,
        worker_policy,
    }
    .render()
}

/// A small TrainingJob, as [`job_yaml`] writes it, with every setting at hand.
pub struct JobYaml<'a> {
    /// Its name.
    pub name: &'a str,
    /// `worker.replicas`.
    pub replicas: u32,
    /// `worker.minReplicas`.
    pub min: u32,
    /// `worker.maxReplicas`, if set.
    pub max: Option<u32>,
    /// Inserted under `spec:` (start it with a newline and two spaces).
    pub extra_spec: &'a str,
    /// `worker.restartPolicy`.
    pub worker_policy: &'a str,
}

impl JobYaml<'_> {
    /// The job as YAML.
    pub fn render(&self) -> String {
        let Self {
            name,
            replicas,
            min,
            max,
            extra_spec,
            worker_policy,
        } = self;
        let max = max
            .map(|max| format!("\n      maxReplicas: {max}"))
            .unwrap_or_default();
        format!(
            r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: {name}
spec:{extra_spec}
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
            command: ["horovodrun", "--host-discovery-script", "/etc/edl/discover_hosts.sh", "python", "train.py"]
    worker:
      replicas: {replicas}
      minReplicas: {min}{max}
      restartPolicy: {worker_policy}
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
            resources:
              limits:
                nvidia.com/gpu: 1
"#
        )
    }
}

/// The hostfile a launcher pod shows to host discovery, if any.
pub fn hostfile_shown(launcher: &Pod) -> Option<&str> {
    launcher
        .annotations()
        .get(eto_api::well_known::HOSTFILE_ANNOTATION)
        .map(String::as_str)
}

/// What host discovery prints for the workers of `job` with `indices`, one slot each.
pub fn hostfile(job: &str, indices: &[u32]) -> String {
    indices
        .iter()
        .map(|i| format!("{job}-worker-{i}.{job}-workers:1\n"))
        .collect()
}

impl Env {
    /// A cluster of `config` with eto's CRDs installed and the operator running.
    pub async fn start(config: SimConfig) -> Self {
        let cluster = SimCluster::start(config)
            .await
            .expect("the simulated cluster starts");
        let client = cluster.client();
        eto_controller::install_crds(&client)
            .await
            .expect("the CRDs install");
        let mut env = Self {
            cluster,
            client,
            operator: None,
        };
        env.start_operator();
        env
    }

    /// Starts the operator with the default settings.
    pub fn start_operator(&mut self) {
        self.start_operator_with(Settings::default());
    }

    /// Starts the operator with `settings`.
    pub fn start_operator_with(&mut self, settings: Settings) {
        assert!(self.operator.is_none(), "the operator already runs");
        let stop = CancellationToken::new();
        let metrics = Arc::new(Metrics::default());
        let run = eto_controller::run(
            self.client.clone(),
            Settings {
                instance: Some("test".into()),
                pod_proxy: settings
                    .pod_proxy
                    .clone()
                    .or_else(|| Some(self.cluster.config())),
                ..settings
            },
            Arc::clone(&metrics),
            Arc::new(jiff::Timestamp::now),
            stop.clone().cancelled_owned(),
        );
        let task = tokio::spawn(async move {
            run.await.expect("the operator runs");
        });
        self.operator = Some(Operator {
            stop,
            task,
            metrics,
        });
    }

    /// Kills the operator, as a crash would: whatever it was doing stops at once, with no
    /// chance to finish.
    pub async fn kill_operator(&mut self) {
        let operator = self.operator.take().expect("the operator runs");
        operator.task.abort();
        let ended = operator.task.await;
        assert!(
            ended
                .as_ref()
                .is_err_and(tokio::task::JoinError::is_cancelled),
            "the operator was killed, it did not end by itself: {ended:?}"
        );
    }

    /// Stops the operator and waits until it has.
    pub async fn stop_operator(&mut self) {
        let operator = self.operator.take().expect("the operator runs");
        operator.stop.cancel();
        tokio::time::timeout(WAIT, operator.task)
            .await
            .expect("the operator stops")
            .expect("the operator task ends cleanly");
    }

    /// Deletes the CustomResourceDefinition `name` and waits until its API is gone.
    pub async fn remove_crd(&self, name: &str) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        crds.delete(name, &DeleteParams::default())
            .await
            .expect("the CRD deletes");
        let gone = await_condition(crds, name, |crd: Option<&CustomResourceDefinition>| {
            crd.is_none()
        });
        tokio::time::timeout(WAIT, gone)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting until CRD {name} is gone"))
            .expect("the CRD watch works");
    }

    /// The TrainingJobs of namespace `default`.
    pub fn jobs(&self) -> Api<TrainingJob> {
        Api::default_namespaced(self.client.clone())
    }

    /// The pods of namespace `default`.
    pub fn pods(&self) -> Api<Pod> {
        Api::default_namespaced(self.client.clone())
    }

    /// Merge-patches the TrainingJob `name` with `patch`, as `kubectl patch --type merge`.
    pub async fn patch_job(&self, name: &str, patch: serde_json::Value) {
        self.jobs()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("the API server accepts the merge patch");
    }

    /// Creates (or updates) a job from YAML.
    pub async fn apply_job(&self, yaml: &str) -> TrainingJob {
        self.apply(yaml).await
    }

    /// Creates (or updates) a custom object of the default namespace from YAML, as
    /// `kubectl apply --server-side` would.
    pub async fn apply<K>(&self, yaml: &str) -> K
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + DeserializeOwned
            + Serialize,
    {
        let object: K = serde_saphyr::from_str(yaml).expect("valid YAML");
        Api::<K>::default_namespaced(self.client.clone())
            .patch(
                &object.name_any(),
                &PatchParams::apply("test").force(),
                &Patch::Apply(&object),
            )
            .await
            .expect("the object applies")
    }

    /// Waits until job `name` satisfies `condition`.
    pub async fn wait_job(
        &self,
        name: &str,
        what: &str,
        condition: impl Fn(&TrainingJob) -> bool,
    ) -> TrainingJob {
        self.wait(name, what, condition).await
    }

    /// Waits until the object `name` of kind `K` in the default namespace satisfies
    /// `condition`; fails the test, showing the object, when it does not within [`WAIT`].
    pub async fn wait<K>(&self, name: &str, what: &str, condition: impl Fn(&K) -> bool) -> K
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + DeserializeOwned
            + Send
            + 'static,
    {
        let api = Api::<K>::default_namespaced(self.client.clone());
        let wait = await_condition(api.clone(), name, move |object: Option<&K>| {
            object.is_some_and(&condition)
        });
        match tokio::time::timeout(WAIT, wait).await {
            Ok(Ok(Some(object))) => object,
            _ => {
                let object = api.get_opt(name).await.ok().flatten();
                panic!("timed out waiting until {name} {what}; it is now: {object:#?}")
            }
        }
    }

    /// Waits until pod `name` satisfies `condition` (`None`: it does not exist).
    pub async fn wait_pod(
        &self,
        name: &str,
        what: &str,
        condition: impl Fn(Option<&Pod>) -> bool,
    ) -> Option<Pod> {
        match tokio::time::timeout(WAIT, await_condition(self.pods(), name, condition)).await {
            Ok(Ok(pod)) => pod,
            _ => panic!("timed out waiting until pod {name} {what}"),
        }
    }

    /// The names of the job's worker pods that exist, by index.
    pub async fn worker_names(&self, job: &str) -> Vec<String> {
        let pods = self
            .pods()
            .list(
                &ListParams::default()
                    .labels(&format!("training-job-name={job},training-job-role=worker")),
            )
            .await
            .expect("pods list");
        let mut names: Vec<(u32, String)> = pods
            .items
            .iter()
            .filter_map(|p| {
                Some((
                    eto_engine::names::worker_index(job, &p.name_any())?,
                    p.name_any(),
                ))
            })
            .collect();
        names.sort();
        names.into_iter().map(|(_, name)| name).collect()
    }

    /// Waits until the worker Service of `job` exists: eto applies it just before the job's
    /// first worker, so a reconcile that got this far is writing workers.
    pub async fn wait_worker_service(&self, job: &str) {
        let services: Api<Service> = Api::default_namespaced(self.client.clone());
        let name = eto_engine::names::worker_service(job);
        let applied = tokio::time::timeout(WAIT, async {
            while services
                .get_opt(&name)
                .await
                .expect("services get")
                .is_none()
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        applied
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for Service {name}"));
    }

    /// The hostfile the launcher of `job` shows to host discovery.
    pub async fn launcher_hostfile(&self, job: &str) -> Option<String> {
        let launcher = self
            .pods()
            .get_opt(&format!("{job}-launcher"))
            .await
            .expect("pods get")?;
        hostfile_shown(&launcher).map(String::from)
    }

    /// The `hostfile` of the job's ConfigMap.
    pub async fn config_map_hostfile(&self, job: &str) -> Option<String> {
        let config_maps: Api<ConfigMap> = Api::default_namespaced(self.client.clone());
        config_maps
            .get_opt(&format!("{job}-config"))
            .await
            .expect("configmaps get")?
            .data?
            .get("hostfile")
            .cloned()
    }

    /// The reasons of the events about `job`, oldest first.
    pub async fn event_reasons(&self, job: &str) -> Vec<String> {
        self.events(job)
            .await
            .into_iter()
            .map(|(reason, _)| reason)
            .collect()
    }

    /// The reasons and notes of the events about `job`, oldest first.
    pub async fn events(&self, job: &str) -> Vec<(String, String)> {
        let events: Api<Event> = Api::default_namespaced(self.client.clone());
        let mut found = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={job}")))
            .await
            .expect("events list")
            .items;
        found.sort_by_key(|e| e.metadata.creation_timestamp.clone());
        found
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    /// The notes of the events about `job` with `reason`, oldest first.
    pub async fn event_notes(&self, job: &str, reason: &str) -> Vec<String> {
        self.events(job)
            .await
            .into_iter()
            .filter(|(found, _)| found == reason)
            .map(|(_, note)| note)
            .collect()
    }
}

/// Whether the job is in `phase`.
pub fn in_phase(phase: eto_api::job_status::JobPhase) -> impl Fn(&TrainingJob) -> bool {
    move |job| job.status.as_ref().and_then(|s| s.phase) == Some(phase)
}

/// Whether a pod runs and is ready.
pub fn pod_ready(pod: Option<&Pod>) -> bool {
    pod.is_some_and(eto_engine::pods::is_ready)
}
