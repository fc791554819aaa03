//! The goodput ledger of a job whose training reports its steps without a coordinator: eto's
//! Python helper, `progress(step)`, serves them in the training's pod, and eto reads them
//! through the API server's pod proxy (eto-sim forwards the pods' port to the helper running
//! on this machine).

use std::process::{Child, Command, Stdio};

use eto_api::job_status::{GoodputBucket, ProgressSource};
use eto_tests::env::{Env, sim_config};
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

/// Training that reports a step every 50 ms through the helper, serving on `port`.
fn training(port: u16) -> KilledOnDrop {
    let script = r#"
import sys, time
sys.path.insert(0, sys.argv[1])
import eto_notice
for step in range(1, 2400):
    eto_notice.progress(step, total=5000)
    time.sleep(0.05)
"#;
    let child = Command::new("python3")
        .args(["-c", script])
        .arg(workspace_root().join("python"))
        .env("ETO_PROGRESS_PORT", port.to_string())
        .env("HOROVOD_RANK", "1")
        .env_remove("ETO_PROGRESS_URL")
        .env_remove("ETO_SAVED_URL")
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs");
    KilledOnDrop(child)
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
    let _training = training(port);
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
