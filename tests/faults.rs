//! eto under faults: storms of API errors and slow answers, dropped watches, API server
//! restarts (`410 Gone` on resume), and the operator crashing before any write of a job's life.
//! Every scenario checks the outcome, not only that eto survives: the job ends as it would
//! have without faults, no worker index is used twice, no loss is replaced twice, no pod is
//! left without its job, and `restartCount` only counts real launcher failures.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eto_api::job_status::JobPhase;
use eto_sim::{Fault, FaultAction};
use eto_tests::env::{Env, JobYaml, hostfile, hostfile_shown, in_phase, job_yaml, sim_config};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};

/// How long one job's life may take under faults before the test fails: a job that failed
/// ten times in a row waits 30 s between tries (see eto_controller::retries).
const LIFE_LIMIT: Duration = Duration::from_secs(180);

/// How often a driven life looks at the cluster.
const POLL: Duration = Duration::from_millis(20);

/// Where a job's scripted life is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting until its first workers are in host discovery.
    Starting,
    /// Waiting until worker 1's replacement, worker 3, took its place.
    Replacing,
    /// Waiting until the worker added by raising `replicas` is in host discovery.
    Growing,
    /// Waiting until the job is suspended and its pods are gone.
    Suspending,
    /// Waiting until the resumed run's workers are in host discovery.
    Resuming,
    /// Waiting until the job succeeded and its workers stopped.
    Finishing,
    /// Done.
    Done,
}

/// What happens in a life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    /// Three workers (at least two), failed ones replaced: worker 1 fails once training runs,
    /// and the launcher succeeds once worker 3 replaced it in host discovery.
    Replacement,
    /// Two workers (two to four): `replicas` is raised to three, then the job is suspended
    /// (`spec.suspend`, no checkpoint grace), resumed with three new workers, and its launcher
    /// succeeds.
    Elastic,
}

impl Script {
    fn yaml(self, name: &str) -> String {
        match self {
            Self::Replacement => job_yaml(name, 3, 2, "", "OnFailure"),
            Self::Elastic => JobYaml {
                name,
                replicas: 2,
                min: 2,
                max: Some(4),
                extra_spec: "\n  elasticPolicy:\n    checkpointGraceSeconds: 0",
                worker_policy: "Never",
            }
            .render(),
        }
    }

    /// The pods of the life (by suffix after `<job>-`) and the workers it loses.
    fn outcome(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Self::Replacement => (
                &["launcher", "worker-0", "worker-1", "worker-2", "worker-3"],
                &["worker-1"],
            ),
            Self::Elastic => (
                &[
                    "launcher", "worker-0", "worker-1", "worker-2", "worker-3", "worker-4",
                    "worker-5",
                ],
                &[],
            ),
        }
    }
}

/// A job's scripted life (see [`Script`]). Every read tolerates a failed request (the API
/// server may be restarting or failing on purpose): it counts as "not yet". The life's own
/// writes (the spec changes of [`Script::Elastic`]) go around a [`CrashAt`], so that they
/// are never the write it refuses.
struct Life {
    name: String,
    script: Script,
    stage: Stage,
    crash: Option<CrashAt>,
}

impl Life {
    async fn start(env: &Env, name: &str, script: Script) -> Self {
        env.apply_job(&script.yaml(name)).await;
        Self {
            name: name.into(),
            script,
            stage: Stage::Starting,
            crash: None,
        }
    }

    async fn launcher_hostfile(&self, env: &Env) -> Option<String> {
        let launcher = env
            .pods()
            .get_opt(&format!("{}-launcher", self.name))
            .await
            .ok()??;
        hostfile_shown(&launcher).map(String::from)
    }

    async fn in_phase(&self, env: &Env, phase: JobPhase) -> bool {
        env.jobs()
            .get_opt(&self.name)
            .await
            .ok()
            .flatten()
            .is_some_and(|job| in_phase(phase)(&job))
    }

    /// Whether the job is in `phase` with the workers `indices` in host discovery.
    async fn shows(&self, env: &Env, phase: JobPhase, indices: &[u32]) -> bool {
        self.in_phase(env, phase).await
            && self.launcher_hostfile(env).await == Some(hostfile(&self.name, indices))
    }

    /// Whether no worker of the job runs (any left are finished or being deleted).
    async fn workers_stopped(&self, env: &Env) -> bool {
        let workers = env
            .pods()
            .list(&ListParams::default().labels(&format!(
                "training-job-name={},training-job-role=worker",
                self.name
            )))
            .await
            .ok();
        workers.is_some_and(|workers| {
            workers.items.iter().all(|pod| {
                pod.metadata.deletion_timestamp.is_some() || eto_engine::pods::is_finished(pod)
            })
        })
    }

    /// Merge-patches the job's spec, as a user would.
    async fn change_spec(&mut self, env: &mut Env, spec: serde_json::Value) {
        if let Some(crash) = &mut self.crash {
            crash.before_test_write(env).await;
        }
        let patch = Patch::Merge(serde_json::json!({ "spec": spec }));
        let written = env
            .jobs()
            .patch(&self.name, &PatchParams::default(), &patch)
            .await;
        if let Some(crash) = &mut self.crash {
            crash.after_test_write(env);
        }
        written.unwrap();
    }

    /// Takes the next step if its time has come; returns whether the life is over.
    async fn advance(&mut self, env: &mut Env) -> bool {
        if let Some(crash) = &mut self.crash {
            crash.check(env).await;
        }
        let name = self.name.clone();
        let running = JobPhase::Running;
        match (self.script, self.stage) {
            (Script::Replacement, Stage::Starting) => {
                if self.shows(env, running, &[0, 1, 2]).await {
                    env.cluster
                        .fail_pod("default", &format!("{name}-worker-1"), 1, "Error")
                        .unwrap();
                    self.stage = Stage::Replacing;
                }
            }
            (Script::Replacement, Stage::Replacing) => {
                if self.launcher_hostfile(env).await == Some(hostfile(&name, &[0, 2, 3])) {
                    env.cluster
                        .succeed_pod("default", &format!("{name}-launcher"))
                        .unwrap();
                    self.stage = Stage::Finishing;
                }
            }
            (Script::Elastic, Stage::Starting) => {
                if self.shows(env, running, &[0, 1]).await {
                    let spec = serde_json::json!({"etReplicaSpecs": {"worker": {"replicas": 3}}});
                    self.change_spec(env, spec).await;
                    self.stage = Stage::Growing;
                }
            }
            (Script::Elastic, Stage::Growing) => {
                if self.shows(env, running, &[0, 1, 2]).await {
                    self.change_spec(env, serde_json::json!({"suspend": true}))
                        .await;
                    self.stage = Stage::Suspending;
                }
            }
            (Script::Elastic, Stage::Suspending) => {
                let gone = env
                    .pods()
                    .get_opt(&format!("{name}-launcher"))
                    .await
                    .is_ok_and(|launcher| launcher.is_none());
                if self.in_phase(env, JobPhase::Suspended).await
                    && gone
                    && self.workers_stopped(env).await
                {
                    self.change_spec(env, serde_json::json!({"suspend": false}))
                        .await;
                    self.stage = Stage::Resuming;
                }
            }
            (Script::Elastic, Stage::Resuming) => {
                if self.shows(env, running, &[3, 4, 5]).await {
                    env.cluster
                        .succeed_pod("default", &format!("{name}-launcher"))
                        .unwrap();
                    self.stage = Stage::Finishing;
                }
            }
            (_, Stage::Finishing) => {
                if self.in_phase(env, JobPhase::Succeeded).await && self.workers_stopped(env).await
                {
                    self.stage = Stage::Done;
                }
            }
            (_, stage) => assert_eq!(stage, Stage::Done, "{name}: no such stage"),
        }
        self.stage == Stage::Done
    }
}

/// Every pod of one job the API server ever showed, and whether its job controlled it.
struct PodRecord {
    seen: Arc<Mutex<BTreeMap<String, bool>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodRecord {
    /// Starts recording the pods of job `name`; returns once the first list is in. The
    /// watch survives dropped watches and API server restarts.
    async fn start(env: &Env, name: &str) -> Self {
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let recorded = Arc::clone(&seen);
        let job = name.to_string();
        let config = watcher::Config::default().labels(&format!("training-job-name={name}"));
        let mut stream = watcher(env.pods(), config).default_backoff().boxed();
        while !matches!(stream.next().await, Some(Ok(watcher::Event::InitDone))) {}
        let task = tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                let (Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))
                | Ok(watcher::Event::Delete(pod))) = event
                else {
                    continue;
                };
                let controlled = controlled_by_job(&pod, &job);
                recorded
                    .lock()
                    .unwrap()
                    .insert(pod.metadata.name.clone().unwrap_or_default(), controlled);
            }
        });
        Self { seen, task }
    }

    fn seen(&self) -> BTreeMap<String, bool> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for PodRecord {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn controlled_by_job(pod: &Pod, job: &str) -> bool {
    pod.metadata.owner_references.iter().flatten().any(|owner| {
        owner.controller == Some(true) && owner.kind == "TrainingJob" && owner.name == job
    })
}

/// Checks what a finished life left: it succeeded without a restart, lost exactly the
/// workers its script loses, and its pods are exactly the script's (one replacement for one
/// loss, no index twice), each controlled by the job.
async fn assert_life_was_clean(env: &Env, life: &Life, record: &PodRecord, what: &str) {
    let name = &life.name;
    let (pods, lost) = life.script.outcome();
    let job = env.jobs().get(name).await.unwrap();
    let status = job.status.unwrap();
    assert_eq!(status.phase, Some(JobPhase::Succeeded), "{what}");
    assert_eq!(status.restart_count, 0, "no launcher failed: {what}");
    let blacklisted: Vec<&str> = status.blacklist.iter().map(|b| b.pod.as_str()).collect();
    let lost: Vec<String> = lost.iter().map(|pod| format!("{name}-{pod}")).collect();
    assert_eq!(blacklisted, lost, "{what}");
    let expected: BTreeMap<String, bool> = pods
        .iter()
        .map(|pod| (format!("{name}-{pod}"), true))
        .collect();
    assert_eq!(record.seen(), expected, "pods and their owners: {what}");
}

/// The sum of the samples of `family` in the operator's metrics.
fn metric_sum(env: &Env, family: &str) -> f64 {
    let exposed = env.operator.as_ref().unwrap().metrics.encode();
    exposed
        .lines()
        .filter(|line| {
            line.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Drives `life` to its end, calling `between` between looks.
async fn drive(env: &mut Env, life: &mut Life, mut between: impl AsyncFnMut(&mut Env)) {
    let started = Instant::now();
    while !life.advance(env).await {
        between(env).await;
        if started.elapsed() > LIFE_LIMIT {
            env.cluster.clear_faults();
            let job = env.jobs().get(&life.name).await.ok();
            let pods: Vec<String> = env
                .pods()
                .list(&ListParams::default().labels(&format!("training-job-name={}", life.name)))
                .await
                .map(|pods| {
                    pods.items
                        .iter()
                        .map(|pod| {
                            format!(
                                "{} {} ready={} deleting={}",
                                pod.metadata.name.as_deref().unwrap_or_default(),
                                eto_engine::pods::phase(pod),
                                eto_engine::pods::is_ready(pod),
                                pod.metadata.deletion_timestamp.is_some()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let hostfile = life.launcher_hostfile(env).await;
            let metrics: Vec<String> = env
                .operator
                .as_ref()
                .map(|operator| operator.metrics.encode())
                .unwrap_or_default()
                .lines()
                .filter(|line| line.starts_with("eto_reconcil") || line.starts_with("eto_api"))
                .map(str::to_string)
                .collect();
            panic!(
                "{} stuck at {:?}; hostfile {hostfile:?}; pods {pods:#?}; metrics {metrics:#?}; job (suspend, status) {:#?}",
                life.name,
                life.stage,
                job.map(|job| (job.spec.suspend, job.status))
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Drives `life` to its end with nothing else happening.
async fn live(env: &mut Env, life: &mut Life) {
    drive(env, life, async |_: &mut Env| {}).await;
}

/// A storm: 500s on writes and on any request (not retried by the client: a reconcile fails
/// and is retried after a growing wait, see eto_controller::retries; a watch or list is
/// retried with the watcher's backoff),
/// 503s and 429s with `Retry-After: 1` on any request (retried by the client), and answers
/// two seconds late.
fn storm(env: &Env) {
    env.cluster.inject(Fault {
        writes_only: true,
        ..Fault::every(FaultAction::Fail(500), 4)
    });
    env.cluster.inject(Fault::every(FaultAction::Fail(500), 8));
    env.cluster.inject(Fault::every(FaultAction::Fail(503), 12));
    env.cluster.inject(Fault::every(FaultAction::Fail(429), 12));
    env.cluster
        .inject(Fault::every(FaultAction::Delay(Duration::from_secs(2)), 6));
}

#[tokio::test]
async fn a_job_lives_its_life_through_error_storms_slow_answers_and_dropped_watches() {
    let mut env = Env::start(sim_config(2, 8)).await;
    let record = PodRecord::start(&env, "stormy").await;
    let mut life = Life::start(&env, "stormy", Script::Replacement).await;
    let mut stage = None;
    let mut storms = 0;
    drive(&mut env, &mut life, async |env: &mut Env| {
        // A change of the job's phase or pod count starts a storm and drops every watch, up to
        // five times.
        let now = Some(life_stage_of(env, "stormy").await);
        if now != stage && storms < 5 {
            stage = now;
            storms += 1;
            storm(env);
            env.cluster.drop_watches();
        }
    })
    .await;
    env.cluster.clear_faults();
    let acted = env.cluster.faults_acted();
    assert!(acted >= 40, "the storms hit {acted} requests");
    assert_life_was_clean(&env, &life, &record, "through storms").await;
}

/// A coarse stage of job `name` as the cluster shows it, for storms to follow.
async fn life_stage_of(env: &Env, name: &str) -> (Option<JobPhase>, usize) {
    let phase = env
        .jobs()
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|job| job.status?.phase);
    let pods = env
        .pods()
        .list(&ListParams::default().labels(&format!("training-job-name={name}")))
        .await
        .map_or(0, |pods| pods.items.len());
    (phase, pods)
}

#[tokio::test]
async fn an_api_server_restart_in_the_middle_of_a_life_loses_nothing() {
    let mut env = Env::start(sim_config(2, 8)).await;
    let record = PodRecord::start(&env, "restarted").await;
    let mut life = Life::start(&env, "restarted", Script::Replacement).await;
    let mut restarts = 0;
    drive(&mut env, &mut life, async |env: &mut Env| {
        // Once in each of the three stages that have one: the history is lost, and every
        // watch that resumes gets 410 Gone and lists again.
        let stage = life_stage_of(env, "restarted").await;
        if restarts < 3 && stage.1 > restarts * 2 {
            env.cluster
                .restart(Duration::from_millis(200))
                .await
                .unwrap();
            restarts += 1;
        }
    })
    .await;
    assert!(restarts >= 2, "the API server restarted during the life");
    assert_life_was_clean(&env, &life, &record, "through restarts").await;
}

#[tokio::test]
async fn a_settled_job_gets_no_write_after_dropped_watches_or_api_server_restarts() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml("settled", 3, 2, "", "OnFailure"))
        .await;
    env.wait_job("settled", "runs", in_phase(JobPhase::Running))
        .await;
    // The reconcile that made it Running records its event last.
    let running = eto_engine::job::Kind::TRAINING_JOB.reason("Running");
    let events = tokio::time::timeout(eto_tests::env::WAIT, async {
        while !env.event_reasons("settled").await.contains(&running) {
            tokio::time::sleep(POLL).await;
        }
    });
    events.await.expect("the Running event is recorded");
    let settled = env.jobs().get("settled").await.unwrap();
    let writes = env.cluster.writes_received();
    for round in 0..3 {
        let reconciled = metric_sum(&env, "eto_reconciliations_total");
        if round == 1 {
            // Resumed watches get 410 Gone: every cache lists again, every job is reconciled.
            env.cluster
                .restart(Duration::from_millis(200))
                .await
                .unwrap();
        } else {
            env.cluster.drop_watches();
            // A change eto sees (and must not act on), to know its job watch is back.
            env.jobs()
                .patch(
                    "settled",
                    &PatchParams::default(),
                    &Patch::Merge(
                        serde_json::json!({"metadata": {"annotations": {"touched": round.to_string()}}}),
                    ),
                )
                .await
                .unwrap();
        }
        let again = tokio::time::timeout(eto_tests::env::WAIT, async {
            while metric_sum(&env, "eto_reconciliations_total") <= reconciled {
                tokio::time::sleep(POLL).await;
            }
        });
        again
            .await
            .unwrap_or_else(|_| panic!("no reconcile after round {round}"));
    }
    let test_writes = 2;
    assert_eq!(
        env.cluster.writes_received(),
        writes + test_writes,
        "eto wrote nothing that was already right"
    );
    let after = env.jobs().get("settled").await.unwrap();
    assert_eq!(after.status, settled.status);
}

/// Fails every write from the `n`th on, until the operator is killed: the cluster then holds
/// exactly what the operator wrote before that write, as after a crash between two writes.
struct CrashAt {
    /// The number, among the writes the API server received, of the write to refuse.
    target: u64,
    acted_before: u64,
    crashed: bool,
}

impl CrashAt {
    fn arm(env: &Env, n: u32) -> Self {
        let crash = Self {
            target: env.cluster.writes_received() + u64::from(n),
            acted_before: env.cluster.faults_acted(),
            crashed: false,
        };
        crash.inject(env);
        crash
    }

    fn inject(&self, env: &Env) {
        let skip = self
            .target
            .saturating_sub(env.cluster.writes_received() + 1);
        env.cluster.inject(Fault {
            writes_only: true,
            skip: u32::try_from(skip).unwrap_or(u32::MAX),
            ..Fault::every(FaultAction::Fail(500), u32::MAX)
        });
    }

    /// Kills and restarts the operator once its `n`th write was refused.
    async fn check(&mut self, env: &mut Env) {
        if !self.crashed && env.cluster.faults_acted() > self.acted_before {
            env.kill_operator().await;
            env.cluster.clear_faults();
            env.start_operator();
            self.crashed = true;
        }
    }

    /// Lets a write of the test's own through: it is not one of the operator's writes to
    /// count. A crash that is due happens first.
    async fn before_test_write(&mut self, env: &mut Env) {
        self.check(env).await;
        if !self.crashed {
            env.cluster.clear_faults();
        }
    }

    /// Arms the crash again after a write of the test's own. Writes of the operator's that
    /// came while the crash was not armed move the point to the next write.
    fn after_test_write(&mut self, env: &Env) {
        if !self.crashed {
            self.target += 1;
            self.inject(env);
            self.target = self.target.max(env.cluster.writes_received() + 1);
        }
    }

    /// Ends the crash at the end of a life: disarms it, crashes the operator if its write was
    /// refused after the last check (the operator goes on writing as a life ends), and
    /// returns whether the life surely reached the write before it was disarmed.
    async fn finish(&mut self, env: &mut Env) -> bool {
        let writes = env.cluster.writes_received();
        env.cluster.clear_faults();
        self.check(env).await;
        // A write counted before the faults were cleared has met the crash (eto-sim counts
        // writes and applies faults in one step).
        writes >= self.target
    }
}

#[tokio::test]
async fn an_operator_crashing_before_any_write_of_a_life_loses_and_duplicates_nothing() {
    let mut env = Env::start(sim_config(2, 8)).await;
    for script in [Script::Replacement, Script::Elastic] {
        // How many writes a life takes without faults: every one of them is a crash point.
        let name = format!("{script:?}").to_lowercase();
        let record = PodRecord::start(&env, &name).await;
        let mut life = Life::start(&env, &name, script).await;
        let before = env.cluster.writes_received();
        live(&mut env, &mut life).await;
        let writes = u32::try_from(env.cluster.writes_received() - before).unwrap();
        assert_life_was_clean(&env, &life, &record, "without faults").await;
        assert!(writes >= 10, "a life takes {writes} writes");

        // A life takes a few writes more or less from run to run (a status written once or
        // twice as pods become ready together or one by one): the last points may lie past
        // the end of a shorter life. Every point a life reaches is a crash.
        let mut crashes = 0;
        for n in 1..=writes {
            let name = format!("{name}-{n}");
            let record = PodRecord::start(&env, &name).await;
            let mut life = Life::start(&env, &name, script).await;
            life.crash = Some(CrashAt::arm(&env, n));
            live(&mut env, &mut life).await;
            let what = format!("{script:?}: crash before write {n} of {writes}");
            let crash = life.crash.as_mut().expect("the crash was armed");
            let reached = crash.finish(&mut env).await;
            assert!(
                crash.crashed || !reached,
                "{what}: the life made that write, and the operator did not crash"
            );
            crashes += u32::from(crash.crashed);
            assert_life_was_clean(&env, &life, &record, &what).await;
        }
        assert!(
            crashes * 4 >= writes * 3,
            "{script:?}: the operator crashed at only {crashes} of {writes} points"
        );
    }
}

/// A second operator on the same cluster, started by mistake (no leader election).
struct SecondOperator {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl SecondOperator {
    fn start(env: &Env) -> Self {
        let stop = tokio_util::sync::CancellationToken::new();
        let run = eto_controller::run(
            env.client.clone(),
            eto_controller::Settings {
                instance: Some("second".into()),
                ..eto_controller::Settings::default()
            },
            Arc::new(eto_controller::Metrics::default()),
            Arc::new(jiff::Timestamp::now),
            stop.clone().cancelled_owned(),
        );
        let task = tokio::spawn(async move {
            run.await.unwrap();
        });
        Self { stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

#[tokio::test]
async fn two_operators_by_mistake_live_the_same_lives() {
    let mut env = Env::start(sim_config(2, 8)).await;
    let second = SecondOperator::start(&env);
    for (round, script) in [Script::Replacement, Script::Elastic, Script::Replacement]
        .into_iter()
        .enumerate()
    {
        let name = format!("twice-{round}");
        let record = PodRecord::start(&env, &name).await;
        let mut life = Life::start(&env, &name, script).await;
        live(&mut env, &mut life).await;
        assert_life_was_clean(&env, &life, &record, "with two operators").await;
    }
    second.stop().await;
}

#[tokio::test]
async fn a_request_answered_429_is_retried_after_the_wait_the_server_asks_for() {
    // The operator's client is built as this one is (kube's default stack, whose retry
    // policy honours Retry-After); eto-sim answers 429 with `Retry-After: 1`.
    let env = Env::start(sim_config(1, 1)).await;
    env.apply_job(&job_yaml("patient", 1, 1, "", "Never")).await;
    // Only this test reads the job with GET: the operator watches it.
    env.cluster.inject(Fault {
        method: Some("GET".into()),
        path_contains: Some("/trainingjobs/patient".into()),
        ..Fault::every(FaultAction::Fail(429), 2)
    });
    let asked = Instant::now();
    let job = env.jobs().get("patient").await;
    let waited = asked.elapsed();
    assert!(job.is_ok(), "the third try succeeds: {job:?}");
    assert!(
        waited >= Duration::from_secs(2),
        "two answers of Retry-After: 1 were honoured, yet it took {waited:?}"
    );
}
