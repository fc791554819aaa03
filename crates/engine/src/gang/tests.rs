//! The PodGroups and pod memberships of a TrainingJob and an MPIJob for both gang schedulers, as
//! YAML.

use eto_api::{MPIJob, TrainingJob};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::effective_spec::EffectiveSpec;
use crate::kind::{mpi_job, training_job};
use crate::testing::{mpi_job, training_job};

/// The spec fields of the upstream PodGroup CRDs (Volcano's `scheduling.volcano.sh/v1beta1`,
/// scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`): what eto writes must be among them, or
/// the API server prunes it.
const VOLCANO_SPEC_FIELDS: [&str; 7] = [
    "minMember",
    "minResources",
    "minTaskMember",
    "networkTopology",
    "priorityClassName",
    "queue",
    "subGroupPolicy",
];
const COSCHEDULING_SPEC_FIELDS: [&str; 3] = ["minMember", "minResources", "scheduleTimeoutSeconds"];

fn coscheduling() -> GangScheduler {
    GangScheduler::Coscheduling {
        scheduler_name: "scheduler-plugins-scheduler".into(),
    }
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("valid YAML")
}

/// A TrainingJob of 2 to 4 workers with a GPU and 8 GiB each, its launcher 1 CPU, queue and
/// priority as `arena submit etjob` renders them.
fn elastic_training_job() -> TrainingJob {
    let mut job = training_job();
    let patch = json!({
        "metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "research"}},
        "spec": {"etReplicaSpecs": {
            "launcher": {"template": {"spec": {"priorityClassName": "high", "containers": [
                {"name": "launcher", "image": "horovod/horovod:0.28.1", "resources": {"requests": {"cpu": "1"}}}
            ]}}},
            "worker": {"replicas": 3, "minReplicas": 2, "maxReplicas": 4, "template": {"spec": {"priorityClassName": "high", "containers": [
                {"name": "worker", "image": "horovod/horovod:0.28.1", "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "8Gi"}, "requests": {"cpu": "500m"}}}
            ]}}},
        }},
    });
    let mut value = serde_json::to_value(&job).unwrap();
    json_patch::merge(&mut value, &patch);
    job = serde_json::from_value(value).unwrap();
    job
}

/// The PodGroup of `job`, validated with `spec`, as JSON.
fn group_of(
    job: JobRef<'_>,
    spec: &EffectiveSpec,
    scheduler: &GangScheduler,
    launcher_exists: bool,
) -> Value {
    let job = JobContext {
        job_ref: job,
        spec,
        run: 1,
        notice: None,
        gang: None,
    };
    serde_json::to_value(pod_group(job, scheduler, launcher_exists)).unwrap()
}

fn training_group(job: &TrainingJob, scheduler: &GangScheduler, launcher_exists: bool) -> Value {
    let spec = training_job::validation::validate(job).expect("the fixture is valid");
    group_of(JobRef::new(job), &spec, scheduler, launcher_exists)
}

fn mpi_group(job: &MPIJob, scheduler: &GangScheduler, launcher_exists: bool) -> Value {
    let spec = mpi_job::validation::validate(job).expect("the fixture is valid");
    group_of(JobRef::new(job), &spec, scheduler, launcher_exists)
}

fn assert_upstream_fields(group: &Value, fields: &[&str]) {
    for field in group["spec"].as_object().unwrap().keys() {
        assert!(
            fields.contains(&field.as_str()),
            "{field} is not a field of {}",
            group["apiVersion"]
        );
    }
}

#[test]
fn a_training_job_gangs_its_minimum_for_volcano_with_arena_queue_and_priority() {
    let job = elastic_training_job();
    let waiting = training_group(&job, &GangScheduler::Volcano, false);
    assert_eq!(
        waiting,
        yaml(
            r"
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: mnist
  namespace: default
  labels:
    group-name: kai.alibabacloud.com
    training-job-name: mnist
    app.kubernetes.io/managed-by: eto
  ownerReferences:
  - apiVersion: kai.alibabacloud.com/v1alpha1
    kind: TrainingJob
    name: mnist
    uid: 6f1d7c1e-0000-4000-8000-000000000001
    controller: true
    blockOwnerDeletion: true
spec:
  minMember: 2
  minResources:
    cpu: '2'
    memory: 16Gi
    nvidia.com/gpu: '2'
  queue: research
  priorityClassName: high
"
        ),
        "before the launcher exists the gang is the two workers of the minimum; the \
         resources already count the launcher's CPU"
    );
    assert_upstream_fields(&waiting, &VOLCANO_SPEC_FIELDS);
    let launched = training_group(&job, &GangScheduler::Volcano, true);
    assert_eq!(
        launched["spec"]["minMember"], 3,
        "the launcher joins the gang"
    );
    assert_eq!(
        launched["spec"]["minResources"],
        waiting["spec"]["minResources"]
    );
}

#[test]
fn a_training_job_gangs_its_minimum_for_coscheduling() {
    let job = elastic_training_job();
    let group = training_group(&job, &coscheduling(), false);
    assert_eq!(
        group["apiVersion"], "scheduling.x-k8s.io/v1alpha1",
        "the scheduler-plugins API"
    );
    assert_eq!(
        group["spec"],
        yaml(
            r"
minMember: 2
minResources:
  cpu: '2'
  memory: 16Gi
  nvidia.com/gpu: '2'
"
        ),
        "queue and priority class are Volcano's; a TrainingJob has no timeout"
    );
    assert_upstream_fields(&group, &COSCHEDULING_SPEC_FIELDS);
}

fn mpi_job_with_policy(policy: Value) -> MPIJob {
    let mut value = serde_json::to_value(mpi_job()).unwrap();
    json_patch::merge(
        &mut value,
        &json!({"spec": {
            "runPolicy": {"schedulingPolicy": policy},
            "mpiReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
                {"name": "worker", "image": "mpioperator/mpi-pi:openmpi", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ]}}}},
        }}),
    );
    serde_json::from_value(value).unwrap()
}

#[test]
fn an_mpi_job_passes_its_scheduling_policy_through() {
    let job = mpi_job_with_policy(json!({
        "minAvailable": 2, "queue": "batch", "priorityClass": "low",
        "minResources": {"nvidia.com/gpu": "1"}, "scheduleTimeoutSeconds": 600,
    }));
    let volcano = mpi_group(&job, &GangScheduler::Volcano, true);
    assert_eq!(
        volcano["spec"],
        yaml(
            r"
minMember: 2
minResources:
  nvidia.com/gpu: '1'
queue: batch
priorityClassName: low
"
        )
    );
    assert_upstream_fields(&volcano, &VOLCANO_SPEC_FIELDS);
    let plugins = mpi_group(&job, &coscheduling(), true);
    assert_eq!(
        plugins["spec"],
        yaml(
            r"
minMember: 2
minResources:
  nvidia.com/gpu: '1'
scheduleTimeoutSeconds: 600
"
        )
    );
    assert_upstream_fields(&plugins, &COSCHEDULING_SPEC_FIELDS);
    assert_eq!(
        plugins["metadata"]["name"], "pi",
        "named after the job, as by mpi-operator"
    );
    assert_eq!(plugins["metadata"]["ownerReferences"][0]["kind"], "MPIJob");
}

#[test]
fn an_mpi_job_without_a_policy_gangs_its_workers_and_its_launcher() {
    // Two workers, no elastic policy: the minimum is both; the launcher starts with them.
    let job = mpi_job_with_policy(json!({}));
    let group = mpi_group(&job, &GangScheduler::Volcano, false);
    assert_eq!(
        group["spec"],
        yaml(
            r"
minMember: 3
minResources:
  nvidia.com/gpu: '2'
"
        ),
        "launcherCreationPolicy AtStartup: the launcher counts before it exists"
    );
    let mut waiting = serde_json::to_value(&job).unwrap();
    waiting["spec"]["launcherCreationPolicy"] = json!("WaitForWorkersReady");
    let waiting: MPIJob = serde_json::from_value(waiting).unwrap();
    assert_eq!(
        mpi_group(&waiting, &GangScheduler::Volcano, false)["spec"]["minMember"],
        2,
        "WaitForWorkersReady: a gang that counted the launcher would never form"
    );
    assert_eq!(
        mpi_group(&waiting, &GangScheduler::Volcano, true)["spec"]["minMember"],
        3
    );
}

/// Worker 0 of the elastic job, built for `gang`, as JSON.
fn worker_for(gang: Option<&GangScheduler>) -> Value {
    let job = elastic_training_job();
    let spec = training_job::validation::validate(&job).unwrap();
    let job = JobContext {
        job_ref: JobRef::new(&job),
        spec: &spec,
        run: 1,
        notice: None,
        gang,
    };
    serde_json::to_value(job.worker_pod(0, &[])).unwrap()
}

#[test]
fn pods_join_the_group_of_their_scheduler() {
    let pod = worker_for(Some(&GangScheduler::Volcano));
    assert_eq!(
        pod["metadata"]["annotations"][VOLCANO_GROUP_ANNOTATION],
        "mnist"
    );
    assert_eq!(pod["spec"]["schedulerName"], "volcano");
    assert_eq!(
        pod["metadata"]["annotations"][VOLCANO_PREEMPTABLE_ANNOTATION], "true",
        "Volcano may preempt a worker above the job's minimum"
    );

    let pod = worker_for(Some(&coscheduling()));
    assert_eq!(pod["metadata"]["labels"][COSCHEDULING_GROUP_LABEL], "mnist");
    assert_eq!(pod["spec"]["schedulerName"], "scheduler-plugins-scheduler");

    let job = elastic_training_job();
    let mut metadata = ObjectMeta::default();
    let mut named = PodSpec {
        scheduler_name: Some("my-scheduler".into()),
        ..PodSpec::default()
    };
    join(
        &mut metadata,
        &mut named,
        JobRef::new(&job),
        &GangScheduler::Volcano,
        false,
    );
    assert_eq!(
        metadata
            .annotations
            .unwrap_or_default()
            .get(VOLCANO_PREEMPTABLE_ANNOTATION),
        None,
        "only workers may be preempted"
    );
    assert_eq!(
        named.scheduler_name.as_deref(),
        Some("my-scheduler"),
        "a scheduler the template names is kept"
    );
}

#[test]
fn without_a_gang_scheduler_pods_are_left_to_the_default_scheduler() {
    let pod = worker_for(None);
    assert_eq!(pod["spec"].get("schedulerName"), None);
    assert_eq!(
        pod["metadata"]["annotations"].get(VOLCANO_GROUP_ANNOTATION),
        None
    );
}
