//! Kubeflow's `kubeflow` SDK 0.5.0 from PyPI, the client Trainer's users submit with, against
//! eto on a real cluster (`tests/sdk/trainer_client.py`): `TrainerClient` lists Trainer's
//! `torch-distributed` runtime, trains a function on two nodes with `CustomTrainer` (real
//! torchrun), waits until the TrainJob is `Complete`, lists it and reads each node's log.
//!
//! Needs a real cluster and the variables `pytorch_real.rs` needs (`ETO_E2E_IMAGE` with a
//! torchrun the SDK's plain `torchrun <file>` runs: torch 2.x, `ETO_E2E_POD_PATCH`):
//! `cargo test -p eto-tests --test integration trainer_sdk:: -- --ignored --nocapture`.

use eto_api::TrainJob;
use eto_tests::scratch::Scratch;
use eto_tests::tools;
use kube::api::Api;

/// The SDK's version on PyPI.
const SDK_VERSION: &str = "0.5.0";

#[tokio::test]
#[ignore = "needs cluster"]
async fn the_kubeflow_sdk_lists_the_runtime_trains_a_function_and_reads_its_logs() {
    let sdk = tools::python_package_with_dependencies(
        "kubeflow",
        SDK_VERSION,
        "kubeflow/trainer/api/trainer_client.py",
    );
    let scratch = Scratch::start("trainer-sdk").await;
    eto_tests::trainer_runtime::install_torch_distributed(&scratch.client).await;
    let script = eto_tests::workspace_root().join("tests/sdk/trainer_client.py");
    let output = tokio::process::Command::new("python3")
        .arg(&script)
        .env("PYTHONPATH", &sdk)
        .env("NAMESPACE", &scratch.namespace)
        .env(
            "IMAGE",
            std::env::var("ETO_E2E_IMAGE").expect("ETO_E2E_IMAGE names an image with torchrun"),
        )
        .env(
            "POD_PATCH",
            std::env::var("ETO_E2E_POD_PATCH").unwrap_or_default(),
        )
        .output()
        .await
        .expect("python3 runs");
    let printed = String::from_utf8_lossy(&output.stdout).to_string();
    println!("{printed}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the SDK's calls succeed");
    let line = |prefix: &str| {
        printed
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} line: {printed}"))
            .to_string()
    };
    assert!(line("sdk-runtimes:").contains("torch-distributed"));
    assert_eq!(
        line("sdk-runtime:"),
        "sdk-runtime: name=torch-distributed framework=torch num_nodes=1"
    );
    let complete = line("sdk-complete:");
    assert!(complete.contains("status=Complete"), "{complete}");
    assert!(
        complete.contains("node-0=") && complete.contains("node-1="),
        "{complete}"
    );
    assert_eq!(line("sdk-listed:"), "sdk-listed: True");
    assert_eq!(
        line("sdk-log node-0:"),
        "sdk-log node-0: eto-sdk-train: rank=0 world=2 sum=3 node_rank=0"
    );
    assert_eq!(
        line("sdk-log node-1:"),
        "sdk-log node-1: eto-sdk-train: rank=1 world=2 sum=3 node_rank=1"
    );
    let name = line("sdk-submitted:")
        .trim_start_matches("sdk-submitted: ")
        .to_string();
    let jobs: Api<TrainJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job = jobs.get(&name).await.unwrap();
    let status = job.status.unwrap();
    assert_eq!(status.conditions.last().unwrap().type_, "Complete");
    scratch.end().await;
}
