//! `crds/` holds exactly the CRDs that `eto_api::crds()` generates, and they install cleanly.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use eto_tests::{schema_of, workspace_root};

const REGENERATE: &str = "UPDATE_CRDS=1 cargo test -p eto-tests --test integration crds_fresh";

/// Size limit of the `kubectl.kubernetes.io/last-applied-configuration` annotation that
/// client-side `kubectl apply` writes.
const LAST_APPLIED_LIMIT: usize = 262_144;

fn generated() -> BTreeMap<String, String> {
    eto_api::crds()
        .iter()
        .map(|crd| {
            let yaml = eto_api::crd_yaml(crd).expect("CRDs serialize to YAML");
            (eto_api::crd_file_name(crd), yaml)
        })
        .collect()
}

/// Directories that hold the generated CRDs: `crds/` and the Helm chart's copy.
const CRD_DIRS: [&str; 2] = ["crds", "charts/eto/crds"];

fn rewrite(dir: &Path, expected: &BTreeMap<String, String>) {
    fs::create_dir_all(dir).unwrap();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "yaml") {
            fs::remove_file(path).unwrap();
        }
    }
    for (name, yaml) in expected {
        fs::write(dir.join(name), yaml).unwrap();
    }
}

fn committed(dir: &Path) -> BTreeMap<String, String> {
    fs::read_dir(dir)
        .unwrap_or_else(|error| {
            panic!("cannot read {}: {error}; run `{REGENERATE}`", dir.display())
        })
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read_to_string(&path).unwrap(),
            )
        })
        .collect()
}

#[test]
fn committed_crds_match_the_api_types() {
    let expected = generated();
    for dir in CRD_DIRS.map(|dir| workspace_root().join(dir)) {
        if std::env::var_os("UPDATE_CRDS").is_some() {
            rewrite(&dir, &expected);
            continue;
        }
        let committed = committed(&dir);
        let stale: std::collections::BTreeSet<&String> = expected
            .keys()
            .chain(committed.keys())
            .filter(|name| expected.get(*name) != committed.get(*name))
            .collect();
        assert!(
            stale.is_empty(),
            "{} is out of date with the types in crates/api ({stale:?}); regenerate it with `{REGENERATE}` and commit the result",
            dir.display()
        );
    }
}

#[test]
fn crds_fit_in_the_annotation_of_client_side_apply() {
    for crd in eto_api::crds() {
        let json = serde_json::to_string(&crd).unwrap();
        assert!(
            json.len() < LAST_APPLIED_LIMIT,
            "{} is {} bytes as JSON; plain `kubectl apply` would fail",
            crd.metadata.name.unwrap_or_default(),
            json.len()
        );
    }
}

#[test]
fn every_cel_rule_compiles() {
    for crd in eto_api::crds() {
        let compiled = kube_cel::compile_schema(&schema_of(&crd));
        let errors: Vec<String> = compiled
            .compilation_errors()
            .iter()
            .map(|error| format!("{error:?}"))
            .collect();
        assert!(
            errors.is_empty(),
            "{}: {errors:#?}",
            crd.metadata.name.unwrap_or_default()
        );
    }
}

#[test]
fn the_operator_prints_every_committed_crd() {
    let stream = eto_api::crds_yaml().unwrap();
    for yaml in generated().values() {
        assert!(stream.contains(yaml.as_str()));
    }
    assert_eq!(stream.matches("\n---\n").count() + 1, generated().len());
}
