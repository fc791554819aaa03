//! Fixtures for the engine's unit tests.

use eto_api::TrainingJob;

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
