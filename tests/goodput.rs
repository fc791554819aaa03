//! The goodput ledger of a job whose training reports its steps without a coordinator: eto's
//! Python helper, `progress(step)`, serves them in the training's pod, and eto reads them
//! through the API server's pod proxy (eto-sim forwards the pods' port to the helper running
//! on this machine).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use eto_api::job_status::{GoodputBucket, ProgressSource};
use eto_tests::env::{Env, in_phase, sim_config};
use eto_tests::workspace_root;

/// A TrainingJob of two workers whose container declares the port its helper serves on.
const JOB: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata:
  name: reported
spec:
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: horovod/horovod:0.28.1
            command: ["horovodrun", "python", "train.py"]
    worker:
      replicas: 2
      minReplicas: 1
      maxReplicas: 2
      template:
        spec:
          containers:
          - name: worker
            image: horovod/horovod:0.28.1
            ports:
            - name: eto-progress
              containerPort: 29411
"#;

/// Training that reports steps `first..=last`, one every `every` seconds, through the helper
/// serving on `port`, then stands still, serving its last report; returns the training and a
/// file that exists once the last step is reported.
fn training(port: u16, first: u32, last: u32, every: f64) -> (KilledOnDrop, std::path::PathBuf) {
    let done = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("goodput-training-{port}-done"));
    let _ = std::fs::remove_file(&done);
    let script = r#"
import sys, time
sys.path.insert(0, sys.argv[1])
import eto_notice
for step in range(int(sys.argv[2]), int(sys.argv[3]) + 1):
    eto_notice.progress(step, total=5000)
    time.sleep(float(sys.argv[5]))
open(sys.argv[4], "w").close()
while True:
    time.sleep(1)
"#;
    let child = Command::new("python3")
        .args(["-c", script])
        .arg(workspace_root().join("python"))
        .args([first.to_string(), last.to_string()])
        .arg(&done)
        .arg(every.to_string())
        .env("ETO_PROGRESS_PORT", port.to_string())
        .env("HOROVOD_RANK", "1")
        .env_remove("ETO_PROGRESS_URL")
        .env_remove("ETO_SAVED_URL")
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs");
    (KilledOnDrop(child), done)
}

struct KilledOnDrop(Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn steps_a_training_pod_serves_reach_the_jobs_ledger() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_training, _) = training(port, 1, 2400, 0.05);
    let env = Env::start(sim_config(1, 8)).await;
    env.cluster
        .forward_every_pod_port(29411, ([127, 0, 0, 1], port).into());
    env.apply_job(JOB).await;
    let job = env
        .wait_job("reported", "trains on the steps its pods serve", |job| {
            job.status
                .as_ref()
                .and_then(|status| status.goodput.as_ref())
                .is_some_and(|ledger| {
                    ledger.source == ProgressSource::TrainingReports
                        && ledger.current == Some(GoodputBucket::Productive)
                })
        })
        .await;
    let ledger = job.status.unwrap().goodput.unwrap();
    let latest = ledger.latest.clone().expect("the step recorded");
    assert_eq!(latest.first_step, 1, "one stretch from the first step");
    assert_eq!(latest.total, Some(5000));
    assert!(ledger.highest_step >= Some(latest.step));
    assert!(ledger.seconds.productive > 0.0, "{ledger:#?}");
}

/// A port of this machine that leads to a training's helper, which the test can switch to
/// another, counting the connections made through it, and telling when the last one ended.
#[derive(Clone)]
struct Relay {
    to: Arc<Mutex<SocketAddr>>,
    connections: Arc<AtomicU64>,
    last_ended: Arc<Mutex<Option<jiff::Timestamp>>>,
}

impl Relay {
    /// Listens on a free port; returns the relay and its address.
    async fn start(to: SocketAddr) -> (Self, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let relay = Relay {
            to: Arc::new(Mutex::new(to)),
            connections: Arc::default(),
            last_ended: Arc::default(),
        };
        let shared = relay.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let to = *shared.to.lock().unwrap();
                let last_ended = Arc::clone(&shared.last_ended);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                    *last_ended.lock().unwrap() = Some(jiff::Timestamp::now());
                });
            }
        });
        (relay, address)
    }

    fn switch(&self, to: SocketAddr) {
        *self.to.lock().unwrap() = to;
    }

    fn connections(&self) -> u64 {
        self.connections.load(Ordering::SeqCst)
    }

    /// When the last connection ended: a read eto made was answered (or given up).
    fn last_ended(&self) -> Option<jiff::Timestamp> {
        *self.last_ended.lock().unwrap()
    }
}

/// The training reports a step every 0.2 s; eto records the first it reads, reads on every
/// few seconds without writing, and then both Workers are force-deleted as the training dies:
/// nothing is left to tell the steps since the record. The steps up to eto's last read still
/// count as trained, and the ledger records that read.
#[tokio::test]
async fn steps_read_before_every_pod_that_served_them_went_count_as_trained() {
    let port = eto_tests::free_port();
    let (training, _) = training(port, 1, 100_000, 0.2);
    let (relay, relayed) = Relay::start(([127, 0, 0, 1], port).into()).await;
    let env = Env::start(sim_config(1, 8)).await;
    env.cluster.forward_every_pod_port(29411, relayed);
    env.apply_job(JOB).await;
    let latest = |job: &eto_api::TrainingJob| {
        job.status
            .as_ref()
            .and_then(|s| s.goodput.as_ref())
            .and_then(|l| l.latest.clone())
    };
    // Steady: both Workers in the training, a step recorded, nothing about to change.
    let first = env
        .wait_job(
            "reported",
            "trains with both workers on recorded steps",
            |job| {
                let status = job.status.as_ref();
                latest(job).is_some()
                    && status
                        .and_then(|s| s.workers.as_ref())
                        .is_some_and(|w| w.ready == 2)
                    && status
                        .and_then(|s| s.goodput.as_ref())
                        .and_then(|l| l.current)
                        == Some(GoodputBucket::Productive)
                    && in_phase(eto_api::job_status::JobPhase::Running)(job)
            },
        )
        .await;
    let recorded = latest(&first).unwrap();
    // A read of a later step, answered, soon after the record: long before the next record
    // is due.
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(1);
    eto_tests::poll::until(
        "eto reads the steps again within a few seconds of recording them",
        eto_engine::goodput::READ_EVERY * 3,
        async || relay.last_ended().filter(|ended| *ended > later),
    )
    .await;
    let unwritten = latest(&env.jobs().get("reported").await.unwrap()).unwrap();
    drop(training);
    for worker in ["reported-worker-0", "reported-worker-1"] {
        env.pods()
            .delete(worker, &kube::api::DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    let job = env
        .wait_job("reported", "records a later step", |job| {
            latest(job).is_some_and(|l| l.step > unwritten.step)
        })
        .await;
    let last = latest(&job).unwrap();
    let after_record = last.at.0.duration_since(recorded.at.0).unsigned_abs();
    assert!(
        after_record < eto_engine::goodput::RECORD_EVERY,
        "the step of a read that was not written ({after_record:?} after the record), \
         not of a later record: {last:?}"
    );
    assert_eq!(last.first_step, recorded.first_step, "the same stretch");
    let ledger = job.status.unwrap().goodput.unwrap();
    assert!(ledger.highest_step >= Some(last.step), "{ledger:#?}");
}

/// The job is suspended and resumed in a new run whose pods at first still serve the last
/// step of the run before (the helper outlived it), which eto reads and counts nothing of;
/// then the training resumes from its checkpoint at step 31, and the ledger counts exactly
/// the ten steps it trains twice.
#[tokio::test]
async fn a_run_resumed_from_an_older_checkpoint_counts_exactly_the_steps_trained_twice() {
    let (first_port, resumed_port) = (eto_tests::free_port(), eto_tests::free_port());
    let (_first, first_done) = training(first_port, 1, 40, 0.25);
    let (relay, relayed) = Relay::start(([127, 0, 0, 1], first_port).into()).await;
    let env = Env::start(sim_config(2, 8)).await;
    env.cluster.forward_every_pod_port(29411, relayed);
    let job = JOB.replace(
        "spec:\n  etReplicaSpecs:",
        "spec:\n  elasticPolicy:\n    checkpointGraceSeconds: 1\n  etReplicaSpecs:",
    );
    env.apply_job(&job).await;
    let ledger = |job: &eto_api::TrainingJob| job.status.as_ref().and_then(|s| s.goodput.clone());
    env.wait_job("reported", "records a step", |job| {
        ledger(job).and_then(|l| l.latest).is_some()
    })
    .await;
    eto_tests::poll::until(
        "the training reports step 40",
        std::time::Duration::from_secs(60),
        async || first_done.exists().then_some(()),
    )
    .await;
    env.patch_job("reported", serde_json::json!({"spec": {"suspend": true}}))
        .await;
    env.wait_job("reported", "records step 40 as it stops", |job| {
        ledger(job)
            .and_then(|l| l.latest)
            .is_some_and(|latest| latest.step == 40)
    })
    .await;
    env.wait_job(
        "reported",
        "is suspended",
        in_phase(eto_api::job_status::JobPhase::Suspended),
    )
    .await;
    let before_resume = relay.connections();
    env.patch_job("reported", serde_json::json!({"spec": {"suspend": false}}))
        .await;
    let resumed = env
        .wait_job("reported", "runs again in a new run", |job| {
            job.status.as_ref().and_then(|s| s.run) >= Some(1)
                && in_phase(eto_api::job_status::JobPhase::Running)(job)
        })
        .await;
    assert_eq!(ledger(&resumed).map(|l| l.retrained_steps), Some(0));
    eto_tests::poll::until(
        "eto reads the new run's pods",
        std::time::Duration::from_secs(60),
        async || (relay.connections() > before_resume).then_some(()),
    )
    .await;
    let (_resumed, _) = training(resumed_port, 31, 60, 0.05);
    relay.switch(([127, 0, 0, 1], resumed_port).into());
    let job = env
        .wait_job("reported", "records step 60", |job| {
            ledger(job)
                .and_then(|l| l.latest)
                .is_some_and(|latest| latest.step == 60)
        })
        .await;
    let ledger = ledger(&job).unwrap();
    assert_eq!(ledger.highest_step, Some(60));
    assert_eq!(
        ledger.retrained_steps, 10,
        "31..=40 trained twice, nothing more: {ledger:#?}"
    );
    assert!(ledger.seconds.retrained > 0.0, "{ledger:#?}");
}

/// Three replica groups whose Workers declare the port their helper serves on: eto reads the
/// steps a group's helper serves (when each came) beside the Lighthouse, whose quorum step
/// says nothing of when it came, and the ledger says the training reports them.
#[tokio::test]
async fn replica_groups_report_their_steps_through_a_groups_helper_beside_the_lighthouse() {
    let port = eto_tests::free_port();
    let (_training, _) = training(port, 1, 2400, 0.05);
    let env = Env::start(sim_config(2, 8)).await;
    let (lighthouse, page) = crate::pytorchjob::report_stand_in().await;
    *page.lock().unwrap() = crate::pytorchjob::lighthouse_page(
        "Fast quorum found! [3/3 participants healthy][3 heartbeating][shrink_only=false]",
    );
    env.cluster
        .forward_pod_port("default", "ft-lighthouse", 29510, lighthouse);
    env.cluster
        .forward_every_pod_port(29411, ([127, 0, 0, 1], port).into());
    let job = crate::pytorchjob::ELASTIC_JOB
        .replace("name: elastic", "name: ft")
        .replace("maxReplicas: 4", "maxReplicas: 4\n    replicaGroups: {}")
        .replace(
            "            resources:",
            "            ports:\n            - name: eto-progress\n              containerPort: 29411\n            resources:",
        );
    env.apply::<eto_api::PyTorchJob>(&job).await;
    let job = env
        .wait::<eto_api::PyTorchJob>("ft", "trains on the steps a group serves", |job| {
            job.status
                .as_ref()
                .and_then(|status| status.eto.goodput.as_ref())
                .is_some_and(|ledger| {
                    ledger.source == ProgressSource::TrainingReports
                        && ledger.current == Some(GoodputBucket::Productive)
                })
        })
        .await;
    let ledger = job.status.unwrap().eto.goodput.unwrap();
    let latest = ledger.latest.expect("the step recorded");
    assert_eq!(
        (latest.first_step, latest.total),
        (1, Some(5000)),
        "the helper's stretch, not the quorum's step 40"
    );
}
