//! Every example under `examples/` and `examples/horovod/` is accepted, and every example
//! under `examples/invalid/` is rejected with an error that names the field it breaks.
//!
//! An object counts as rejected when the API server would reject it at admission (its CRD's
//! structural schema, with unknown fields treated as strict `kubectl apply` does, and its CEL
//! rules, as eto-sim evaluates them), when it cannot be decoded into eto's types, or when eto's
//! own validation rejects it (what the controller reports on the object).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use eto_api::{ClusterTrainingRuntime, ScaleIn, ScaleOut, TrainingJob};
use eto_engine::job::{Kind, Referenced};
use eto_engine::kind::OwnedJob;
use eto_sim::schema::CompiledCrdSchema;
use eto_tests::{crd_of_kind, schema_of, workspace_root};

/// The compiled schemas of eto's kinds, as the API server holds them.
struct Admission(BTreeMap<String, CompiledCrdSchema>);

impl Admission {
    fn new() -> Self {
        let kinds = [
            "TrainingJob",
            "MPIJob",
            "PyTorchJob",
            "TrainJob",
            "ClusterTrainingRuntime",
            "ScaleIn",
            "ScaleOut",
        ];
        Self(
            kinds
                .iter()
                .map(|kind| {
                    let schema = CompiledCrdSchema::compile(schema_of(&crd_of_kind(kind)));
                    (kind.to_string(), schema.expect("the CRD's rules compile"))
                })
                .collect(),
        )
    }
}

/// Every error the API server or eto reports for `object`, as `field: message` lines.
fn rejections(admission: &Admission, object: &serde_json::Value) -> Vec<String> {
    let kind = object["kind"].as_str().expect("every example has a kind");
    let schema = &admission.0[kind];
    let mut admitted = object.clone();
    let mut errors: Vec<String> = schema
        .normalize(&mut admitted)
        .into_iter()
        .map(|field| format!("{field}: unknown field"))
        .collect();
    errors.extend(
        schema
            .validate(&admitted, None)
            .iter()
            .map(|cause| format!("{}: {}", cause.field, cause.message)),
    );
    let served = Kind::ALL
        .into_iter()
        .find(|served| served.vocabulary().name == kind);
    // A TrainJob's runtime is the example of that name in examples/trainjob/.
    let runtime = served
        .and_then(|served| served.reference(object))
        .map(|reference| {
            let path = workspace_root()
                .join("examples/trainjob")
                .join(format!("{}.yaml", reference.name));
            match std::fs::read_to_string(&path) {
                Ok(text) => Referenced::Found(serde_saphyr::from_str(&text).expect("a runtime")),
                Err(_) => Referenced::Missing,
            }
        });
    let decoded = match (served, kind) {
        (Some(served), _) => OwnedJob::parse(served, admitted, runtime.as_ref()).map(|job| {
            if let Err(invalid) = job.as_ref().validate() {
                errors.extend(invalid.errors.iter().map(ToString::to_string));
            }
        }),
        (None, "ScaleIn") => eto_engine::parse::parse::<ScaleIn>(admitted).map(drop),
        (None, "ScaleOut") => eto_engine::parse::parse::<ScaleOut>(admitted).map(drop),
        (None, "ClusterTrainingRuntime") => {
            eto_engine::parse::parse::<ClusterTrainingRuntime>(admitted).map(drop)
        }
        (None, other) => panic!("examples hold no {other}"),
    };
    if let Err(error) = decoded {
        errors.push(error.to_string());
    }
    errors
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no examples in {}", dir.display());
    files
}

fn load(path: &Path) -> (String, serde_json::Value) {
    let text = fs::read_to_string(path).unwrap();
    let object = serde_saphyr::from_str(&text)
        .unwrap_or_else(|error| panic!("{} is not YAML: {error}", path.display()));
    (text, object)
}

#[test]
fn every_example_is_accepted() {
    let admission = Admission::new();
    let examples = workspace_root().join("examples");
    let files = yaml_files(&examples)
        .into_iter()
        .chain(yaml_files(&examples.join("horovod")))
        .chain(yaml_files(&examples.join("trainjob")));
    for path in files {
        let (_, object) = load(&path);
        if object["kind"] == "PersistentVolumeClaim" {
            // The checkpoint volume the Horovod examples mount: not one of eto's kinds.
            continue;
        }
        let errors = rejections(&admission, &object);
        assert!(
            errors.is_empty(),
            "{} is rejected: {errors:#?}",
            path.display()
        );
    }
}

#[test]
fn every_invalid_example_is_rejected_naming_the_field_it_breaks() {
    let admission = Admission::new();
    for path in yaml_files(&workspace_root().join("examples/invalid")) {
        let (text, object) = load(&path);
        let field = text
            .lines()
            .find_map(|line| line.strip_prefix("# breaks: "))
            .unwrap_or_else(|| panic!("{} has no `# breaks: <field>` line", path.display()));
        let errors = rejections(&admission, &object);
        assert!(!errors.is_empty(), "{} is accepted", path.display());
        for error in &errors {
            assert!(
                error.contains(field),
                "{}: error {error:?} does not name {field}",
                path.display()
            );
        }
    }
}

#[test]
fn the_arena_example_keeps_what_arena_renders() {
    let (_, object) = load(&workspace_root().join("examples/arena-etjob.yaml"));
    let job: TrainingJob = eto_engine::parse::parse(object).unwrap();
    let spec = eto_engine::job::JobRef::new(&job).validate().unwrap();
    assert_eq!(
        (spec.workers.desired, spec.workers.min, spec.workers.max),
        (8, 1, Some(128))
    );
    assert_eq!(spec.slots_per_worker, 1, "slots come from --gpus=1");
    assert_eq!(
        spec.elastic.max_wait,
        Some(std::time::Duration::from_secs(600)),
        "from --max-wait-time=600"
    );
    assert_eq!(spec.backoff_limit, 3);
    let worker = &job.spec.et_replica_specs.worker.template;
    let container = &worker.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.name, "et");
    assert_eq!(
        container.command, None,
        "Arena leaves the worker command to the operator"
    );
}
