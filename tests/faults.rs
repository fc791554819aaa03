//! eto under faults: storms of API errors and slow answers, dropped watches, API server
//! restarts (`410 Gone` on resume), and the operator crashing before any write of a job's life.
//! Every scenario checks the outcome, not only that eto survives: the job ends as it would
//! have without faults, no worker index is used twice, no loss is replaced twice, no pod is
//! left without its job, and `restartCount` only counts real launcher failures.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use eto_api::TrainingJob;
use eto_api::training_job::JobPhase;
use eto_sim::{Fault, FaultAction};
use eto_tests::env::{Env, hostfile, in_phase, job_yaml, sim_config};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};

/// How long one job's life may take under faults before the test fails.
const LIFE_LIMIT: Duration = Duration::from_secs(90);

/// How often a driven life looks at the cluster.
const POLL: Duration = Duration::from_millis(20);

/// Where a job's scripted life is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting until its three workers are in host discovery; then worker 1 fails.
    Starting,
    /// Waiting until worker 1's replacement, worker 3, took its place; then the launcher
    /// succeeds.
    Replacing,
    /// Waiting until the job succeeded and its workers stopped.
    Finishing,
    /// Done.
    Done,
}

/// A job's scripted life: three workers (at least two), failed workers replaced; worker 1
/// fails once training runs, and the launcher succeeds once the replacement is in host
/// discovery. Every read tolerates a failed request (the API server may be restarting or
/// failing on purpose): it counts as "not yet".
struct Life {
    name: String,
    stage: Stage,
}

impl Life {
    async fn start(env: &Env, name: &str) -> Self {
        env.apply_job(&job_yaml(name, 3, 2, "", "OnFailure")).await;
        Self {
            name: name.into(),
            stage: Stage::Starting,
        }
    }

    async fn launcher_hostfile(&self, env: &Env) -> Option<String> {
        let launcher = env
            .pods()
            .get_opt(&format!("{}-launcher", self.name))
            .await
            .ok()??;
        launcher
            .metadata
            .annotations?
            .get(eto_api::well_known::HOSTFILE_ANNOTATION)
            .cloned()
    }

    async fn job(&self, env: &Env) -> Option<TrainingJob> {
        env.jobs().get_opt(&self.name).await.ok()?
    }

    /// Takes the next step if its time has come; returns whether the life is over.
    async fn advance(&mut self, env: &Env) -> bool {
        let name = self.name.clone();
        match self.stage {
            Stage::Starting => {
                let running = self
                    .job(env)
                    .await
                    .is_some_and(|job| in_phase(JobPhase::Running)(&job));
                if running && self.launcher_hostfile(env).await == Some(hostfile(&name, &[0, 1, 2]))
                {
                    env.cluster
                        .fail_pod("default", &format!("{name}-worker-1"), 1, "Error")
                        .unwrap();
                    self.stage = Stage::Replacing;
                }
            }
            Stage::Replacing => {
                if self.launcher_hostfile(env).await == Some(hostfile(&name, &[0, 2, 3])) {
                    env.cluster
                        .succeed_pod("default", &format!("{name}-launcher"))
                        .unwrap();
                    self.stage = Stage::Finishing;
                }
            }
            Stage::Finishing => {
                let succeeded = self
                    .job(env)
                    .await
                    .is_some_and(|job| in_phase(JobPhase::Succeeded)(&job));
                let workers = env
                    .pods()
                    .list(&ListParams::default().labels(&format!(
                        "training-job-name={name},training-job-role=worker"
                    )))
                    .await
                    .ok();
                let stopped = workers.is_some_and(|workers| {
                    workers.items.iter().all(|pod| {
                        pod.metadata.deletion_timestamp.is_some()
                            || eto_engine::pods::is_finished(pod)
                    })
                });
                if succeeded && stopped {
                    self.stage = Stage::Done;
                }
            }
            Stage::Done => {}
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

/// Checks what a finished life left: it succeeded without a restart, worker 1 is its one
/// loss, and its pods are exactly the four workers (one replacement for one loss, no index
/// twice) and the launcher, each controlled by the job.
async fn assert_life_was_clean(env: &Env, name: &str, record: &PodRecord, what: &str) {
    let job = env.jobs().get(name).await.unwrap();
    let status = job.status.unwrap();
    assert_eq!(status.phase, Some(JobPhase::Succeeded), "{what}");
    assert_eq!(status.restart_count, 0, "no launcher failed: {what}");
    let lost: Vec<&str> = status.blacklist.iter().map(|b| b.pod.as_str()).collect();
    assert_eq!(lost, [format!("{name}-worker-1")], "{what}");
    let expected: BTreeMap<String, bool> =
        ["worker-0", "worker-1", "worker-2", "worker-3", "launcher"]
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
                "{} stuck at {:?}; hostfile {hostfile:?}; pods {pods:#?}; metrics {metrics:#?}; job phase {:?}",
                life.name,
                life.stage,
                job.and_then(|job| job.status?.phase)
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A storm: 500s on writes (not retried by the client: the reconcile fails and is retried
/// after a growing wait, see eto_controller::retries),
/// 503s and 429s with `Retry-After: 1` on any request (retried by the client), and answers
/// two seconds late.
fn storm(env: &Env) {
    env.cluster.inject(Fault {
        writes_only: true,
        ..Fault::every(FaultAction::Fail(500), 4)
    });
    env.cluster.inject(Fault::every(FaultAction::Fail(503), 12));
    env.cluster.inject(Fault::every(FaultAction::Fail(429), 12));
    env.cluster
        .inject(Fault::every(FaultAction::Delay(Duration::from_secs(2)), 6));
}

#[tokio::test]
async fn a_job_lives_its_life_through_error_storms_slow_answers_and_dropped_watches() {
    let mut env = Env::start(sim_config(2, 8)).await;
    let record = PodRecord::start(&env, "stormy").await;
    let mut life = Life::start(&env, "stormy").await;
    let mut stage = None;
    drive(&mut env, &mut life, async |env: &mut Env| {
        // Every change of the job's phase or pod count starts a storm and drops every watch.
        let now = Some(life_stage_of(env, "stormy").await);
        if now != stage {
            stage = now;
            storm(env);
            env.cluster.drop_watches();
        }
    })
    .await;
    env.cluster.clear_faults();
    let acted = env.cluster.faults_acted();
    assert!(acted >= 40, "the storms hit {acted} requests");
    assert_life_was_clean(&env, "stormy", &record, "through storms").await;
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
    let mut life = Life::start(&env, "restarted").await;
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
    assert_life_was_clean(&env, "restarted", &record, "through restarts").await;
}

#[tokio::test]
async fn a_settled_job_gets_no_write_after_dropped_watches_or_api_server_restarts() {
    let env = Env::start(sim_config(2, 8)).await;
    env.apply_job(&job_yaml("settled", 3, 2, "", "OnFailure"))
        .await;
    env.wait_job("settled", "runs", in_phase(JobPhase::Running))
        .await;
    // The reconcile that made it Running records its event last.
    let running = eto_engine::kind::Kind::TrainingJob.reason("Running");
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
    acted_before: u64,
    crashed: bool,
}

impl CrashAt {
    fn arm(env: &Env, n: u32) -> Self {
        let acted_before = env.cluster.faults_acted();
        env.cluster.inject(Fault {
            writes_only: true,
            skip: n - 1,
            ..Fault::every(FaultAction::Fail(500), u32::MAX)
        });
        Self {
            acted_before,
            crashed: false,
        }
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
}

#[tokio::test]
async fn an_operator_crashing_before_any_write_of_a_life_loses_and_duplicates_nothing() {
    let mut env = Env::start(sim_config(2, 8)).await;
    // How many writes a life takes without faults: every one of them is a crash point.
    let record = PodRecord::start(&env, "measure").await;
    let mut life = Life::start(&env, "measure").await;
    let before = env.cluster.writes_received();
    drive(&mut env, &mut life, async |_: &mut Env| {}).await;
    let writes = u32::try_from(env.cluster.writes_received() - before).unwrap();
    assert_life_was_clean(&env, "measure", &record, "without faults").await;
    assert!(writes >= 10, "a life takes {writes} writes");

    let mut crashes = 0;
    for n in 1..=writes {
        let name = format!("crash-{n}");
        let record = PodRecord::start(&env, &name).await;
        let mut life = Life::start(&env, &name).await;
        let mut crash = CrashAt::arm(&env, n);
        drive(&mut env, &mut life, async |env: &mut Env| {
            crash.check(env).await
        })
        .await;
        env.cluster.clear_faults();
        crashes += u32::from(crash.crashed);
        let what = format!("crash before write {n} of {writes}");
        assert_life_was_clean(&env, &name, &record, &what).await;
    }
    assert!(
        crashes * 10 >= writes * 9,
        "the operator crashed at {crashes} of {writes} points"
    );
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
    for round in 0..3 {
        let name = format!("twice-{round}");
        let record = PodRecord::start(&env, &name).await;
        let mut life = Life::start(&env, &name).await;
        drive(&mut env, &mut life, async |_: &mut Env| {}).await;
        assert_life_was_clean(&env, &name, &record, "with two operators").await;
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
