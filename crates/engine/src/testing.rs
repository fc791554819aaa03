//! Fixtures for the engine's unit tests.

use eto_api::{MPIJob, PyTorchJob, TrainJob, TrainingJob};
use k8s_openapi::api::core::v1::{Container, PodSpec};

/// A small valid TrainingJob: two workers without GPUs, a launcher running horovodrun.
pub(crate) fn training_job() -> TrainingJob {
    serde_saphyr::from_str(
        r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: mnist
  namespace: default
  uid: 6f1d7c1e-0000-4000-8000-000000000001
spec:
  etReplicaSpecs:
    launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
            command: ["horovodrun", "--host-discovery-script", "/etc/edl/discover_hosts.sh", "python", "train.py"]
    worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
"#,
    )
    .expect("the fixture is a valid TrainingJob")
}

/// A small valid PyTorchJob, as training-operator v1's examples run it: a Master and two
/// Workers without GPUs, each running torchrun, nothing defaulted.
pub(crate) fn pytorch_job() -> PyTorchJob {
    serde_saphyr::from_str(
        r#"
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: ddp
  namespace: default
  uid: 6f1d7c1e-0000-4000-8000-000000000003
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.5.1
            command: ["torchrun", "train.py"]
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch/pytorch:2.5.1
            command: ["torchrun", "train.py"]
"#,
    )
    .expect("the fixture is a valid PyTorchJob")
}

/// A TrainJob of two nodes from [`torch_distributed`], as Trainer's examples run it.
pub(crate) fn train_job() -> TrainJob {
    serde_saphyr::from_str(
        r#"
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: mnist
  namespace: default
  uid: 6f1d7c1e-0000-4000-8000-000000000004
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: 2
    image: pytorch/pytorch:2.5.1
    command: ["torchrun", "train.py"]
"#,
    )
    .expect("the fixture is a valid TrainJob")
}

/// The `torch-distributed` ClusterTrainingRuntime of Trainer's chart, as JSON (the example
/// every TrainJob example names).
pub(crate) fn torch_distributed() -> serde_json::Value {
    serde_saphyr::from_str(include_str!(
        "../../../examples/trainjob/torch-distributed.yaml"
    ))
    .expect("the example is valid YAML")
}

/// A small valid MPIJob, as mpi-operator's README runs it: two workers without GPUs, a
/// launcher running mpirun, nothing defaulted by the API server.
pub(crate) fn mpi_job() -> MPIJob {
    serde_saphyr::from_str(
        r#"
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: pi
  namespace: default
  uid: 6f1d7c1e-0000-4000-8000-000000000002
spec:
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: launcher
            image: mpioperator/mpi-pi:openmpi
            command: ["mpirun", "-n", "2", "/home/mpiuser/pi"]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: mpioperator/mpi-pi:openmpi
"#,
    )
    .expect("the fixture is a valid MPIJob")
}

/// The pod spec of `job`'s worker template, for tests that change it.
pub(crate) fn worker_pod_spec(job: &mut TrainingJob) -> &mut PodSpec {
    job.spec
        .et_replica_specs
        .worker
        .template
        .spec
        .as_mut()
        .expect("the job has a worker pod spec")
}

/// The first container of `job`'s worker template.
pub(crate) fn worker_container(job: &mut TrainingJob) -> &mut Container {
    &mut worker_pod_spec(job).containers[0]
}

/// An in-memory view of a job and its children that plans are applied to, so that tests can
/// step a job through its life: created pods start `Pending`, deletions take effect at once,
/// the planned status is written back to the job.
pub(crate) mod world {
    use std::collections::BTreeMap;

    use crate::status::JobStatus;
    use eto_api::{MPIJob, PyTorchJob, TrainingJob};
    use k8s_openapi::api::batch::v1::Job as BatchJob;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use serde_json::json;

    use crate::gang::Gang;
    use crate::job::JobRef;
    use crate::kind::ApiStatus;
    use crate::plan::{
        Child, ChildKind, Observed, Plan, RejectedPod, SecretPresence, TakenName, plan,
    };
    use crate::pod_group::{GangScheduler, PodGroup};
    use crate::scaling::{Scaler, ScalerKind};

    /// `status` as the API server keeps it: serialized to JSON (a `Time` keeps whole seconds)
    /// and read back.
    fn as_stored<T: serde::Serialize + serde::de::DeserializeOwned>(status: &T) -> T {
        let json = serde_json::to_value(status).expect("a status serializes");
        serde_json::from_value(json).expect("a stored status reads back")
    }

    /// The names of the pods a plan creates or changes the metadata of.
    pub(crate) fn pod_names(plan: &Plan) -> Vec<String> {
        plan.apply
            .iter()
            .filter_map(|child| match child {
                Child::Pod(pod) => pod.metadata.name.clone(),
                Child::PodMetadata(change) => Some(change.name.clone()),
                _ => None,
            })
            .collect()
    }

    /// The names of the pods a plan creates.
    pub(crate) fn created_pods(plan: &Plan) -> Vec<String> {
        plan.apply
            .iter()
            .filter_map(|child| match child {
                Child::Pod(pod) => pod.metadata.name.clone(),
                _ => None,
            })
            .collect()
    }

    /// The names of the pods a plan deletes.
    pub(crate) fn deleted_pods(plan: &Plan) -> Vec<String> {
        plan.delete
            .iter()
            .filter(|d| d.kind == ChildKind::Pod)
            .map(|d| d.name.clone())
            .collect()
    }

    /// The reasons of the events a plan records.
    pub(crate) fn reasons(plan: &Plan) -> Vec<String> {
        plan.events.iter().map(|e| e.reason.clone()).collect()
    }

    /// The job and its children. An MPIJob's world (see [`World::mpi`]) plans `mpi_job`, and
    /// plays the Job controller for its launcher Job: it creates the Job's pod
    /// `<job>-launcher-<run>` at once.
    #[derive(Clone)]
    pub(crate) struct World {
        pub job: TrainingJob,
        pub mpi_job: Option<MPIJob>,
        pub pytorch_job: Option<PyTorchJob>,
        /// A TrainJob's world plans it with its runtime.
        pub train_job: Option<(
            crate::kind::train_job::ResolvedTrainJob,
            crate::job::Referenced,
        )>,
        pub launcher_job: Option<BatchJob>,
        pub pods: BTreeMap<String, Pod>,
        /// The last state of pods the watch saw deleted lately.
        pub departed: Vec<Pod>,
        pub service: Option<Service>,
        /// A PyTorchJob's Services, by name.
        pub pod_services: BTreeMap<String, Service>,
        pub config_map: Option<ConfigMap>,
        pub service_account: Option<ServiceAccount>,
        pub role: Option<Role>,
        pub role_binding: Option<RoleBinding>,
        pub secret: SecretPresence,
        pub scalers: Vec<Scaler>,
        pub taken: Vec<TakenName>,
        /// A pod the API server refused in the reconcile being planned.
        pub rejected_pod: Option<RejectedPod>,
        /// The operator's gang scheduler.
        pub gang: Option<GangScheduler>,
        /// Whether the cluster serves its PodGroup API.
        pub pod_groups_served: bool,
        pub pod_group: Option<PodGroup>,
        /// Nodes that announced they go away.
        pub node_warnings: Vec<crate::node_warnings::NodeWarning>,
        /// What a PyTorchJob's rendezvous store reports.
        pub group_report: Option<crate::group_report::GroupReport>,
        /// The progress an earlier reconcile read (the controller's memory).
        pub earlier_progress: Option<crate::goodput::ReportedProgress>,
        /// A PyTorchJob's HorizontalPodAutoscaler.
        pub autoscaler: Option<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>,
        pub now: jiff::Timestamp,
        /// Pods created so far: each gets a uid of its own.
        pub pods_created: u64,
    }

    impl World {
        pub fn new(job: TrainingJob) -> Self {
            Self {
                job,
                mpi_job: None,
                pytorch_job: None,
                train_job: None,
                launcher_job: None,
                pods: BTreeMap::new(),
                departed: Vec::new(),
                service: None,
                pod_services: BTreeMap::new(),
                config_map: None,
                service_account: None,
                role: None,
                role_binding: None,
                secret: SecretPresence::Missing,
                scalers: Vec::new(),
                taken: Vec::new(),
                rejected_pod: None,
                gang: None,
                pod_groups_served: true,
                pod_group: None,
                node_warnings: Vec::new(),
                group_report: None,
                earlier_progress: None,
                autoscaler: None,
                now: jiff::Timestamp::from_second(1_800_000_000).expect("a valid time"),
                pods_created: 0,
            }
        }

        /// A world of MPIJob `job`.
        pub fn mpi(job: MPIJob) -> Self {
            Self {
                mpi_job: Some(job),
                ..Self::new(crate::testing::training_job())
            }
        }

        /// A world of PyTorchJob `job`.
        pub fn pytorch(job: PyTorchJob) -> Self {
            Self {
                pytorch_job: Some(job),
                ..Self::new(crate::testing::training_job())
            }
        }

        /// A world of TrainJob `job`, whose runtime is `runtime`.
        pub fn train(job: eto_api::TrainJob, runtime: crate::job::Referenced) -> Self {
            let resolved = crate::kind::train_job::ResolvedTrainJob::new(job, &runtime);
            Self {
                train_job: Some((resolved, runtime)),
                ..Self::new(crate::testing::training_job())
            }
        }

        /// Whether the job has a Service per pod (a PyTorchJob's, a TrainJob's).
        fn services_per_pod(&self) -> bool {
            self.pytorch_job.is_some() || self.train_job.is_some()
        }

        pub fn observed(&self) -> Observed<'_> {
            Observed {
                job: match (&self.mpi_job, &self.pytorch_job, &self.train_job) {
                    (Some(job), _, _) => JobRef::new(job),
                    (None, Some(job), _) => JobRef::new(job),
                    (None, None, Some((job, _))) => JobRef::new(job),
                    (None, None, None) => JobRef::new(&self.job),
                },
                launcher_job: self.launcher_job.as_ref(),
                pods: self.pods.values().collect(),
                departed: self.departed.iter().collect(),
                worker_service: self.service.as_ref(),
                pod_services: self.pod_services.values().collect(),
                config_map: self.config_map.as_ref(),
                service_account: self.service_account.as_ref(),
                role: self.role.as_ref(),
                role_binding: self.role_binding.as_ref(),
                ssh_secret: self.secret,
                scalers: &self.scalers,
                taken: &self.taken,
                rejected_pod: self.rejected_pod.as_ref(),
                gang: match &self.gang {
                    None => Gang::Off,
                    Some(scheduler) if self.pod_groups_served => Gang::Ready(scheduler),
                    Some(scheduler) => Gang::Missing(scheduler),
                },
                pod_group: self.pod_group.as_ref(),
                node_warnings: &self.node_warnings,
                group_report: self.group_report.as_ref(),
                earlier_progress: self.earlier_progress.as_ref(),
                autoscaler: self.autoscaler.as_ref(),
            }
        }

        /// Plans at the world's time, applies the plan, returns it.
        pub fn reconcile(&mut self) -> Plan {
            let plan = plan(&self.observed(), self.now);
            self.apply(&plan);
            plan
        }

        pub fn apply(&mut self, plan: &Plan) {
            for child in &plan.apply {
                match child.clone() {
                    Child::Pod(pod) => {
                        let name = pod.metadata.name.clone().expect("pods have names");
                        assert!(
                            !self.pods.contains_key(&name),
                            "{name} is applied again, but a pod's spec cannot change"
                        );
                        let mut pod = *pod;
                        // As the API server stores it.
                        self.pods_created += 1;
                        pod.metadata.uid = Some(format!("uid-{name}-{}", self.pods_created));
                        pod.metadata.creation_timestamp = Some(
                            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(self.now),
                        );
                        pod.status = Some(
                            serde_json::from_value(json!({"phase": "Pending"})).expect("a status"),
                        );
                        self.pods.insert(name, pod);
                    }
                    Child::PodMetadata(change) => {
                        let existing = self.pod(&change.name);
                        change.apply_to(&mut existing.metadata);
                    }
                    Child::Service(service) if self.services_per_pod() => {
                        let name = service.metadata.name.clone().unwrap_or_default();
                        self.pod_services.insert(name, *service);
                    }
                    Child::Service(service) => self.service = Some(*service),
                    Child::ConfigMap(config_map) => self.config_map = Some(*config_map),
                    Child::ServiceAccount(account) => self.service_account = Some(*account),
                    Child::Role(role) => self.role = Some(*role),
                    Child::RoleBinding(binding) => self.role_binding = Some(*binding),
                    Child::LauncherJob(job) => self.create_launcher_job(*job),
                    Child::PodGroup(group) => self.pod_group = Some(*group),
                    Child::Autoscaler(autoscaler) => self.autoscaler = Some(*autoscaler),
                }
            }
            if plan.create_ssh_secret.is_some() {
                self.secret = SecretPresence::Present;
            }
            for deletion in &plan.delete {
                match deletion.kind {
                    ChildKind::Pod => {
                        self.pods.remove(&deletion.name);
                    }
                    ChildKind::Service if self.services_per_pod() => {
                        self.pod_services.remove(&deletion.name);
                    }
                    ChildKind::Service => self.service = None,
                    ChildKind::PodGroup => self.pod_group = None,
                    ChildKind::Autoscaler => self.autoscaler = None,
                    ChildKind::Job => {
                        self.launcher_job = None;
                        self.pods.retain(|_, pod| {
                            !pod.metadata
                                .owner_references
                                .iter()
                                .flatten()
                                .any(|owner| owner.kind == "Job")
                        });
                    }
                }
            }
            if let Some(status) = &plan.status {
                // Written as the API has it, in JSON (times in whole seconds), and read back
                // from there.
                let name = self.observed().job.name().to_string();
                let kind = self.observed().job.kind();
                match ApiStatus::of(kind, &name, status.clone()) {
                    ApiStatus::MpiJob(status) => {
                        if let Some(job) = &mut self.mpi_job {
                            job.status = Some(as_stored(&status));
                        }
                    }
                    ApiStatus::PyTorchJob(status) => {
                        if let Some(job) = &mut self.pytorch_job {
                            job.status = Some(as_stored(&*status));
                        }
                    }
                    ApiStatus::TrainingJob(status) => self.job.status = Some(as_stored(&status)),
                    ApiStatus::TrainJob(status) => {
                        if let Some((job, runtime)) = &mut self.train_job {
                            let mut stored = job.job.clone();
                            stored.status = Some(as_stored(&*status));
                            *job = crate::kind::train_job::ResolvedTrainJob::new(stored, runtime);
                        }
                    }
                }
            }
            let uid = self.job.metadata.uid.clone().unwrap_or_default();
            for update in &plan.scalers {
                let scaler = self
                    .scalers
                    .iter_mut()
                    .find(|s| s.kind == update.kind && s.name == update.name)
                    .expect("updates are for known requests");
                if update.adopt {
                    scaler.owners.push(uid.clone());
                }
                if let Some(status) = &update.status {
                    scaler.state = status.state();
                }
            }
        }

        /// Creates a request of `kind` for the job, with `spec` (its `selector` is filled in),
        /// created now.
        pub fn request(&mut self, kind: ScalerKind, name: &str, mut spec: serde_json::Value) {
            spec["selector"] = json!({"name": self.job.metadata.name});
            let object = json!({
                "apiVersion": "kai.alibabacloud.com/v1alpha1",
                "kind": kind.as_str(),
                "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                    "creationTimestamp": self.now.to_string()},
                "spec": spec,
            });
            self.scalers.push(Scaler::read(kind, &object));
        }

        /// The request named `name`.
        pub fn scaler(&self, name: &str) -> &Scaler {
            self.scalers
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("no request {name}"))
        }

        pub fn pod(&mut self, name: &str) -> &mut Pod {
            self.pods
                .get_mut(name)
                .unwrap_or_else(|| panic!("no pod {name}"))
        }

        fn set_status(&mut self, name: &str, status: serde_json::Value) {
            self.pod(name).status = Some(serde_json::from_value(status).expect("a pod status"));
        }

        /// A world whose TrainingJob `mnist` runs two workers, needs one, and replaces a worker
        /// that fails (`restartPolicy: OnFailure`).
        pub fn launched_replacing_failed_workers() -> Self {
            let mut job = crate::testing::training_job();
            job.spec.et_replica_specs.worker.restart_policy =
                Some(eto_api::common::ReplicaRestartPolicy::OnFailure);
            job.spec.et_replica_specs.worker.min_replicas = Some(1);
            let mut world = Self::new(job);
            world.launch();
            world
        }

        /// Reconciles the new TrainingJob `mnist` of two workers until they and its launcher
        /// run.
        pub fn launch(&mut self) {
            self.launch_with(2);
        }

        /// Reconciles the new TrainingJob `mnist` of `workers` workers until they and its
        /// launcher run.
        pub fn launch_with(&mut self, workers: u32) {
            self.reconcile();
            for worker in 0..workers {
                self.ready(&format!("mnist-worker-{worker}"));
            }
            self.reconcile();
            self.ready("mnist-launcher");
            self.reconcile();
        }

        /// Whether the job's condition `type_` holds, and its reason.
        pub fn condition(&self, type_: &str) -> (bool, String) {
            let condition = crate::conditions::find(&self.status().conditions, type_)
                .unwrap_or_else(|| panic!("no {type_} condition"));
            (
                condition.status == eto_api::common::ConditionStatus::True,
                condition.reason.clone().unwrap_or_default(),
            )
        }

        /// Whether the gate of Worker `name` is open (see [`crate::joining`]).
        pub fn gate_open(&self, name: &str) -> bool {
            crate::joining::is_open(&self.pods[name])
        }

        /// The pod runs on `node-<name>` and is Ready.
        pub fn ready(&mut self, name: &str) {
            self.pod(name)
                .spec
                .as_mut()
                .expect("pods have specs")
                .node_name = Some(format!("node-{name}"));
            self.set_status(
                name,
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
            );
        }

        /// The pod runs but is not Ready yet.
        pub fn running_not_ready(&mut self, name: &str) {
            self.set_status(
                name,
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}),
            );
        }

        /// The pod runs, Ready, its training container's process running, as a kubelet
        /// reports it.
        pub fn training(&mut self, name: &str) {
            self.ready(name);
            self.set_status(name, json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "pytorch", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                    "state": {"running": {"startedAt": "2027-01-15T08:00:00Z"}}}]}));
        }

        /// The pod's training container failed with `code` and waits to be started again
        /// (`CrashLoopBackOff`): the pod stays `Running`, not Ready.
        pub fn crash_loop(&mut self, name: &str, code: i32) {
            self.set_status(name, json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{"name": "pytorch", "image": "i", "imageID": "", "ready": false, "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": code, "reason": "Error"}}}]}));
        }

        /// The pod's container `main` waits for good with the kubelet's `reason` and
        /// `message` (`ImagePullBackOff`, `CreateContainerConfigError`, ...): the pod stays
        /// `Pending`.
        pub fn waits(&mut self, name: &str, reason: &str, message: &str) {
            self.set_status(name, json!({"phase": "Pending",
                "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": reason, "message": message}}}]}));
        }

        /// The pod runs, Ready, its container started now.
        pub fn runs(&mut self, name: &str) {
            self.ready(name);
            let started = self.now.to_string();
            self.set_status(name, json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                    "state": {"running": {"startedAt": started}}}]}));
        }

        /// The pod's containers exited with `code`.
        pub fn exit(&mut self, name: &str, code: i32) {
            let phase = if code == 0 { "Succeeded" } else { "Failed" };
            let reason = if code == 0 { "Completed" } else { "Error" };
            self.set_status(name, json!({"phase": phase, "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": code, "reason": reason}}}]}));
        }

        /// The kubelet evicted the pod.
        pub fn evict(&mut self, name: &str) {
            self.set_status(
                name,
                json!({"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}),
            );
        }

        /// The pod gets `DisruptionTarget=True` (its node is being reclaimed).
        pub fn disrupt(&mut self, name: &str) {
            self.set_status(name, json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]}));
        }

        /// The pod's node went away with it, as a spot reclaim without notice ends a pod:
        /// `Failed` with exit code 137 and `DisruptionTarget=True` at once.
        pub fn lose_with_node(&mut self, name: &str) {
            self.set_status(name, json!({"phase": "Failed", "reason": "Terminated",
                "conditions": [{"type": "Ready", "status": "False"}, {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}],
                "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}));
        }

        /// The pod is deleted, and the watch saw the state it went in.
        pub fn went(&mut self, name: &str) {
            let last = self.pods.remove(name).expect("the pod exists");
            self.departed.push(last);
        }

        /// Node `node` announces, with Karpenter's taint, that it goes in `seconds`.
        pub fn warn(&mut self, node: &str, seconds: i64) {
            let now = self.now;
            self.node_warnings.push(crate::node_warnings::NodeWarning {
                node: node.into(),
                signal: "taint karpenter.sh/disrupted".into(),
                since: Some(now),
                deadline: Some(now + jiff::SignedDuration::from_secs(seconds)),
                lead: crate::node_warnings::DEFAULT_LEAD,
            });
        }

        /// Sets the Worker replicas of the world's PyTorchJob, as the scale subresource does.
        pub fn set_worker_replicas(&mut self, replicas: i32) {
            let job = self.pytorch_job.as_mut().expect("a PyTorchJob");
            let worker = job.spec.pytorch_replica_specs.get_mut("Worker");
            worker.expect("Workers").replicas = Some(replicas);
        }

        pub fn advance(&mut self, seconds: i64) {
            self.now += jiff::SignedDuration::from_secs(seconds);
        }

        pub fn status(&self) -> &eto_api::TrainingJobStatus {
            self.job.status.as_ref().expect("the job has a status")
        }

        /// The status of the MPIJob, in the engine's shape.
        pub fn mpi_status(&self) -> JobStatus {
            self.observed().job.status()
        }

        /// Creates the launcher Job and, as the Job controller would, its pod.
        fn create_launcher_job(&mut self, job: BatchJob) {
            let name = job.metadata.name.clone().expect("jobs have names");
            let template = job.spec.clone().expect("jobs have specs").template;
            let run = template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref())
                .and_then(|l| l.get(eto_api::well_known::RUN_LABEL).cloned())
                .unwrap_or_default();
            let pod_name = format!("{name}-{run}");
            let mut metadata = template.metadata.clone().unwrap_or_default();
            metadata.name = Some(pod_name.clone());
            metadata.namespace = job.metadata.namespace.clone();
            metadata.owner_references = Some(vec![
                serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job",
                    "name": name, "uid": format!("uid-{name}"), "controller": true}))
                .expect("an owner reference"),
            ]);
            let pod = Pod {
                metadata,
                spec: template.spec,
                status: Some(
                    serde_json::from_value(json!({"phase": "Pending"})).expect("a status"),
                ),
            };
            self.pods.insert(pod_name, pod);
            self.launcher_job = Some(job);
        }

        /// The launcher Job records its pod's end, as the Job controller does.
        pub fn launcher_job_finished(&mut self, succeeded: bool) {
            let (type_, reason) = if succeeded {
                ("Complete", "CompletionsReached")
            } else {
                ("Failed", "BackoffLimitExceeded")
            };
            let job = self.launcher_job.as_mut().expect("a launcher Job");
            job.status = Some(
                serde_json::from_value(json!({"conditions": [
                    {"type": type_, "status": "True", "reason": reason,
                     "message": "Job has reached the specified backoff limit"}]}))
                .expect("a Job status"),
            );
        }

        /// The name of the launcher Job's pod.
        pub fn launcher_pod_name(&self) -> String {
            self.pods
                .keys()
                .find(|name| name.contains("-launcher-"))
                .cloned()
                .expect("a launcher pod")
        }

        pub fn launcher_hostfile(&self) -> Option<String> {
            let launcher = self.pods.get(&format!(
                "{}-launcher",
                self.job.metadata.name.as_deref().unwrap_or_default()
            ))?;
            launcher
                .metadata
                .annotations
                .as_ref()?
                .get(eto_api::well_known::HOSTFILE_ANNOTATION)
                .cloned()
        }
    }
}
