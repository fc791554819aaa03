//! TrainJobs under a real `torchrun` on a real cluster, from Trainer's own `torch-distributed`
//! ClusterTrainingRuntime (examples/trainjob/torch-distributed.yaml, installed unchanged; the
//! job's `trainer.image` swaps the image for the harness's): a static job of two nodes trains
//! with nothing but the environment eto gives it and is `Complete`; one whose runtime has a
//! dataset initializer starts its nodes once the initializer completed; an elastic one (two to
//! three nodes) trains on through the loss of the node of group rank 0 and of another, each
//! loss's cost printed as the seconds from the loss to the survivors' next step; one scaled
//! out re-forms with three; one below its minimum suspends and resumes from its checkpoint.
//!
//! Needs what `pytorch_real.rs` needs (a real cluster with a pod network and cluster DNS,
//! `ETO_E2E_IMAGE` with torchrun, `ETO_E2E_POD_PATCH` of a node selector and tolerations,
//! `ETO_E2E_CHECKPOINT_ROOT` shared with the pods' node):
//! `cargo test -p eto-tests --test integration trainjob_real:: -- --ignored --nocapture`.

use std::time::Duration;

use eto_api::TrainJob;
use eto_tests::nodes::set_unschedulable;
use eto_tests::poll::until;
use eto_tests::scratch::Scratch;
use eto_tests::step_log::now;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};

use crate::pytorch_real::{
    DDP_CHECK, ELASTIC_CHECKPOINTED, every_log, field, log_of, marked,
    mount_a_checkpoint_directory, mount_the_notice_helper, shell_template, starts,
};
use crate::torchft_real::{THREE_GROUPS, TORCHFT_STEPS, all_reached, longest_gap, reached, steps};

const JOB: &str = "ddp";

/// Installs Trainer's `torch-distributed` runtime (see `eto_tests::trainer_runtime`).
async fn install_runtime(scratch: &Scratch) {
    eto_tests::trainer_runtime::install_torch_distributed(&scratch.client).await;
}

/// A TrainJob `ddp` of the runtime whose nodes run `script` under torchrun in the harness's
/// image, with `trainer` merged in; the pod template's placement (`ETO_E2E_POD_PATCH`) and
/// volumes become a runtime patch, as Kueue's would be.
/// The reader of the step a checkpointed job saved.
type Saved = Box<dyn Fn() -> Option<u32>>;

/// A TrainJob `ddp` of the runtime whose nodes run `script` under torchrun in the harness's
/// image, with `trainer` merged in, and the reader of its checkpoint if it has one.
fn train_job(
    scratch: &Scratch,
    script: &str,
    checkpoint: bool,
    trainer: serde_json::Value,
) -> (serde_json::Value, Option<Saved>) {
    let mut template = shell_template(&format!(
        "cat > /tmp/ddp.py <<'EOF'\n{script}\nEOF\nexec torchrun --redirects 1:0 --tee 1:0 /tmp/ddp.py"
    ));
    let saved: Option<Saved> =
        checkpoint.then(|| Box::new(mount_a_checkpoint_directory(scratch, &mut template)) as Saved);
    (job_of(scratch, &template, trainer), saved)
}

/// A TrainJob `ddp` of the runtime whose nodes run the container of the pod template
/// `template` (its image and command as the job's `trainer`, with `trainer` merged in); the
/// template's placement (`ETO_E2E_POD_PATCH`), volumes and mounts become a runtime patch, as
/// Kueue's and the SDK's are.
fn job_of(
    scratch: &Scratch,
    template: &serde_json::Value,
    trainer: serde_json::Value,
) -> serde_json::Value {
    let container = &template["spec"]["containers"][0];
    let mut patch = serde_json::json!({
        "nodeSelector": template["spec"]["nodeSelector"],
        "tolerations": template["spec"]["tolerations"],
        "volumes": template["spec"]["volumes"],
    });
    if !container["volumeMounts"].is_null() {
        patch["containers"] =
            serde_json::json!([{"name": "node", "volumeMounts": container["volumeMounts"]}]);
    }
    let patch = serde_json::Value::Object(
        patch
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    );
    let mut spec_trainer = serde_json::json!({
        "image": container["image"],
        "command": container["command"],
        "numProcPerNode": 1,
    });
    json_patch::merge(&mut spec_trainer, &trainer);
    serde_json::json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": JOB, "namespace": scratch.namespace},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": spec_trainer,
            "runtimePatches": [{"manager": "eto-test", "trainingRuntimeSpec": {"template": {"spec": {
                "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": patch}}}}]
            }}}}]
        }
    })
}

async fn apply(scratch: &Scratch, job: serde_json::Value) {
    let jobs: Api<TrainJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job: TrainJob = serde_json::from_value(job).unwrap();
    jobs.patch(
        JOB,
        &PatchParams::apply("eto-test").force(),
        &Patch::Apply(&job),
    )
    .await
    .unwrap();
}

/// Whether Trainer's condition `type_` holds on `job`.
fn holds(job: &TrainJob, type_: &str) -> bool {
    job.status
        .iter()
        .flat_map(|status| &status.conditions)
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Waits until the job is `Complete` or `Failed`; returns it.
async fn ended(scratch: &Scratch) -> TrainJob {
    let jobs: Api<TrainJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    until("the job ends", Duration::from_secs(600), async || {
        let job = jobs.get(JOB).await.ok()?;
        (holds(&job, "Complete") || holds(&job, "Failed")).then_some(job)
    })
    .await
}

/// The pod whose training is rank 0 of the group now: the host of the newest rank 0 start.
async fn rank_zero_pod(pods: &Api<Pod>) -> String {
    let printed = every_log(pods).await;
    let mut newest: Option<(f64, String)> = None;
    for line in starts(&printed) {
        let at: f64 = field(line, "at=")
            .and_then(|at| at.parse().ok())
            .unwrap_or(0.0);
        if field(line, "rank=") == Some("0") && newest.as_ref().is_none_or(|(t, _)| at > *t) {
            newest = Some((at, field(line, "host=").unwrap_or_default().to_string()));
        }
    }
    newest.expect("a rank 0 started").1
}

/// Seconds from `lost_at` to the first step the survivors trained after it.
async fn next_step_after(pods: &Api<Pod>, lost_at: f64) -> f64 {
    until(
        "the survivors train again",
        Duration::from_secs(300),
        async || {
            let printed = every_log(pods).await;
            marked(&printed, "eto-elastic-step:")
                .iter()
                .filter_map(|line| field(line, "at=")?.parse::<f64>().ok())
                .filter(|at| *at > lost_at)
                .fold(None, |first: Option<f64>, at| {
                    Some(first.map_or(at, |f| f.min(at)))
                })
                .map(|at| at - lost_at)
        },
    )
    .await
}

/// Force-deletes pod `name`, as a node's sudden loss takes it; returns when.
async fn force_delete(pods: &Api<Pod>, name: &str) -> f64 {
    let at = now();
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    at
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn a_static_trainjob_of_the_upstream_runtime_trains_and_is_complete() {
    let scratch = Scratch::start("trainjob-static").await;
    install_runtime(&scratch).await;
    let (job, _) = train_job(
        &scratch,
        DDP_CHECK,
        false,
        serde_json::json!({"numNodes": 2}),
    );
    apply(&scratch, job).await;
    let job = ended(&scratch).await;
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    println!("{printed}");
    assert!(holds(&job, "Complete"), "{:?}", job.status);
    let mut results: Vec<&str> = marked(&printed, "eto-ddp:");
    results.sort();
    assert_eq!(
        results,
        [
            "eto-ddp: rank=0 world=2 env_world=2 sum=3",
            "eto-ddp: rank=1 world=2 env_world=2 sum=3"
        ],
        "both nodes trained as one group of two"
    );
    let status = job.status.unwrap();
    assert_eq!(status.conditions.last().unwrap().type_, "Complete");
    assert_eq!(status.jobs_status[0].succeeded, 1);
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn an_elastic_trainjob_trains_on_through_the_loss_of_rank_0s_node_and_of_another() {
    let scratch = Scratch::start("trainjob-elastic").await;
    install_runtime(&scratch).await;
    let (job, saved) = train_job(
        &scratch,
        ELASTIC_CHECKPOINTED,
        true,
        serde_json::json!({
            "numNodes": 3,
            "env": [{"name": "TOTAL_STEPS", "value": "120"}],
            "elasticPolicy": {"minNodes": 2, "maxNodes": 3}
        }),
    );
    let saved = saved.unwrap();
    apply(&scratch, job).await;
    let pods = scratch.pods();
    until("the nodes train", Duration::from_secs(300), async || {
        (saved()? >= 10).then_some(())
    })
    .await;
    let rank_zero = rank_zero_pod(&pods).await;
    let lost_at = force_delete(&pods, &rank_zero).await;
    let first = next_step_after(&pods, lost_at).await;
    println!(
        "TrainJob, elastic: {rank_zero} (group rank 0) force-deleted -> survivors' next step: {first:.1} s"
    );
    let reached = saved().unwrap_or_default();
    until("ten more steps", Duration::from_secs(300), async || {
        (saved()? >= reached + 10).then_some(())
    })
    .await;
    let current_zero = rank_zero_pod(&pods).await;
    let other = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|pod| pod.metadata.name)
        .find(|name| name.contains("-worker-") && *name != current_zero)
        .unwrap();
    let lost_at = force_delete(&pods, &other).await;
    let second = next_step_after(&pods, lost_at).await;
    println!("TrainJob, elastic: {other} force-deleted -> survivors' next step: {second:.1} s");
    let job = ended(&scratch).await;
    let printed = every_log(&pods).await;
    assert!(
        holds(&job, "Complete"),
        "never Failed by the platform: {:?}",
        job.status
    );
    let status = job.status.unwrap();
    assert_eq!(status.eto.run.unwrap_or(0), 0, "the run went on");
    assert_eq!(status.eto.restart_count.unwrap_or(0), 0);
    assert!(
        printed
            .lines()
            .any(|line| line.contains("eto-elastic-done:") && line.ends_with("steps=120")),
        "the training ended after its 120 steps: {printed}"
    );
    for (loss, seconds) in [("rank 0", first), ("another", second)] {
        assert!(
            seconds < 60.0,
            "{loss}: the survivors trained again ({seconds:.1} s)"
        );
    }
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn an_elastic_trainjob_scaled_out_re_forms_with_three() {
    let scratch = Scratch::start("trainjob-scale").await;
    install_runtime(&scratch).await;
    let (job, saved) = train_job(
        &scratch,
        ELASTIC_CHECKPOINTED,
        true,
        serde_json::json!({
            "numNodes": 2,
            "env": [{"name": "TOTAL_STEPS", "value": "80"}],
            "elasticPolicy": {"minNodes": 2, "maxNodes": 3}
        }),
    );
    let saved = saved.unwrap();
    apply(&scratch, job).await;
    until("the nodes train", Duration::from_secs(300), async || {
        (saved()? >= 10).then_some(())
    })
    .await;
    let jobs: Api<TrainJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    jobs.patch_scale(
        JOB,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    let job = ended(&scratch).await;
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    assert!(holds(&job, "Complete"), "{:?}", job.status);
    let worlds: Vec<&str> = starts(&printed)
        .iter()
        .filter_map(|line| field(line, "world="))
        .collect();
    assert!(
        worlds.contains(&"3"),
        "the group re-formed with three: {worlds:?}"
    );
    assert!(
        log_of(&pods, "ddp-worker-2")
            .await
            .contains("eto-elastic-start:")
    );
    scratch.end().await;
}

#[tokio::test]
#[ignore = "needs cluster"]
async fn an_elastic_trainjob_below_its_minimum_suspends_and_resumes_from_its_checkpoint() {
    let scratch = Scratch::start("trainjob-suspend").await;
    install_runtime(&scratch).await;
    let (job, saved) = train_job(
        &scratch,
        ELASTIC_CHECKPOINTED,
        true,
        serde_json::json!({
            "numNodes": 3,
            "env": [{"name": "TOTAL_STEPS", "value": "80"}],
            "elasticPolicy": {"minNodes": 2, "maxNodes": 3, "belowMinSeconds": 5, "checkpointGraceSeconds": 15}
        }),
    );
    let saved = saved.unwrap();
    apply(&scratch, job).await;
    let pods = scratch.pods();
    let jobs: Api<TrainJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    until("the nodes train", Duration::from_secs(300), async || {
        (saved()? >= 10).then_some(())
    })
    .await;
    let node: Vec<String> = pods
        .get("ddp-worker-2")
        .await
        .unwrap()
        .spec
        .unwrap()
        .node_name
        .into_iter()
        .collect();
    set_unschedulable(&scratch.client, &node, true).await;
    for name in ["ddp-worker-0", "ddp-worker-1"] {
        pods.evict(name, &Default::default()).await.unwrap();
    }
    until("the job suspends", Duration::from_secs(120), async || {
        let job = jobs.get(JOB).await.ok()?;
        (holds(&job, "Suspended") || job.status?.eto.run.unwrap_or(0) >= 1).then_some(())
    })
    .await;
    let suspended_at = saved().unwrap_or_default();
    set_unschedulable(&scratch.client, &node, false).await;
    let back = std::time::Instant::now();
    until(
        "the resumed run trains",
        Duration::from_secs(300),
        async || (saved()? > suspended_at).then_some(()),
    )
    .await;
    println!(
        "TrainJob below its minimum: capacity back -> first resumed step saved: {:.1} s",
        back.elapsed().as_secs_f64()
    );
    let job = ended(&scratch).await;
    let printed = every_log(&pods).await;
    assert!(holds(&job, "Complete"), "never Failed: {:?}", job.status);
    let status = job.status.unwrap();
    assert_eq!(status.eto.run, Some(1), "one new run");
    assert_eq!(status.eto.restart_count.unwrap_or(0), 0, "nothing counted");
    let resumed: Vec<&str> = starts(&printed)
        .into_iter()
        .filter(|line| field(line, "run_id=").is_some_and(|id| id.ends_with("-1")))
        .collect();
    assert!(
        !resumed.is_empty() && resumed.iter().all(|line| !line.contains("from_step=0 ")),
        "the new run went on from the checkpoint: {resumed:#?}"
    );
    scratch.end().await;
}

/// A TrainJob of three TorchFT replica groups (two to four, `elasticPolicy.replicaGroups`)
/// loses group 1's pod: the other groups train on without a restart, pausing about as long as
/// the Lighthouse's heartbeat timeout; eto replaces the group under a new name with its id, it
/// heals from a live group, and the job is `Complete`.
#[tokio::test]
#[ignore = "needs cluster"]
async fn a_replica_group_trainjob_loses_a_group_and_the_others_pause_about_a_second() {
    let scratch = Scratch::start("trainjob-groups").await;
    install_runtime(&scratch).await;
    let mut template = shell_template(&format!(
        "cat > /tmp/train_ft.py <<'EOF'\n{TORCHFT_STEPS}\nEOF\nexec torchrun /tmp/train_ft.py"
    ));
    mount_the_notice_helper(&scratch, &mut template).await;
    let job = job_of(
        &scratch,
        &template,
        serde_json::json!({
            "numNodes": 3,
            "elasticPolicy": {"minNodes": 2, "maxNodes": 4, "replicaGroups": {}}
        }),
    );
    apply(&scratch, job).await;
    let pods = scratch.pods();
    all_reached(&pods, &THREE_GROUPS, 30).await;
    let lost_at = now();
    pods.delete("ddp-worker-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    reached(&pods, "ddp-worker-3", 1).await;
    let job = ended(&scratch).await;
    assert!(holds(&job, "Complete"), "{:?}", job.status);
    let mut stall: f64 = 0.0;
    for survivor in ["ddp-worker-0", "ddp-worker-2"] {
        let log = log_of(&pods, survivor).await;
        assert_eq!(
            marked(&log, "eto-ft-start:").len(),
            1,
            "{survivor} never restarted"
        );
        let printed = steps(&log);
        assert!(
            printed
                .iter()
                .any(|step| step.at > lost_at && step.quorum == 2),
            "{survivor} trained on in a quorum of two"
        );
        stall = stall.max(longest_gap(&printed, lost_at));
    }
    println!(
        "TrainJob, replica groups: group 1 force-deleted -> the others' longest pause: {stall:.2} s"
    );
    let replacement = log_of(&pods, "ddp-worker-3").await;
    let group = marked(&replacement, "eto-ft-start:")
        .first()
        .and_then(|line| field(line, "group="))
        .map(str::to_string);
    assert_eq!(
        group.as_deref(),
        Some("1"),
        "the replacement has the lost group's id"
    );
    assert!(
        !marked(&replacement, "eto-ft-healed:").is_empty(),
        "it healed from a live group"
    );
    assert_eq!(
        job.status.unwrap().eto.run.unwrap_or(0),
        0,
        "the run went on"
    );
    scratch.end().await;
}

/// A TrainingRuntime whose dataset initializer writes what it was asked to fetch (its
/// `STORAGE_URI`) to the job's shared directory, and whose nodes wait for it to complete, as
/// Trainer's runtimes with initializers do: the nodes start only once it is done, read what
/// it wrote, and train; the job is `Complete`.
#[tokio::test]
#[ignore = "needs cluster"]
async fn an_initializer_runs_to_completion_before_the_nodes_which_read_what_it_wrote() {
    let scratch = Scratch::start("trainjob-init").await;
    let mut template = shell_template(&format!(
        "cat /ckpt/dataset.txt && cat > /tmp/ddp.py <<'EOF'\n{DDP_CHECK}\nEOF\nexec torchrun --redirects 1:0 --tee 1:0 /tmp/ddp.py"
    ));
    // The shared directory only: no step is saved there.
    let _ = mount_a_checkpoint_directory(&scratch, &mut template);
    let image = template["spec"]["containers"][0]["image"].clone();
    let runtime = serde_json::json!({
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "torch-with-dataset", "namespace": scratch.namespace},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
            {"name": "dataset-initializer", "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
                "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "image": image,
                    "command": ["sh", "-c", "sleep 3; echo \"eto-dataset: fetched $STORAGE_URI\" > /ckpt/dataset.txt"]}]}}}}},
            {"name": "node", "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}], "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": image}]}}}}}
        ]}}}
    });
    let runtimes: Api<eto_api::TrainingRuntime> =
        Api::namespaced(scratch.client.clone(), &scratch.namespace);
    runtimes
        .create(
            &Default::default(),
            &serde_json::from_value(runtime).unwrap(),
        )
        .await
        .unwrap();
    let mut job = job_of(&scratch, &template, serde_json::json!({"numNodes": 2}));
    job["spec"]["runtimeRef"] =
        serde_json::json!({"name": "torch-with-dataset", "kind": "TrainingRuntime"});
    job["spec"]["initializer"] = serde_json::json!({"dataset": {"storageUri": "hf://eto/example"}});
    // The placement and the shared directory go to the initializer too.
    let node_patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
        ["replicatedJobs"][0]
        .clone();
    let mut init_patch = node_patch;
    init_patch["name"] = "dataset-initializer".into();
    init_patch["template"]["spec"]["template"]["spec"]["containers"][0]["name"] =
        "dataset-initializer".into();
    job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        .as_array_mut()
        .unwrap()
        .push(init_patch);
    apply(&scratch, job).await;
    let job = ended(&scratch).await;
    assert!(holds(&job, "Complete"), "{:?}", job.status);
    let steps: Vec<(String, i32)> = job
        .status
        .iter()
        .flat_map(|status| &status.jobs_status)
        .map(|step| (step.name.clone(), step.succeeded))
        .collect();
    assert_eq!(
        steps,
        [
            ("dataset-initializer".to_string(), 1),
            ("node".to_string(), 1)
        ],
        "jobsStatus counts each replicated job"
    );
    let pods = scratch.pods();
    let printed = every_log(&pods).await;
    println!("{printed}");
    assert_eq!(
        marked(&printed, "eto-dataset: fetched hf://eto/example").len(),
        2,
        "both nodes read what the initializer wrote"
    );
    assert_eq!(
        marked(&printed, "eto-ddp:").len(),
        2,
        "and trained as a group of two"
    );
    // The first container's run, as its end state records it.
    let terminated = |pod: Pod| {
        pod.status?
            .container_statuses?
            .into_iter()
            .next()?
            .state?
            .terminated
    };
    let initialized = terminated(pods.get("ddp-dataset-initializer-0").await.unwrap())
        .and_then(|ended| ended.finished_at)
        .unwrap();
    let node_zero = terminated(pods.get("ddp-master-0").await.unwrap())
        .and_then(|ended| ended.started_at)
        .unwrap();
    assert!(
        initialized.0 <= node_zero.0,
        "node 0 started after the initializer finished"
    );
    scratch.end().await;
}

/// examples/trainjob/replica-groups.yaml as it is, but for what the harness lacks: the image
/// (the harness's torch 2.x with TorchFT, with examples/torchft/Dockerfile's /workspace
/// mounted from this repository: the example script and eto's helper, which the script
/// imports from its own directory), no GPU (one process
/// per node), the checkpoint claim (a directory of this machine) and a short run. Three groups
/// and a spare train; group 1's node is force-deleted; the spare takes its id and heals, the
/// others never restart, and the job is `Complete`.
#[tokio::test]
#[ignore = "needs cluster"]
async fn the_replica_groups_example_trains_through_a_lost_group() {
    let scratch = Scratch::start("trainjob-example").await;
    install_runtime(&scratch).await;
    let text = std::fs::read_to_string(
        eto_tests::workspace_root().join("examples/trainjob/replica-groups.yaml"),
    )
    .unwrap();
    let mut job: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    job["metadata"]["namespace"] = scratch.namespace.clone().into();
    // The image's /workspace, as examples/torchft/Dockerfile fills it.
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let read =
        |path: &str| std::fs::read_to_string(eto_tests::workspace_root().join(path)).unwrap();
    config_maps
        .create(
            &Default::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "workspace"},
                "data": {
                    "train_ft.py": read("examples/torchft/train_ft.py"),
                    "eto_notice.py": read("python/eto_notice.py")
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let mut template = shell_template("true");
    let saved_dir = {
        let _ = mount_a_checkpoint_directory(&scratch, &mut template);
        template["spec"]["volumes"][0]["hostPath"].clone()
    };
    let trainer = &mut job["spec"]["trainer"];
    trainer["image"] = template["spec"]["containers"][0]["image"].clone();
    trainer["numProcPerNode"] = 1.into();
    trainer.as_object_mut().unwrap().remove("resourcesPerNode");
    trainer["env"] = serde_json::json!([
        {"name": "CHECKPOINT_DIR", "value": "/checkpoints"},
        {"name": "CHECKPOINT_EVERY", "value": "10"},
        {"name": "TOTAL_STEPS", "value": "120"}
    ]);
    let pod = &mut job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        [0]["template"]["spec"]["template"]["spec"];
    pod["volumes"] = serde_json::json!([
        {"name": "checkpoints", "hostPath": saved_dir},
        {"name": "workspace", "configMap": {"name": "workspace"}}
    ]);
    pod["containers"][0]["volumeMounts"] = serde_json::json!([
        {"name": "checkpoints", "mountPath": "/checkpoints"},
        {"name": "workspace", "mountPath": "/workspace"}
    ]);
    for key in ["nodeSelector", "tolerations"] {
        pod[key] = template["spec"][key].clone();
    }
    let jobs: Api<TrainJob> = Api::namespaced(scratch.client.clone(), &scratch.namespace);
    let job: TrainJob = serde_json::from_value(job).unwrap();
    jobs.patch(
        "ft-mnist",
        &PatchParams::apply("eto-test").force(),
        &Patch::Apply(&job),
    )
    .await
    .unwrap();
    let pods = scratch.pods();
    let groups = [
        "ft-mnist-worker-0",
        "ft-mnist-worker-1",
        "ft-mnist-worker-2",
    ];
    let step_of = |log: &str| {
        marked(log, "step: group=")
            .iter()
            .filter_map(|line| field(line, "step=")?.parse::<u64>().ok())
            .max()
            .unwrap_or(0)
    };
    until(
        "every group trains 20 steps",
        Duration::from_secs(300),
        async || {
            for name in groups {
                if step_of(&log_of(&pods, name).await) < 20 {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    pods.delete(
        "ft-mnist-worker-1",
        &DeleteParams::default().grace_period(0),
    )
    .await
    .unwrap();
    let done = until("the job ends", Duration::from_secs(600), async || {
        let job = jobs.get("ft-mnist").await.ok()?;
        (holds(&job, "Complete") || holds(&job, "Failed")).then_some(job)
    })
    .await;
    let printed = every_log(&pods).await;
    assert!(holds(&done, "Complete"), "{:?}\n{printed}", done.status);
    for survivor in ["ft-mnist-worker-0", "ft-mnist-worker-2"] {
        let log = log_of(&pods, survivor).await;
        assert_eq!(
            marked(&log, "start: group=").len(),
            1,
            "{survivor} never restarted"
        );
    }
    let spare = log_of(&pods, "ft-mnist-worker-3").await;
    assert_eq!(
        marked(&spare, "start: group=")
            .first()
            .and_then(|line| field(line, "group=")),
        Some("1"),
        "the spare took the lost group's id: {spare}"
    );
    assert!(
        step_of(&spare) >= 120,
        "and trained to the end with the others"
    );
    scratch.end().await;
}
