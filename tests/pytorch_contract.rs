//! training-operator v1's contract with a PyTorchJob's pods, as eto builds it, under a real
//! `torchrun`: the Master's and the Workers' pods and headless Services that
//! `eto_engine::kind::pytorch_job` builds, applied as they are, run a real DDP script with
//! torchrun's static rendezvous, configured by nothing but the environment eto gives them.
//!
//! Needs a real cluster with a pod network and cluster DNS (`#[ignore]`d), and an image with
//! torch's `torchrun` (`examples/horovod/Dockerfile` has Debian's) named by `ETO_E2E_IMAGE`,
//! placed as the e2e tests place theirs (`ETO_E2E_PULL_POLICY`, `ETO_E2E_POD_PATCH`, see
//! `e2e.rs`):
//! `cargo test -p eto-tests --test integration pytorch_contract:: -- --ignored --nocapture`.

use std::time::Duration;

use eto_api::PyTorchJob;
use eto_api::pytorch_job::PyTorchReplicaType;
use eto_engine::kind::pytorch_job::{Defaulted, pod::pod, service::service};
use eto_tests::poll::until;
use eto_tests::scratch::Scratch;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, LogParams, PostParams};

/// Checks what every rank sees: the world size torchrun reports, and the all-reduced sum of
/// `rank + 1`, which is `world * (world + 1) / 2` when every rank took part.
const DDP_CHECK: &str = r#"
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"eto-ddp: rank={rank} world={world} env_world={os.environ['WORLD_SIZE']} sum={int(value.item())}", flush=True)
dist.destroy_process_group()
"#;

#[tokio::test]
#[ignore = "needs cluster"]
async fn a_master_and_two_workers_train_with_the_environment_eto_gives_them() {
    let scratch = Scratch::start("pytorch-contract").await;
    let image = std::env::var("ETO_E2E_IMAGE").expect("ETO_E2E_IMAGE names an image with torchrun");
    let pull = std::env::var("ETO_E2E_PULL_POLICY").unwrap_or("IfNotPresent".into());
    let patch: serde_json::Value = std::env::var("ETO_E2E_POD_PATCH")
        .map(|text| serde_json::from_str(&text).expect("ETO_E2E_POD_PATCH is JSON"))
        .unwrap_or_default();
    // Debian bookworm's torch 1.13 under Python 3.11 cannot read its own default of
    // `--redirects` and `--tee` ("0": Python 3.11 no longer lists a flag's zero member), so
    // the command names a local rank the pod does not have; nothing else is passed.
    let command = format!(
        "cat > /tmp/ddp.py <<'EOF'\n{DDP_CHECK}\nEOF\nexec torchrun --redirects 1:0 --tee 1:0 /tmp/ddp.py"
    );
    let mut template = serde_json::json!({"spec": {
        "containers": [{
            "name": "pytorch",
            "image": image,
            "imagePullPolicy": pull,
            "command": ["sh", "-c", command]
        }]
    }});
    json_patch::merge(&mut template["spec"], &patch);
    let job: PyTorchJob = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp", "namespace": scratch.namespace, "uid": "not-stored"},
        "spec": {
            "nprocPerNode": "1",
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "Never", "template": template},
                "Worker": {"replicas": 2, "restartPolicy": "Never", "template": template}
            }
        }
    }))
    .unwrap();
    let defaulted = Defaulted::of(&job);
    let pods = scratch.pods();
    let services: Api<Service> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let members = [
        (PyTorchReplicaType::Master, 0),
        (PyTorchReplicaType::Worker, 0),
        (PyTorchReplicaType::Worker, 1),
    ];
    for (type_, index) in members {
        // The job is not stored (the operator does not serve the kind here): its children
        // carry no owner reference, which the garbage collector would follow to nothing.
        let mut service = service(&job, &defaulted, type_, index).unwrap();
        service.metadata.owner_references = None;
        services
            .create(&PostParams::default(), &service)
            .await
            .unwrap();
        let mut pod: Pod = pod(&job, &defaulted, type_, index).unwrap();
        pod.metadata.owner_references = None;
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let names = ["ddp-master-0", "ddp-worker-0", "ddp-worker-1"];
    let mut ranks = Vec::new();
    for name in names {
        let phase = until(
            &format!("{name} finishes"),
            Duration::from_secs(300),
            async || {
                let pod = pods.get(name).await.ok()?;
                let phase = pod.status?.phase?;
                matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
            },
        )
        .await;
        let log = pods.logs(name, &LogParams::default()).await.unwrap();
        println!("{name} ({phase}):\n{log}");
        assert_eq!(phase, "Succeeded", "{name}: {log}");
        let line = log
            .lines()
            .find(|line| line.starts_with("eto-ddp:"))
            .unwrap_or_else(|| panic!("{name} printed no result: {log}"));
        assert!(
            line.ends_with("world=3 env_world=3 sum=6"),
            "{name}: every rank sees three and the sum of all: {line}"
        );
        ranks.push(line.split_whitespace().nth(1).unwrap().to_string());
    }
    assert_eq!(
        ranks,
        ["rank=0", "rank=1", "rank=2"],
        "master first, workers by index"
    );
    scratch.end().await;
}
