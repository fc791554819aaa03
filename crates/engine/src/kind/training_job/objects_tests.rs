//! The shape of a TrainingJob's objects, against what et-operator creates.

use eto_api::TrainingJob;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::launcher::launcher_pod;
use super::objects::{launcher_role, launcher_role_binding, worker_pod, worker_service};
use super::validation::validate;
use crate::job::JobContext;
use crate::job::JobRef;
use crate::testing::{training_job, worker_container};

fn with_spec<R>(job: &TrainingJob, build: impl FnOnce(JobContext<'_>) -> R) -> R {
    let spec = validate(job).expect("the fixture is valid");
    build(JobContext {
        job_ref: JobRef::new(job),
        spec: &spec,
        run: 2,
        notice: None,
        gang: None,
    })
}

fn json_of<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("objects serialize")
}

#[test]
fn workers_get_identity_ssh_and_sshd() {
    let mut job = training_job();
    job.spec.et_replica_specs.worker.template.metadata = Some(
        serde_json::from_value(
            json!({"labels": {"app": "etjob", "release": "mnist"}, "annotations": {"team": "ml"}}),
        )
        .unwrap(),
    );
    let pod = json_of(&with_spec(&job, |job| worker_pod(job, 7, &[])));
    assert_eq!(pod["metadata"]["name"], "mnist-worker-7");
    assert_eq!(
        pod["metadata"]["labels"],
        json!({
            "app": "etjob", "release": "mnist",
            "group-name": "kai.alibabacloud.com", "training-job-name": "mnist", "training-job-role": "worker",
            "replica-index": "7", "app.kubernetes.io/managed-by": "eto", "eto.dev/run": "2"
        })
    );
    assert_eq!(pod["metadata"]["annotations"], json!({"team": "ml"}));
    assert_eq!(pod["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(
        (spec["hostname"].as_str(), spec["subdomain"].as_str()),
        (Some("mnist-worker-7"), Some("mnist-workers"))
    );
    // sshd, under eto's PID 1 (see crate::builders::termination), with the grace period.
    assert_eq!(
        command_of(&spec["containers"][0]),
        json!(crate::builders::SSHD_COMMAND)
    );
    assert_eq!(spec["terminationGracePeriodSeconds"], 300);
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([
            {"name": "eto-ssh", "mountPath": "/root/.ssh/id_rsa", "subPath": "id_rsa", "readOnly": true},
            {"name": "eto-ssh", "mountPath": "/root/.ssh/id_rsa.pub", "subPath": "id_rsa.pub", "readOnly": true},
            {"name": "eto-ssh", "mountPath": "/root/.ssh/authorized_keys", "subPath": "authorized_keys", "readOnly": true},
            {"name": "eto-ssh", "mountPath": "/root/.ssh/config", "subPath": "config", "readOnly": true},
            {"name": "eto-notice", "mountPath": "/etc/edl", "readOnly": true}
        ])
    );
    assert_eq!(spec["volumes"][0]["secret"]["secretName"], "mnist-ssh");
    assert_eq!(spec["volumes"][0]["secret"]["defaultMode"], 0o600);
    let items: Vec<&str> = spec["volumes"][0]["secret"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["path"].as_str().unwrap())
        .collect();
    assert_eq!(items, ["id_rsa", "id_rsa.pub", "authorized_keys", "config"]);
}

#[test]
fn a_worker_command_from_the_template_is_kept() {
    let mut job = training_job();
    worker_container(&mut job).command = Some(vec!["my-sshd".into()]);
    let pod = json_of(&with_spec(&job, |job| worker_pod(job, 0, &[])));
    assert_eq!(
        command_of(&pod["spec"]["containers"][0]),
        json!(["my-sshd"])
    );
}

/// The command of `container` as its template or eto gave it, eto's PID 1 taken away.
fn command_of(container: &serde_json::Value) -> serde_json::Value {
    let command = container["command"].as_array().unwrap();
    assert_eq!(command[..2], [json!("/bin/sh"), json!("-c")]);
    assert_eq!(
        command[2].as_str(),
        Some(crate::builders::termination::SCRIPT),
        "run under eto's PID 1"
    );
    json!(command[4..])
}

#[test]
fn the_launcher_reads_discovery_from_its_annotation_and_the_config_map() {
    let pod = json_of(&with_spec(&training_job(), |job| {
        launcher_pod(job, "a:1\n", "a slots=1\n", &[])
    }));
    assert_eq!(pod["metadata"]["name"], "mnist-launcher");
    assert_eq!(pod["metadata"]["labels"]["training-job-role"], "launcher");
    assert_eq!(
        pod["metadata"]["annotations"],
        json!({"eto.dev/hostfile": "a:1\n", "eto.dev/deepspeed-hostfile": "a slots=1\n"})
    );
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "mnist-launcher");
    assert_eq!(spec["restartPolicy"], "Never");
    let discovery = &spec["volumes"][1]["projected"]["sources"];
    assert_eq!(
        discovery[0]["configMap"],
        json!({"name": "mnist-config", "items": [{"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}]})
    );
    assert_eq!(
        discovery[1]["downwardAPI"]["items"][0],
        json!({"path": "hostfile", "fieldRef": {"fieldPath": "metadata.annotations['eto.dev/hostfile']"}, "mode": 0o444})
    );
    let mounts: Vec<&str> = spec["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert_eq!(
        mounts,
        [
            "/root/.ssh/id_rsa",
            "/root/.ssh/id_rsa.pub",
            "/root/.ssh/authorized_keys",
            "/root/.ssh/config",
            "/etc/edl",
            "/job"
        ]
    );
    assert_eq!(
        spec["containers"][0]["env"],
        json!([
            {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
            {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/edl/hostfile"},
            {"name": "ETO_RESUME", "value": "false"},
            {"name": "ETO_TERMINATION_GRACE_SECONDS", "value": "300"}
        ])
    );
    assert_eq!(
        command_of(&spec["containers"][0])[0],
        "horovodrun",
        "the launcher's command is the user's"
    );
}

#[test]
fn the_launcher_may_read_only_its_config_map() {
    let role = with_spec(&training_job(), launcher_role);
    assert_eq!(
        serde_json::to_value(&role.rules).unwrap(),
        json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mnist-config"], "verbs": ["get", "watch"]}])
    );
    let binding = serde_json::to_value(with_spec(&training_job(), launcher_role_binding)).unwrap();
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mnist-launcher"})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "mnist-launcher", "namespace": "default"}])
    );
}

#[test]
fn the_worker_service_is_headless_and_publishes_unready_workers() {
    let service = serde_json::to_value(with_spec(&training_job(), worker_service)).unwrap();
    assert_eq!(service["metadata"]["name"], "mnist-workers");
    assert_eq!(
        service["spec"],
        json!({"clusterIP": "None", "publishNotReadyAddresses": true, "selector": {"training-job-name": "mnist", "training-job-role": "worker"}})
    );
}

#[test]
fn a_provided_ssh_secret_is_mounted_instead_of_the_generated_one() {
    let mut job = training_job();
    job.metadata.annotations = Some(
        [(
            "arena.kubeflow.org/ssh-secret".to_string(),
            "team-keys".to_string(),
        )]
        .into(),
    );
    let pod = json_of(&with_spec(&job, |job| worker_pod(job, 0, &[])));
    assert_eq!(
        pod["spec"]["volumes"][0]["secret"]["secretName"],
        "team-keys"
    );
}

#[test]
fn every_pod_shows_the_notice_in_etc_edl_and_a_resumed_launcher_knows_it() {
    use eto_api::job_status::{Notice, NoticeKind};
    let job = training_job();
    let spec = validate(&job).expect("the fixture is valid");
    let resume = Notice {
        kind: NoticeKind::Resume,
        reason: "BelowMinWorkers".into(),
        since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        ),
        deadline: None,
        message: "resumed".into(),
    };
    let resumed = JobContext {
        job_ref: JobRef::new(&job),
        spec: &spec,
        run: 3,
        notice: Some(&resume),
        gang: None,
    };
    let worker = json_of(&worker_pod(resumed, 0, &[]));
    let notice = worker["metadata"]["annotations"]["eto.dev/notice"]
        .as_str()
        .unwrap();
    assert_eq!(serde_json::from_str::<Notice>(notice).unwrap(), resume);
    let volume = worker["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "eto-notice")
        .unwrap();
    assert_eq!(
        volume["downwardAPI"]["items"],
        json!([{"path": "notice", "fieldRef": {"fieldPath": "metadata.annotations['eto.dev/notice']"}, "mode": 0o444}])
    );
    assert!(
        worker["spec"]["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "eto-notice", "mountPath": "/etc/edl", "readOnly": true}))
    );

    let launcher = json_of(&launcher_pod(resumed, "", "", &[]));
    assert!(launcher["metadata"]["annotations"]["eto.dev/notice"].is_string());
    let env = &launcher["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "ETO_RESUME", "value": "true"}))
    );
    let projected = launcher["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "eto-discovery")
        .unwrap();
    assert_eq!(
        projected["projected"]["sources"][1]["downwardAPI"]["items"][1]["path"],
        "notice"
    );

    let first = json_of(&launcher_pod(
        JobContext {
            notice: None,
            ..resumed
        },
        "",
        "",
        &[],
    ));
    let env = &first["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "ETO_RESUME", "value": "false"}))
    );
    assert!(
        first["metadata"]["annotations"]
            .get("eto.dev/notice")
            .is_none()
    );
}
