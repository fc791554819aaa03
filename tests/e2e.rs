//! Real training under eto: the example jobs of `examples/horovod/` run real `horovodrun`
//! with real training processes on a real cluster, and these tests read what the training
//! prints (`eto-example: event=...`, see `examples/horovod/train_elastic.py`) to see that it
//! survives a worker's failure, checkpoints and resumes after a spot reclaim, follows
//! scaling requests, and hears the `kubeai` SDK's stop.
//!
//! They need (all `#[ignore]`d; `cargo test -p eto-tests --test integration e2e:: --
//! --ignored --test-threads 1 --nocapture`):
//! - the cluster KUBECONFIG names, with a pod network and cluster DNS for headless Services;
//! - the image of `examples/horovod/Dockerfile`, named by `ETO_E2E_IMAGE`, on its nodes
//!   (`ETO_E2E_PULL_POLICY`, default `IfNotPresent`);
//! - `ETO_E2E_POD_PATCH`, a JSON merge patch of every pod template's spec, when the pods must
//!   be told where to run (a node selector, a toleration);
//! - a directory every pod's node sees at the same path, `ETO_E2E_CHECKPOINT_ROOT` (default
//!   `/tmp/eto-e2e`): each test backs the examples' checkpoint claim with a hostPath
//!   PersistentVolume below it (one node, or a path all nodes mount);
//! - `ETO_E2E_MOUNT_SCRIPTS=1` for an image with Horovod but without the examples' scripts
//!   (the harness's `harness.local/horovod:v1`): the scripts the Dockerfile copies to
//!   `/opt/eto` are mounted there from this repository, through a ConfigMap.
//!
//! Each test runs the operator in-process for a scratch namespace of its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eto_api::job_status::JobPhase;
use eto_tests::job_api;
use eto_tests::poll::{until, within};
use eto_tests::scratch::Scratch;
use eto_tests::workspace_root;
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, LogParams, Patch, PatchParams};

/// How long a job may take to start (its image is large).
const START: Duration = Duration::from_secs(180);
/// How long a job may take to train to its end.
const FINISH: Duration = Duration::from_secs(600);

/// One line a training process printed, `eto-example: event=<name> key=value ...`, with the
/// kubelet's time of it.
#[derive(Clone, Debug)]
struct Event {
    at: jiff::Timestamp,
    name: String,
    fields: BTreeMap<String, String>,
}

impl Event {
    fn field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    fn number(&self, key: &str) -> Option<u64> {
        self.field(key)?.parse().ok()
    }

    /// An event line of a launcher's log (`<kubelet time> [<rank>]<stdout>:eto-example: ...`).
    fn parse(line: &str) -> Option<Self> {
        let (time, rest) = line.split_once(' ')?;
        let (_, event) = rest.split_once("eto-example: event=")?;
        let mut words = event.split_whitespace();
        let name = words.next()?.to_string();
        let fields = words
            .filter_map(|word| word.split_once('='))
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        Some(Self {
            at: time.parse().ok()?,
            name,
            fields,
        })
    }
}

/// What the launchers of a job printed, as it prints it: every launcher pod of the job is
/// followed from the moment it runs.
#[derive(Clone, Default)]
struct Training {
    events: Arc<Mutex<Vec<Event>>>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Training {
    /// Follows the launchers (pods with `selector`) in `pods` until the test ends.
    fn follow(pods: Api<Pod>, selector: String) -> Self {
        let training = Self::default();
        let shared = training.clone();
        tokio::spawn(async move {
            let mut followed = Vec::new();
            loop {
                let listed = pods
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .map(|list| list.items)
                    .unwrap_or_default();
                for pod in listed {
                    let started = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .is_some_and(|phase| phase != "Pending");
                    let uid = pod.uid().unwrap_or_default();
                    if started && !followed.contains(&uid) {
                        followed.push(uid);
                        tokio::spawn(shared.clone().read(pods.clone(), pod.name_any()));
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        training
    }

    async fn read(self, pods: Api<Pod>, name: String) {
        let params = LogParams {
            follow: true,
            timestamps: true,
            ..LogParams::default()
        };
        let Ok(stream) = pods.log_stream(&name, &params).await else {
            return;
        };
        // Every line, kept for a look after the test, whatever it shows; the launchers of
        // successive runs share a name, so each appends to the file of the one before.
        let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e-logs");
        let _ = std::fs::create_dir_all(&dir);
        let namespace = pods.namespace().unwrap_or_default().to_string();
        let mut kept = std::fs::File::options()
            .create(true)
            .append(true)
            .open(dir.join(format!("{namespace}-{name}.log")))
            .ok();
        let mut lines = stream.lines();
        while let Some(Ok(line)) = lines.next().await {
            if let Some(file) = kept.as_mut() {
                use std::io::Write;
                let _ = writeln!(file, "{line}");
            }
            if let Some(event) = Event::parse(&line) {
                println!("  {name}: {}", line.split_once(' ').map_or("", |(_, l)| l));
                self.events.lock().expect("not poisoned").push(event);
            }
            self.lines.lock().expect("not poisoned").push(line);
        }
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().expect("not poisoned").clone()
    }

    /// The first event after `index` (in the order seen) that `matches`, once there is one.
    /// Fails the test, with the launchers' other output, when `limit` passes first.
    async fn wait(
        &self,
        what: &str,
        after: usize,
        limit: Duration,
        matches: impl Fn(&Event) -> bool,
    ) -> (usize, Event) {
        let found = within(limit, async || {
            self.events()
                .into_iter()
                .enumerate()
                .skip(after)
                .find(|(_, event)| matches(event))
        })
        .await;
        let Some((index, event)) = found else {
            panic!(
                "timed out after {limit:?}: {what}; the launchers' other output:\n{}",
                self.other_lines()
            );
        };
        (index + 1, event)
    }

    /// The launchers' lines that are not events, for a failure's message.
    fn other_lines(&self) -> String {
        let lines = self.lines.lock().expect("not poisoned");
        let others: Vec<&String> = lines
            .iter()
            .filter(|l| !l.contains("eto-example"))
            .collect();
        others
            .iter()
            .rev()
            .take(30)
            .rev()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The ConfigMap and volume of the examples' scripts when they are mounted.
const SCRIPTS: &str = "eto-examples";

/// Whether the examples' scripts are mounted from this repository (`ETO_E2E_MOUNT_SCRIPTS`).
fn mount_scripts() -> bool {
    std::env::var("ETO_E2E_MOUNT_SCRIPTS").is_ok_and(|value| value == "1")
}

/// A scratch namespace with the operator, the examples' checkpoint claim backed by a fresh
/// directory, and a way to apply the examples as this cluster needs them.
struct E2e {
    scratch: Scratch,
}

impl E2e {
    async fn start(name: &str) -> Self {
        let scratch = Scratch::start(name).await;
        let root = std::env::var("ETO_E2E_CHECKPOINT_ROOT").unwrap_or("/tmp/eto-e2e".into());
        let path = format!("{root}/{}", scratch.namespace);
        let volume: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{}-checkpoints", scratch.namespace)},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "",
                "claimRef": {"namespace": scratch.namespace, "name": "elastic-horovod-checkpoints"},
                "hostPath": {"path": path, "type": "DirectoryOrCreate"}}
        }))
        .unwrap();
        let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "elastic-horovod-checkpoints"},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                "volumeName": volume.name_any(), "resources": {"requests": {"storage": "1Gi"}}}
        }))
        .unwrap();
        let apply = PatchParams::apply("eto-e2e").force();
        Api::<PersistentVolume>::all(scratch.client.clone())
            .patch(&volume.name_any(), &apply, &Patch::Apply(&volume))
            .await
            .unwrap();
        Api::<PersistentVolumeClaim>::namespaced(scratch.client.clone(), &scratch.namespace)
            .patch(&claim.name_any(), &apply, &Patch::Apply(&claim))
            .await
            .unwrap();
        if mount_scripts() {
            let read = |path: &str| std::fs::read_to_string(workspace_root().join(path)).unwrap();
            let scripts: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {"name": SCRIPTS},
                "data": {
                    "eto_notice.py": read("python/eto_notice.py"),
                    "train_elastic.py": read("examples/horovod/train_elastic.py"),
                    "train_kubeai.py": read("examples/horovod/train_kubeai.py"),
                }
            }))
            .unwrap();
            Api::<ConfigMap>::namespaced(scratch.client.clone(), &scratch.namespace)
                .patch(SCRIPTS, &apply, &Patch::Apply(&scripts))
                .await
                .unwrap();
        }
        Self { scratch }
    }

    fn pods(&self) -> Api<Pod> {
        self.scratch.pods()
    }

    /// Applies the example `file` of `examples/horovod/` as it is, but for the image, where its
    /// pods run, and `env` on the launcher (the training's own settings, which horovodrun
    /// passes on to every rank). Returns the job's name.
    async fn apply_example(&self, file: &str, env: &[(&str, &str)]) -> String {
        let text =
            std::fs::read_to_string(workspace_root().join("examples/horovod").join(file)).unwrap();
        let mut job: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let image =
            std::env::var("ETO_E2E_IMAGE").expect("ETO_E2E_IMAGE names the examples' image");
        let pull = std::env::var("ETO_E2E_PULL_POLICY").unwrap_or("IfNotPresent".into());
        let patch: Option<serde_json::Value> = std::env::var("ETO_E2E_POD_PATCH")
            .ok()
            .map(|text| serde_json::from_str(&text).expect("ETO_E2E_POD_PATCH is JSON"));
        let field = if job["spec"]["etReplicaSpecs"].is_object() {
            "etReplicaSpecs"
        } else {
            "mpiReplicaSpecs"
        };
        let replicas = job["spec"][field]
            .as_object_mut()
            .expect("a job with replica specs");
        for (role, replica) in replicas.iter_mut() {
            let spec = &mut replica["template"]["spec"];
            if let Some(patch) = &patch {
                json_patch::merge(spec, patch);
            }
            if mount_scripts() {
                let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
                spec["volumes"] = volumes
                    .into_iter()
                    .chain([serde_json::json!({"name": SCRIPTS, "configMap": {"name": SCRIPTS}})])
                    .collect();
            }
            for container in spec["containers"].as_array_mut().into_iter().flatten() {
                container["image"] = image.clone().into();
                container["imagePullPolicy"] = pull.clone().into();
                if mount_scripts() {
                    let mounts = container["volumeMounts"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    container["volumeMounts"] = mounts
                        .into_iter()
                        .chain([serde_json::json!({"name": SCRIPTS, "mountPath": "/opt/eto"})])
                        .collect();
                    let mut vars = container["env"].as_array().cloned().unwrap_or_default();
                    vars.push(serde_json::json!({"name": "PYTHONPATH", "value": "/opt/eto"}));
                    container["env"] = vars.into();
                }
                if role.eq_ignore_ascii_case("launcher") {
                    let vars = container["env"]
                        .as_array_mut()
                        .expect("the launcher has env");
                    for (name, value) in env {
                        vars.retain(|var| var["name"] != *name);
                        vars.push(serde_json::json!({"name": name, "value": value}));
                    }
                }
            }
        }
        let object: DynamicObject = serde_json::from_value(job).unwrap();
        let name = object.metadata.name.clone().unwrap();
        job_api::of(&self.scratch.client, &self.scratch.namespace, &object)
            .patch(
                &name,
                &PatchParams::apply("eto-e2e").force(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap();
        name
    }

    /// Applies the et-operator scaling request `kind` (`ScaleOut`, `ScaleIn`) `name` with
    /// `spec`, as Arena renders it.
    async fn request_scaling(&self, kind: &str, name: &str, spec: serde_json::Value) {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": kind,
            "metadata": {"name": name}, "spec": spec}))
        .unwrap();
        job_api::of(&self.scratch.client, &self.scratch.namespace, &object)
            .patch(name, &PatchParams::apply("eto-e2e"), &Patch::Apply(&object))
            .await
            .unwrap();
    }

    /// The job `name`'s status, read through the kind's API, in the engine's shape.
    async fn status(&self, kind: Kind, name: &str) -> Option<eto_engine::status::JobStatus> {
        match kind {
            Kind::TrainingJob => {
                let job = self.scratch.jobs().get(name).await.ok()?;
                Some(eto_engine::job::JobRef::new(&job).status())
            }
            Kind::MpiJob => {
                let api: Api<eto_api::MPIJob> =
                    Api::namespaced(self.scratch.client.clone(), &self.scratch.namespace);
                let job = api.get(name).await.ok()?;
                Some(eto_engine::job::JobRef::new(&job).status())
            }
        }
    }

    async fn wait_phase(
        &self,
        kind: Kind,
        name: &str,
        phase: JobPhase,
        within: Duration,
    ) -> eto_engine::status::JobStatus {
        until(&format!("{name} is {phase:?}"), within, async || {
            let status = self.status(kind, name).await?;
            (status.phase == Some(phase)).then_some(status)
        })
        .await
    }

    /// Evicts pod `name` as a drain does: through the Eviction API, with its own grace period.
    async fn evict(&self, name: &str) {
        eto_tests::eviction::evict(&self.scratch.client, &self.scratch.namespace, name, None).await;
    }

    /// Runs `script`, which ends the container it runs in, in the first container of pod
    /// `name` (with kubectl, as a person would): the session may end with the container
    /// (SIGKILL, exit status 137) before kubectl hears the script's own end.
    fn exec_ending_container(&self, name: &str, script: &str) {
        let status = self.exec_status(name, script);
        assert!(
            status.success() || status.code() == Some(137),
            "kubectl exec {name}: {script}: {status}"
        );
    }

    fn exec_status(&self, name: &str, script: &str) -> std::process::ExitStatus {
        std::process::Command::new("kubectl")
            .args([
                "-n",
                &self.scratch.namespace,
                "exec",
                name,
                "--",
                "sh",
                "-c",
                script,
            ])
            .status()
            .expect("kubectl runs")
    }

    async fn end(self) {
        self.scratch.end().await;
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    TrainingJob,
    MpiJob,
}

impl Kind {
    fn launcher_selector(self, job: &str) -> String {
        match self {
            Self::TrainingJob => format!("training-job-name={job},training-job-role=launcher"),
            Self::MpiJob => format!(
                "training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher"
            ),
        }
    }
}

/// The name of a ready worker of `job`'s current run, other than `not`.
async fn a_worker(e2e: &E2e, kind: Kind, job: &str, not: &[String]) -> String {
    let status = e2e.status(kind, job).await.unwrap();
    status
        .current_workers
        .into_iter()
        .find(|worker| !not.contains(worker))
        .expect("a worker in host discovery")
}

/// Case 1 (and 3): a worker's pod fails while it trains: Horovod goes on, eto replaces the
/// worker under a new name, Horovod grows back, and the job succeeds with no restart.
async fn a_failed_worker_is_replaced_while_training_goes_on(kind: Kind, file: &str) {
    let e2e = E2e::start(match kind {
        Kind::TrainingJob => "e2e-failed",
        Kind::MpiJob => "e2e-failed-mpi",
    })
    .await;
    let job = e2e.apply_example(file, &[("TRAIN_STEPS", "600")]).await;
    let training = Training::follow(e2e.pods(), kind.launcher_selector(&job));
    let (seen, _) = training
        .wait("training at size 3", 0, START, |e| {
            e.name == "step" && e.field("size") == Some("3") && e.number("step") >= Some(50)
        })
        .await;
    let lost = a_worker(&e2e, kind, &job, &[]).await;
    // Its sshd killed: the container ends with an error, and the rank in it with it.
    e2e.exec_ending_container(&lost, "kill -KILL $(pgrep -f '^sshd: /usr/sbin/sshd')");
    let killed = Instant::now();
    let (_, reset) = training
        .wait(
            "a reset after the loss",
            seen,
            Duration::from_secs(120),
            |e| e.name == "reset",
        )
        .await;
    println!(
        "{job}: Horovod reset to size {} {:?} after the worker's loss",
        reset.field("size").unwrap_or("?"),
        killed.elapsed()
    );
    let (_, joined) = training
        .wait(
            "a rank on the replacement",
            seen,
            Duration::from_secs(120),
            |e| {
                e.name == "start"
                    && e.field("host").is_some_and(|h| !h.is_empty() && h != lost)
                    && e.number("step") > Some(0)
            },
        )
        .await;
    println!(
        "{job}: a rank started on {} at step {}",
        joined.field("host").unwrap_or("?"),
        joined.field("step").unwrap_or("?")
    );
    training
        .wait(
            "training at size 3 again",
            seen,
            Duration::from_secs(120),
            |e| e.name == "step" && e.field("size") == Some("3") && e.at > reset.at,
        )
        .await;
    let status = e2e
        .wait_phase(kind, &job, JobPhase::Succeeded, FINISH)
        .await;
    training
        .wait("the training's end", 0, Duration::from_secs(10), |e| {
            e.name == "done"
        })
        .await;
    assert_eq!(
        status.restart_count,
        0,
        "no restart:\n{}",
        training.other_lines()
    );
    assert!(
        status.blacklist.iter().any(|entry| entry.pod == lost),
        "{lost} is blacklisted: {:?}",
        status.blacklist
    );
    e2e.end().await;
}

#[tokio::test]
#[ignore = "needs cluster with a pod network and the examples' image (see the module documentation)"]
async fn case1_a_training_jobs_failed_worker_is_replaced_while_training_goes_on() {
    a_failed_worker_is_replaced_while_training_goes_on(Kind::TrainingJob, "trainingjob.yaml").await;
}

#[tokio::test]
#[ignore = "needs cluster with a pod network and the examples' image (see the module documentation)"]
async fn case3_an_mpijobs_failed_worker_is_replaced_while_training_goes_on() {
    a_failed_worker_is_replaced_while_training_goes_on(Kind::MpiJob, "mpijob.yaml").await;
}

/// What a spot reclaim cost a run: the figures of case 2.
struct ReclaimCost {
    to_notice: jiff::SignedDuration,
    to_suspended: jiff::SignedDuration,
    ready_to_first_step: jiff::SignedDuration,
    last_step: u64,
    resumed_at: u64,
}

/// Case 2 (and 4): two of the three workers are evicted, as a spot reclaim's drain does: the
/// training saves a checkpoint and stops, the job is suspended (never failed), new workers
/// come, and the run that resumes starts from the checkpointed step; the job succeeds.
async fn a_reclaim_below_the_minimum_checkpoints_suspends_and_resumes(
    name: &str,
    file: &str,
    saved_for: &[&str],
) -> ReclaimCost {
    let e2e = E2e::start(name).await;
    let job = e2e.apply_example(file, &[("TRAIN_STEPS", "900")]).await;
    let kind = Kind::TrainingJob;
    let training = Training::follow(e2e.pods(), kind.launcher_selector(&job));
    let (seen, _) = training
        .wait("training at size 3", 0, START, |e| {
            e.name == "step" && e.field("size") == Some("3") && e.number("step") >= Some(100)
        })
        .await;
    let first = a_worker(&e2e, kind, &job, &[]).await;
    let second = a_worker(&e2e, kind, &job, std::slice::from_ref(&first)).await;
    let evicted = jiff::Timestamp::now();
    e2e.evict(&first).await;
    e2e.evict(&second).await;
    // The training hears it and saves.
    let (_, saved) = training
        .wait(
            "a checkpoint on the notice",
            seen,
            Duration::from_secs(60),
            |e| e.name == "checkpoint" && saved_for.contains(&e.field("reason").unwrap_or("")),
        )
        .await;
    let (_, stopped) = training
        .wait("the training stops", seen, Duration::from_secs(120), |e| {
            e.name == "stop"
        })
        .await;
    let last_step = stopped.number("step").unwrap();
    let suspended = e2e
        .wait_phase(kind, &job, JobPhase::Suspended, Duration::from_secs(120))
        .await;
    let suspended_at = jiff::Timestamp::now();
    assert!(
        suspended.conditions.iter().all(|c| c.type_ != "Failed"),
        "{:?}",
        suspended.conditions
    );
    // The resumed run starts from the saved step.
    let (after_resume, resumed) = training
        .wait(
            "the resumed run starts",
            seen,
            Duration::from_secs(180),
            |e| e.name == "start" && e.at > stopped.at && e.field("rank") == Some("0"),
        )
        .await;
    let resumed_at = resumed.number("step").unwrap();
    let latest_saved = training
        .events()
        .iter()
        .filter(|e| e.name == "checkpoint" && e.at <= stopped.at)
        .filter_map(|e| e.number("step"))
        .max()
        .unwrap();
    assert_eq!(
        resumed_at, latest_saved,
        "the resumed run starts at the checkpointed step"
    );
    let (_, first_step) = training
        .wait(
            "the resumed run trains",
            after_resume,
            Duration::from_secs(120),
            |e| e.name == "step",
        )
        .await;
    // When the new run's workers were all ready.
    let status = e2e.status(kind, &job).await.unwrap();
    let ready_at = workers_ready_at(&e2e, &status.current_workers).await;
    let done = e2e
        .wait_phase(kind, &job, JobPhase::Succeeded, FINISH)
        .await;
    assert_eq!(
        done.restart_count,
        0,
        "a resume is no restart:\n{}",
        training.other_lines()
    );
    println!(
        "{job}: checkpoint {} for {}",
        saved.field("step").unwrap_or("?"),
        saved.field("reason").unwrap_or("?")
    );
    let cost = ReclaimCost {
        to_notice: saved.at.duration_since(evicted),
        to_suspended: suspended_at.duration_since(evicted),
        ready_to_first_step: first_step.at.duration_since(ready_at),
        last_step,
        resumed_at,
    };
    if !training.other_lines().is_empty() {
        println!(
            "{job}: other launcher output (last lines):\n{}",
            training.other_lines()
        );
    }
    e2e.end().await;
    cost
}

/// When the last of `workers` turned Ready.
async fn workers_ready_at(e2e: &E2e, workers: &[String]) -> jiff::Timestamp {
    let mut latest = jiff::Timestamp::UNIX_EPOCH;
    for worker in workers {
        let pod = e2e.pods().get(worker).await.unwrap();
        let ready = pod
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "Ready" && c.status == "True")
            .and_then(|c| c.last_transition_time)
            .map_or(latest, |t| t.0);
        latest = latest.max(ready);
    }
    latest
}

fn report(case: &str, cost: &ReclaimCost) {
    println!(
        "{case}: work lost per spot reclaim\n  eviction -> checkpoint saved on the notice   {:>7.1} s\n  eviction -> job Suspended                   {:>7.1} s\n  workers ready again -> first resumed step   {:>7.1} s\n  steps lost                                  {:>7} (stopped at step {}, resumed at step {})",
        cost.to_notice.as_secs_f64(),
        cost.to_suspended.as_secs_f64(),
        cost.ready_to_first_step.as_secs_f64(),
        cost.last_step.saturating_sub(cost.resumed_at),
        cost.last_step,
        cost.resumed_at,
    );
}

#[tokio::test]
#[ignore = "needs cluster with a pod network and the examples' image (see the module documentation)"]
async fn case2_a_reclaim_below_the_minimum_loses_no_step() {
    let cost = a_reclaim_below_the_minimum_checkpoints_suspends_and_resumes(
        "e2e-reclaim",
        "trainingjob.yaml",
        &["Suspend", "Reclaim"],
    )
    .await;
    report("case 2", &cost);
    assert_eq!(
        cost.last_step, cost.resumed_at,
        "no step lost beyond the one in flight"
    );
}

#[tokio::test]
#[ignore = "needs cluster with a pod network and the examples' image (see the module documentation)"]
async fn case4_the_kubeai_sdk_hears_the_stop_and_its_loop_checkpoints() {
    let cost = a_reclaim_below_the_minimum_checkpoints_suspends_and_resumes(
        "e2e-kubeai",
        "trainingjob-kubeai.yaml",
        &["kubeai"],
    )
    .await;
    report("case 4", &cost);
}

#[tokio::test]
#[ignore = "needs cluster with a pod network and the examples' image (see the module documentation)"]
async fn case5_horovods_world_size_follows_scale_out_and_scale_in() {
    let e2e = E2e::start("e2e-scaling").await;
    let job = e2e
        .apply_example("trainingjob.yaml", &[("TRAIN_STEPS", "900")])
        .await;
    let training = Training::follow(e2e.pods(), Kind::TrainingJob.launcher_selector(&job));
    let (seen, _) = training
        .wait("training at size 3", 0, START, |e| {
            e.name == "step" && e.field("size") == Some("3") && e.number("step") >= Some(50)
        })
        .await;
    // ScaleOut by one, as `arena scaleout etjob --count 1` renders it.
    e2e.request_scaling(
        "ScaleOut",
        "out",
        serde_json::json!({"selector": {"name": job}, "toAdd": {"count": 1}}),
    )
    .await;
    let (seen, grown) = training
        .wait("training at size 4", seen, Duration::from_secs(120), |e| {
            e.name == "step" && e.field("size") == Some("4")
        })
        .await;
    println!(
        "{job}: size 4 at step {}",
        grown.field("step").unwrap_or("?")
    );
    // ScaleIn of one named worker, as `arena scalein etjob --podNames` renders it.
    let removed = a_worker(&e2e, Kind::TrainingJob, &job, &[]).await;
    e2e.request_scaling(
        "ScaleIn",
        "in",
        serde_json::json!({"selector": {"name": job}, "toDelete": {"podNames": [removed]}}),
    )
    .await;
    let (_, shrunk) = training
        .wait(
            "training at size 3 again",
            seen,
            Duration::from_secs(120),
            |e| e.name == "step" && e.field("size") == Some("3"),
        )
        .await;
    println!(
        "{job}: size 3 at step {} without {removed}",
        shrunk.field("step").unwrap_or("?")
    );
    let gone = within(Duration::from_secs(120), async || {
        e2e.pods()
            .get_opt(&removed)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "{removed} is deleted after its drain");
    let status = e2e
        .wait_phase(Kind::TrainingJob, &job, JobPhase::Succeeded, FINISH)
        .await;
    assert_eq!(status.restart_count, 0, "{}", training.other_lines());
    e2e.end().await;
}

/// Case 6: the node under one of four workers stops without warning (its kubelet and
/// containerd go, its containers killed: `ETO_E2E_STOP_NODE`, a shell command run with the
/// node's name in `NODE`, for example `REAL_NODE_INDEX=1 harness/real-node-down.sh
/// --keep-node`). Kubernetes still shows the worker's pod `Running` on a node that no longer
/// reports. Horovod goes on with the three others; eto replaces the lost worker under a new
/// name and blacklists it, Horovod grows back to four, and the job succeeds with no restart.
/// Prints the seconds from the stop to Horovod's reset, to the first step of three and to
/// the first step of four again. Needs two real nodes: the launcher and three workers on the
/// first, a fourth (a scale-out) on the second; bring the second up again afterwards.
#[tokio::test]
#[ignore = "needs cluster with two real nodes (harness/real-kubelet=true); stops the second (ETO_E2E_STOP_NODE)"]
async fn case6_a_node_stopped_without_warning_under_a_worker_leaves_the_others_training() {
    let stop = std::env::var("ETO_E2E_STOP_NODE").expect("ETO_E2E_STOP_NODE stops a node");
    let e2e = E2e::start("e2e-node-stop").await;
    let client = e2e.scratch.client.clone();
    let (home, doomed, elsewhere) = crate::torchft_real::home_and_elsewhere(&client).await;
    let job = e2e
        .apply_example("trainingjob.yaml", &[("TRAIN_STEPS", "4000")])
        .await;
    let training = Training::follow(e2e.pods(), Kind::TrainingJob.launcher_selector(&job));
    let (seen, _) = training
        .wait("training at size 3", 0, START, |e| {
            e.name == "step" && e.field("size") == Some("3") && e.number("step") >= Some(30)
        })
        .await;
    // A fourth worker on the second node, everything else on the first.
    eto_tests::nodes::set_unschedulable(&client, std::slice::from_ref(&home), true).await;
    eto_tests::nodes::set_unschedulable(&client, &elsewhere, false).await;
    let before = a_worker(&e2e, Kind::TrainingJob, &job, &[]).await;
    e2e.request_scaling(
        "ScaleOut",
        "out",
        serde_json::json!({"selector": {"name": job}, "toAdd": {"count": 1}}),
    )
    .await;
    let (seen, _) = training
        .wait("training at size 4", seen, Duration::from_secs(180), |e| {
            e.name == "step" && e.field("size") == Some("4")
        })
        .await;
    eto_tests::nodes::set_unschedulable(&client, std::slice::from_ref(&home), false).await;
    let status = e2e.status(Kind::TrainingJob, &job).await.unwrap();
    let mut lost = None;
    for worker in &status.current_workers {
        let node = e2e
            .pods()
            .get(worker)
            .await
            .ok()
            .and_then(|p| p.spec?.node_name);
        if node.as_ref() == Some(&doomed) {
            lost = Some(worker.clone());
        }
    }
    let lost = lost.expect("a worker on the second node");
    assert_ne!(lost, before);
    let stopped = Instant::now();
    let stopped_at = jiff::Timestamp::now();
    crate::torchft_real::stop_node(&stop, &doomed);
    let stop_took = stopped.elapsed();
    let (seen, reset) = training
        .wait(
            "a reset after the loss",
            seen,
            Duration::from_secs(300),
            |e| e.name == "reset",
        )
        .await;
    let (seen, three) = training
        .wait(
            "a step of three after the loss",
            seen,
            Duration::from_secs(300),
            |e| e.name == "step" && e.field("size") == Some("3"),
        )
        .await;
    let replaced = until(
        "the lost worker blacklisted",
        Duration::from_secs(600),
        async || {
            let status = e2e.status(Kind::TrainingJob, &job).await?;
            status.blacklist.into_iter().find(|entry| entry.pod == lost)
        },
    )
    .await;
    let blacklisted = stopped.elapsed();
    let (_, four) = training
        .wait(
            "a step of four again",
            seen,
            Duration::from_secs(300),
            |e| e.name == "step" && e.field("size") == Some("4"),
        )
        .await;
    let after = |event: &Event| event.at.duration_since(stopped_at).as_secs_f64();
    println!(
        "{job}: {doomed} stopped in {stop_took:.1?} under {lost}; after the stop began: \
         Horovod reset to size {} {:.1} s, a step at size 3 {:.1} s (step {}), {lost} \
         blacklisted {} {blacklisted:.1?}, size 4 again {:.1} s (step {})",
        reset.field("size").unwrap_or("?"),
        after(&reset),
        after(&three),
        three.field("step").unwrap_or("?"),
        replaced.reason,
        after(&four),
        four.field("step").unwrap_or("?"),
    );
    let status = e2e
        .wait_phase(Kind::TrainingJob, &job, JobPhase::Succeeded, FINISH)
        .await;
    eto_tests::nodes::set_unschedulable(&client, &elsewhere, false).await;
    assert_eq!(
        status.restart_count,
        0,
        "no restart:\n{}",
        training.other_lines()
    );
    e2e.end().await;
}
