//! The shape of an MPIJob's objects, against what mpi-operator creates.

use eto_api::MPIJob;
use eto_api::mpi_job::{MpiImplementation, WORKER};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::objects::*;
use super::validation::validate as validate_mpi_job;
use crate::builders::ssh_secret;
use crate::effective_spec::MpiSettings;
use crate::job::JobContext;
use crate::job::JobRef;
use crate::testing::mpi_job;

fn with_spec<R>(job: &MPIJob, build: impl FnOnce(JobContext<'_>, &MpiSettings) -> R) -> R {
    let spec = validate_mpi_job(job).expect("the fixture is valid");
    let mpi = spec.mpi.clone().expect("an MPIJob has MPI settings");
    build(
        JobContext {
            job_ref: JobRef::new(job),
            spec: &spec,
            run: 1,
            notice: None,
            gang: None,
        },
        &mpi,
    )
}

fn json_of<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("objects serialize")
}

fn env(container: &Value) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|var| {
            (
                var["name"].as_str().unwrap().to_string(),
                var["value"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn workers_are_built_as_mpi_operator_builds_them() {
    let pod = json_of(&with_spec(&mpi_job(), |job, _| worker_pod(job, 3, &[])));
    assert_eq!(pod["metadata"]["name"], "pi-worker-3");
    assert_eq!(
        pod["metadata"]["labels"],
        json!({
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": "pi",
            "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-index": "3",
            "app.kubernetes.io/managed-by": "eto",
            "eto.dev/run": "1"
        })
    );
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "MPIJob");
    assert_eq!(
        pod["metadata"]["ownerReferences"][0]["apiVersion"],
        "kubeflow.org/v2beta1"
    );
    let spec = &pod["spec"];
    assert_eq!(
        (&spec["hostname"], &spec["subdomain"]),
        (&json!("pi-worker-3"), &json!("pi"))
    );
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(
        spec["dnsConfig"]["searches"],
        json!(["pi.default.svc.cluster.local"])
    );
    let container = &spec["containers"][0];
    assert_eq!(container["command"], json!(crate::builders::SSHD_COMMAND));
    assert_eq!(
        env(container),
        [("K_MPI_JOB_ROLE".to_string(), "worker".to_string())]
    );
    assert_eq!(
        container["volumeMounts"],
        json!([
            {"name": "eto-ssh", "mountPath": "/root/.ssh/id_rsa", "subPath": "id_rsa", "readOnly": true},
            {"name": "eto-ssh", "mountPath": "/root/.ssh/id_rsa.pub", "subPath": "id_rsa.pub", "readOnly": true},
            {"name": "eto-ssh", "mountPath": "/root/.ssh/authorized_keys", "subPath": "authorized_keys", "readOnly": true},
            {"name": "eto-notice", "mountPath": "/etc/edl", "readOnly": true}
        ])
    );
    assert_eq!(
        spec["volumes"][0],
        json!({"name": "eto-ssh", "secret": {"secretName": "pi-ssh", "defaultMode": 0o600, "items": [
            {"key": "ssh-privatekey", "path": "id_rsa"},
            {"key": "ssh-publickey", "path": "id_rsa.pub"},
            {"key": "ssh-publickey", "path": "authorized_keys"}
        ]}})
    );
}

#[test]
fn a_non_root_ssh_path_is_readable_and_only_the_first_container_gets_the_keys() {
    let mut job = mpi_job();
    job.spec.ssh_auth_mount_path = Some("/home/mpiuser/.ssh".into());
    let template = job
        .spec
        .mpi_replica_specs
        .get_mut(WORKER)
        .unwrap()
        .template
        .as_mut()
        .unwrap();
    let pod_spec = template.spec.as_mut().unwrap();
    pod_spec.containers[0].args = Some(vec!["--serve".into()]);
    pod_spec
        .containers
        .push(serde_json::from_value(json!({"name": "sidecar", "image": "s"})).unwrap());
    pod_spec.host_network = Some(true);
    let pod = json_of(&with_spec(&job, |job, _| worker_pod(job, 0, &[])));
    let spec = &pod["spec"];
    assert_eq!(spec["volumes"][0]["secret"].get("defaultMode"), None);
    assert_eq!(
        spec["containers"][0]["volumeMounts"][0]["mountPath"],
        "/home/mpiuser/.ssh/id_rsa"
    );
    // Arguments without a command run as the image's entry point.
    assert_eq!(spec["containers"][0].get("command"), None);
    assert_eq!(
        spec["containers"][1]["volumeMounts"],
        json!([{"name": "eto-notice", "mountPath": "/etc/edl", "readOnly": true}])
    );
    assert_eq!(spec["dnsPolicy"], "ClusterFirstWithHostNet");
}

#[test]
fn the_launcher_is_a_job_that_runs_one_pod_with_the_mpi_configuration() {
    let job = json_of(&with_spec(&mpi_job(), |job, mpi| {
        launcher_job(job, mpi, "pi-worker-0.pi.default.svc:1\n", &[])
    }));
    assert_eq!(job["metadata"]["name"], "pi-launcher");
    assert_eq!(
        job["metadata"]["labels"]["training.kubeflow.org/job-role"],
        "launcher"
    );
    assert_eq!(job["metadata"]["labels"]["eto.dev/run"], "1");
    assert_eq!(job["spec"]["backoffLimit"], 0);
    assert_eq!(job["spec"]["podReplacementPolicy"], "Failed");
    let template = &job["spec"]["template"];
    assert_eq!(
        template["metadata"]["annotations"],
        json!({"eto.dev/hostfile": "pi-worker-0.pi.default.svc:1\n"})
    );
    assert_eq!(
        template["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "eto"
    );
    let spec = &template["spec"];
    assert_eq!(
        (
            &spec["hostname"],
            &spec["subdomain"],
            &spec["restartPolicy"]
        ),
        (&json!("pi-launcher"), &json!("pi"), &json!("Never"))
    );
    let container = &spec["containers"][0];
    assert_eq!(
        env(container),
        [
            ("K_MPI_JOB_ROLE", "launcher"),
            ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
            ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
            ("OMPI_MCA_orte_set_default_slots", "1"),
            ("NVIDIA_VISIBLE_DEVICES", ""),
            ("NVIDIA_DRIVER_CAPABILITIES", ""),
            ("ETO_RESUME", "false"),
        ]
        .map(|(n, v)| (n.to_string(), v.to_string()))
    );
    assert_eq!(
        container["volumeMounts"],
        json!([
            {"name": "eto-ssh", "mountPath": "/root/.ssh/id_rsa", "subPath": "id_rsa", "readOnly": true},
            {"name": "eto-ssh", "mountPath": "/root/.ssh/id_rsa.pub", "subPath": "id_rsa.pub", "readOnly": true},
            {"name": "eto-ssh", "mountPath": "/root/.ssh/authorized_keys", "subPath": "authorized_keys", "readOnly": true},
            {"name": "eto-mpi-config", "mountPath": "/etc/mpi", "readOnly": true},
            {"name": "eto-notice", "mountPath": "/etc/edl", "readOnly": true}
        ])
    );
    let config = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "eto-mpi-config")
        .unwrap();
    assert_eq!(
        config["projected"]["sources"],
        json!([
            {"configMap": {"name": "pi-config", "items": [
                {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}
            ]}},
            {"downwardAPI": {"items": [{"path": "ready_hosts", "mode": 0o444,
                "fieldRef": {"fieldPath": "metadata.annotations['eto.dev/hostfile']"}}]}}
        ])
    );
}

#[test]
fn each_mpi_implementation_gets_its_environment() {
    let cases = [
        (
            MpiImplementation::Intel,
            vec![
                ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                (
                    "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS",
                    "-o ConnectionAttempts=10",
                ),
                ("I_MPI_PERHOST", "4"),
            ],
        ),
        (
            MpiImplementation::Mpich,
            vec![
                ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10"),
            ],
        ),
    ];
    for (implementation, expected) in cases {
        let mut job = mpi_job();
        job.spec.mpi_implementation = Some(implementation);
        job.spec.slots_per_worker = Some(4);
        job.spec.run_launcher_as_worker = Some(true);
        let launcher = json_of(&with_spec(&job, |job, mpi| launcher_job(job, mpi, "", &[])));
        let template = &launcher["spec"]["template"];
        let mut want = vec![("K_MPI_JOB_ROLE", "launcher")];
        want.extend(expected);
        want.push(("ETO_RESUME", "false"));
        assert_eq!(
            env(&template["spec"]["containers"][0]),
            want.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect::<Vec<_>>(),
            "{implementation:?}"
        );
        // The launcher trains too: it is index 0 and the workers count from 1.
        assert_eq!(
            template["metadata"]["labels"]["training.kubeflow.org/replica-index"],
            "0"
        );
        let worker = json_of(&with_spec(&job, |job, _| worker_pod(job, 0, &[])));
        assert_eq!(
            worker["metadata"]["labels"]["training.kubeflow.org/replica-index"],
            "1"
        );
    }
}

#[test]
fn the_template_environment_yields_to_the_operators_and_keeps_the_rest() {
    let mut job = mpi_job();
    let container = &mut job
        .spec
        .mpi_replica_specs
        .get_mut(eto_api::mpi_job::LAUNCHER)
        .unwrap()
        .template
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    container.env = Some(vec![
        serde_json::from_value(
            json!({"name": "OMPI_MCA_orte_default_hostfile", "value": "/tmp/h"}),
        )
        .unwrap(),
        serde_json::from_value(json!({"name": "TRAIN_STEPS", "value": "100"})).unwrap(),
    ]);
    let launcher = json_of(&with_spec(&job, |job, mpi| launcher_job(job, mpi, "", &[])));
    let vars = env(&launcher["spec"]["template"]["spec"]["containers"][0]);
    assert!(vars.contains(&("TRAIN_STEPS".into(), "100".into())));
    assert!(vars.contains(&(
        "OMPI_MCA_orte_default_hostfile".into(),
        "/etc/mpi/hostfile".into()
    )));
    assert_eq!(
        vars.iter()
            .filter(|(n, _)| n == "OMPI_MCA_orte_default_hostfile")
            .count(),
        1
    );
}

#[test]
fn the_service_selects_every_pod_and_the_config_map_holds_the_hostfile() {
    let service = json_of(&with_spec(&mpi_job(), |job, _| service(job)));
    assert_eq!(service["metadata"]["name"], "pi");
    assert_eq!(
        service["spec"],
        json!({"clusterIP": "None", "publishNotReadyAddresses": true, "selector": {
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": "pi"
        }})
    );
    let config = json_of(&with_spec(&mpi_job(), |job, _| {
        config_map(job, "pi-worker-0.pi.default.svc slots=1\n")
    }));
    assert_eq!(config["metadata"]["name"], "pi-config");
    assert_eq!(
        config["data"]["hostfile"],
        "pi-worker-0.pi.default.svc slots=1\n"
    );
    assert!(
        config["data"]["discover_hosts.sh"]
            .as_str()
            .unwrap()
            .contains("hostfile=/etc/mpi/ready_hosts\n")
    );
    let secret = json_of(&with_spec(&mpi_job(), |job, _| ssh_secret(job)));
    assert_eq!(secret["metadata"]["name"], "pi-ssh");
    assert_eq!(secret["type"], "kubernetes.io/ssh-auth");
}
