//! The CRD features users and tools rely on: names, columns, subresources and schema shape.

use kube::CustomResourceExt;

use crate::testing::{crd, schema};
use crate::{MPIJob, PyTorchJob, ScaleIn, ScaleOut, TrainingJob, crds};

fn column_names<K: CustomResourceExt>() -> Vec<String> {
    let crd = crd::<K>();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default();
    columns.into_iter().map(|column| column.name).collect()
}

/// The spec, status and selector paths of `K`'s scale subresource.
fn scale_paths<K: CustomResourceExt>() -> [String; 3] {
    let crd = crd::<K>();
    let scale = crd.spec.versions[0]
        .subresources
        .clone()
        .unwrap()
        .scale
        .unwrap();
    [
        scale.spec_replicas_path,
        scale.status_replicas_path,
        scale.label_selector_path.unwrap_or_default(),
    ]
}

#[test]
fn training_jobs_answer_to_et_operator_names_and_short_names() {
    let crd = crd::<TrainingJob>();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("trainingjobs.kai.alibabacloud.com")
    );
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(
        crd.spec.names.short_names,
        Some(vec!["tj".into(), "etjob".into()])
    );
}

#[test]
fn printer_columns_show_phase_and_worker_counts() {
    assert_eq!(
        column_names::<TrainingJob>(),
        [
            "Phase", "Ready", "Pending", "Desired", "Min", "Max", "Restarts", "Age"
        ]
    );
    assert_eq!(column_names::<ScaleIn>(), ["Job", "Phase", "Age"]);
    assert_eq!(column_names::<ScaleOut>(), ["Job", "Phase", "Age"]);
}

#[test]
fn the_scale_subresource_resizes_the_workers() {
    let crd = crd::<TrainingJob>();
    let subresources = crd.spec.versions[0].subresources.clone().unwrap();
    assert!(subresources.status.is_some());
    let scale = subresources.scale.unwrap();
    assert_eq!(
        scale.spec_replicas_path,
        ".spec.etReplicaSpecs.worker.replicas"
    );
    assert_eq!(
        scale.status_replicas_path,
        ".status.replicaStatuses.Worker.active"
    );
    assert_eq!(
        scale.label_selector_path.as_deref(),
        Some(".status.selector")
    );
}

#[test]
fn conditions_are_a_list_keyed_by_type() {
    // Every resource with a status (the runtimes have none).
    for crd in crds()
        .into_iter()
        .filter(|crd| !schema(crd)["properties"]["status"].is_null())
    {
        let conditions = &schema(&crd)["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"])
        );
    }
}

#[test]
fn pod_templates_are_validated_but_carry_no_upstream_prose() {
    let schema = schema(&crd::<TrainingJob>());
    let template = &schema["properties"]["spec"]["properties"]["etReplicaSpecs"]["properties"]["worker"]
        ["properties"]["template"];
    assert!(
        template["description"]
            .as_str()
            .unwrap()
            .starts_with("Pod template of the workers.")
    );
    let pod = &template["properties"]["spec"];
    assert_eq!(pod["required"], serde_json::json!(["containers"]));
    assert!(pod.get("description").is_none());
    assert!(
        template
            .get("x-kubernetes-preserve-unknown-fields")
            .is_none()
    );
    let container = &pod["properties"]["containers"]["items"];
    assert_eq!(container["properties"]["image"]["type"], "string");
    assert!(
        container["properties"]["image"]
            .get("description")
            .is_none()
    );
}

#[test]
fn field_descriptions_are_the_fields_own_reflowed_prose() {
    let schema = schema(&crd::<TrainingJob>());
    let spec = &schema["properties"]["spec"]["properties"];
    let clean_pod_policy = spec["cleanPodPolicy"]["description"].as_str().unwrap();
    assert!(clean_pod_policy.starts_with("Which pods are deleted when the job succeeds"));
    assert!(!clean_pod_policy.contains('\n'));
    assert_eq!(
        spec["restartPolicy"]["enum"],
        serde_json::json!(["Never", "OnFailure"])
    );
    assert_eq!(spec["restartPolicy"]["default"], "Never");
    assert_eq!(spec["backoffLimit"]["default"], 6);
}

#[test]
fn mpi_jobs_answer_to_mpi_operators_names_with_columns_and_a_scale_subresource() {
    let crd = crd::<MPIJob>();
    assert_eq!(crd.metadata.name.as_deref(), Some("mpijobs.kubeflow.org"));
    assert_eq!(crd.spec.versions[0].name, "v2beta1");
    assert_eq!(crd.spec.names.short_names, Some(vec!["mpij".into()]));
    assert_eq!(
        column_names::<MPIJob>(),
        ["State", "Ready", "Pending", "Desired", "Age"]
    );
    assert_eq!(
        scale_paths::<MPIJob>(),
        [
            ".spec.mpiReplicaSpecs.Worker.replicas",
            ".status.replicaStatuses.Worker.active",
            ".status.replicaStatuses.Worker.selector"
        ]
    );
}

#[test]
fn mpi_job_fields_have_mpi_operators_defaults_and_open_strings() {
    let schema = schema(&crd::<MPIJob>());
    let spec = &schema["properties"]["spec"]["properties"];
    assert_eq!(
        schema["properties"]["spec"]["required"],
        serde_json::json!(["mpiReplicaSpecs"])
    );
    for (field, default) in [
        ("slotsPerWorker", serde_json::json!(1)),
        ("runLauncherAsWorker", serde_json::json!(false)),
        ("sshAuthMountPath", serde_json::json!("/root/.ssh")),
        ("launcherCreationPolicy", serde_json::json!("AtStartup")),
        ("mpiImplementation", serde_json::json!("OpenMPI")),
    ] {
        assert_eq!(spec[field]["default"], default, "{field}");
    }
    assert_eq!(
        spec["mpiImplementation"]["enum"],
        serde_json::json!(["OpenMPI", "Intel", "MPICH"])
    );
    // Values mpi-operator's CRD accepts are accepted; eto reports unknown ones on the job.
    let replica = &spec["mpiReplicaSpecs"]["additionalProperties"]["properties"];
    assert!(replica["restartPolicy"].get("enum").is_none());
    assert!(spec["launcherCreationPolicy"].get("enum").is_none());
    let run_policy = &spec["runPolicy"]["properties"];
    assert!(run_policy["cleanPodPolicy"].get("enum").is_none());
    assert_eq!(run_policy["suspend"]["default"], false);
    assert!(
        replica["restartPolicy"]["description"]
            .as_str()
            .unwrap()
            .contains("ExitCode")
    );
}

#[test]
fn pytorch_jobs_answer_to_training_operators_names_columns_and_scale_subresource() {
    let crd = crd::<PyTorchJob>();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("pytorchjobs.kubeflow.org")
    );
    assert_eq!(crd.spec.versions[0].name, "v1");
    assert_eq!(crd.spec.names.singular.as_deref(), Some("pytorchjob"));
    assert_eq!(crd.spec.names.short_names, None);
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap();
    let state = &columns[0];
    assert_eq!(
        (state.name.as_str(), state.json_path.as_str()),
        ("State", ".status.conditions[-1:].type")
    );
    assert_eq!(
        column_names::<PyTorchJob>(),
        ["State", "Ready", "Pending", "Desired", "Quorum", "Age"]
    );
    assert_eq!(
        scale_paths::<PyTorchJob>(),
        [
            ".spec.pytorchReplicaSpecs.Worker.replicas",
            ".status.replicaStatuses.Worker.active",
            ".status.replicaStatuses.Worker.selector"
        ]
    );
}

#[test]
fn pytorch_job_fields_keep_v1s_open_strings_and_write_no_defaults_but_suspend() {
    let schema = schema(&crd::<PyTorchJob>());
    let spec = &schema["properties"]["spec"]["properties"];
    assert_eq!(
        schema["properties"]["spec"]["required"],
        serde_json::json!(["pytorchReplicaSpecs"])
    );
    let replica = &spec["pytorchReplicaSpecs"]["additionalProperties"]["properties"];
    assert!(replica["restartPolicy"].get("enum").is_none());
    assert!(replica["replicas"].get("default").is_none());
    assert!(spec["nprocPerNode"].get("default").is_none());
    let run_policy = &spec["runPolicy"]["properties"];
    assert!(run_policy["cleanPodPolicy"].get("enum").is_none());
    assert!(run_policy["cleanPodPolicy"].get("default").is_none());
    assert_eq!(run_policy["suspend"]["default"], false);
    let elastic = &spec["elasticPolicy"]["properties"];
    for field in [
        "minReplicas",
        "maxReplicas",
        "rdzvBackend",
        "rdzvHost",
        "rdzvPort",
        "rdzvId",
        "rdzvConf",
        "standalone",
        "nProcPerNode",
        "maxRestarts",
        "metrics",
    ] {
        assert!(elastic.get(field).is_some(), "elasticPolicy.{field}");
    }
    let status = &schema["properties"]["status"]["properties"];
    for field in [
        "conditions",
        "replicaStatuses",
        "startTime",
        "completionTime",
        "lastReconcileTime",
        "phase",
        "run",
        "targetWorkers",
    ] {
        assert!(status.get(field).is_some(), "status.{field}");
    }
}
