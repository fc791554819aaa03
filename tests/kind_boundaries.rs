//! A kind of job lives in its own module. The shared code (the engine's rules, the
//! controller, the binaries, eto-sim) reaches what differs between kinds through `Kind`,
//! `JobRef`, the kind's `Vocabulary` and its `ServedJob`, and does not name a kind's module (`training_job`,
//! `mpi_job`, `pytorch_job`, in `eto_engine::kind` or in `eto_api`). The places that still do
//! are listed below with what they name; a new one fails here. Nor does it name a kind's API
//! type, a kind's coordinator or a word of one kind's shapes in its code: the files that still
//! do are listed too, and the list only shrinks. docs/development.md's "Adding a kind" lists
//! the touch points a new kind has.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use eto_engine::job::Kind;
use eto_tests::rust_source::code_only;
use eto_tests::workspace_root;

/// Shared source files allowed to name a kind's module, with the one module path each names.
const ALLOWED: &[(&str, &str)] = &[
    // The shared spec's enums, defined by the API that introduced them.
    (
        "crates/engine/src/effective_spec.rs",
        "eto_api::training_job::JobRestartPolicy",
    ),
    (
        "crates/engine/src/effective_spec.rs",
        "eto_api::mpi_job::MpiImplementation",
    ),
    (
        "crates/engine/src/discovery.rs",
        "eto_api::mpi_job::MpiImplementation",
    ),
    (
        "crates/engine/src/plan/run/outcome.rs",
        "eto_api::training_job::JobRestartPolicy",
    ),
];

/// The modules that hold one kind each: the folders under the engine's `kind/` (the API
/// crate names its modules the same).
static KIND_MODULES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut modules: Vec<String> =
        std::fs::read_dir(workspace_root().join("crates/engine/src/kind"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.is_dir())
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
    modules.sort();
    modules
});

/// Whether `path` (relative to the workspace) is shared product code: not the API crate
/// (a module per kind), not a kind's own module, not a test, a benchmark or test support.
fn is_shared_code(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or_default();
    !(path.starts_with("crates/api/")
        || path.starts_with("crates/engine/src/kind/")
        || path.contains("/tests/")
        || path.contains("/benches/")
        || file.ends_with("_tests.rs")
        || ["tests.rs", "testing.rs", "mock_tests.rs", "properties.rs"].contains(&file))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Every shared source file (see [`is_shared_code`]): its path in the workspace, and its text.
fn shared_sources() -> Vec<(String, String)> {
    let root = workspace_root();
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    files
        .into_iter()
        .filter_map(|file| {
            let relative = file
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            is_shared_code(&relative).then(|| (relative, std::fs::read_to_string(&file).unwrap()))
        })
        .collect()
}

/// The module paths naming a kind's module in `line` (code, not a comment): each from its
/// first segment to the item named, `pytorch_job::rendezvous` or
/// `eto_api::mpi_job::MpiImplementation`.
fn kind_paths(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or_default();
    let mut paths = Vec::new();
    for module in KIND_MODULES.iter() {
        let needle = format!("{module}::");
        let mut from = 0;
        while let Some(at) = code[from..].find(&needle) {
            let start = from + at;
            from = start + needle.len();
            let prefix_start = code[..start]
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(0, |i| i + 1);
            let end = code[from..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |i| from + i);
            let path = code[prefix_start..end]
                .trim_start_matches("crate::kind::")
                .trim_start_matches("eto_engine::kind::")
                .trim_end_matches(':')
                .split("::{")
                .next()
                .unwrap_or_default()
                .to_string();
            paths.push(path);
        }
    }
    paths
}

#[test]
fn shared_code_names_no_kind_module_but_where_listed() {
    let mut named = Vec::new();
    for (relative, text) in shared_sources() {
        for (number, line) in text.lines().enumerate() {
            for path in kind_paths(line) {
                let allowed = ALLOWED
                    .iter()
                    .any(|(place, what)| *place == relative && path.starts_with(what));
                if !allowed {
                    named.push(format!("{relative}:{}: {path}", number + 1));
                }
            }
        }
    }
    assert!(
        named.is_empty(),
        "shared code names a kind's module; reach the kind through Kind, JobRef, its ServedJob or its \
         Vocabulary instead:\n{}",
        named.join("\n")
    );
}

#[test]
fn every_allowed_place_still_names_its_kind_module() {
    let root = workspace_root();
    for (place, what) in ALLOWED {
        let text = std::fs::read_to_string(root.join(place)).unwrap();
        assert!(
            text.lines()
                .flat_map(kind_paths)
                .any(|path| path.starts_with(what)),
            "{place} no longer names {what}: take it off the list"
        );
    }
}

#[test]
fn module_paths_are_read_from_code_not_comments() {
    assert_eq!(
        kind_paths("use crate::kind::pytorch_job::rendezvous::{self, HostedRendezvous};"),
        ["pytorch_job::rendezvous"]
    );
    assert_eq!(
        kind_paths("    let x = eto_api::mpi_job::MpiImplementation::Intel; // mpi_job::x"),
        ["eto_api::mpi_job::MpiImplementation::Intel"]
    );
    assert!(kind_paths("/// see [`crate::kind::training_job`]").is_empty());
}

/// Shared files that still name a kind's API type (`PyTorchJob`, ...), a kind's coordinator
/// (`MASTER_POD`, ...) or one of a kind's shapes in their code (TorchFT's
/// Lighthouse and quorum, replica groups, torchrun's rendezvous and its re-forming): what of
/// the kinds is left outside their modules. A file not listed fails; a listed file that no
/// longer names any must leave the list, so that it only shrinks.
const SHAPES_OUTSIDE_THEIR_KIND: &[&str] = &[
    // The demo runs a TrainingJob.
    "crates/demo/src/main.rs",
    // The job model's report types: what a coordinator reports of its groups.
    "crates/engine/src/group_report.rs",
    // The engine's status, with eto's status fields every kind shares.
    "crates/engine/src/status.rs",
];

/// The API types of the kinds: each registered kind's type, its spec and its status.
static KIND_TYPES: LazyLock<Vec<String>> = LazyLock::new(|| {
    Kind::ALL
        .iter()
        .flat_map(|kind| {
            let name = kind.vocabulary().name;
            [
                name.to_string(),
                format!("{name}Spec"),
                format!("{name}Status"),
            ]
        })
        .collect()
});

/// The coordinators the kinds define: each `pub const <NAME>: Coordinator` in a kind's module.
static KIND_COORDINATORS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates/engine/src/kind"), &mut files);
    files
        .iter()
        .flat_map(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .filter_map(|line| {
                    let constant = line.trim().strip_prefix("pub const ")?;
                    let (name, rest) = constant.split_once(':')?;
                    rest.trim_start()
                        .starts_with("Coordinator =")
                        .then(|| name.trim().to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
});

/// Words of one kind's shapes, as they appear in identifiers (any case).
const SHAPE_WORDS: [&str; 7] = [
    "lighthouse",
    "rendezvous",
    "replica_group",
    "replicagroup",
    "quorum",
    "torchrun",
    "regroup",
];

/// Whether `code` names a kind's API type, a kind's coordinator or a shape word.
fn names_a_kind_or_shape(code: &str) -> bool {
    let identifiers: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
        .collect();
    identifiers.iter().any(|word| {
        KIND_TYPES.iter().any(|kind_type| kind_type == word)
            || SHAPE_WORDS
                .iter()
                .any(|shape| word.to_ascii_lowercase().contains(shape))
            || KIND_COORDINATORS
                .iter()
                .any(|coordinator| coordinator == word)
    })
}

#[test]
fn shared_code_names_no_kind_type_nor_shape_but_where_listed() {
    let mut unlisted = Vec::new();
    let mut named = Vec::new();
    for (relative, text) in shared_sources() {
        let code = code_only(&text);
        if names_a_kind_or_shape(&code) {
            named.push(relative.clone());
            if !SHAPES_OUTSIDE_THEIR_KIND.contains(&relative.as_str()) {
                unlisted.push(relative);
            }
        }
    }
    assert!(
        unlisted.is_empty(),
        "shared code names a kind's type, coordinator or shape; move it into the kind's \
         module and reach it through a trait:\n{}",
        unlisted.join("\n")
    );
    let paid: Vec<&&str> = SHAPES_OUTSIDE_THEIR_KIND
        .iter()
        .filter(|listed| !named.iter().any(|file| file == *listed))
        .collect();
    assert!(
        paid.is_empty(),
        "these files no longer name a kind or a shape: take them off the list: {paid:?}"
    );
}

#[test]
fn the_kinds_their_types_and_coordinators_are_read_from_the_registry_and_their_modules() {
    assert_eq!(
        *KIND_MODULES,
        ["mpi_job", "pytorch_job", "train_job", "training_job"]
    );
    assert_eq!(KIND_TYPES.len(), 3 * Kind::COUNT);
    assert!(KIND_TYPES.iter().any(|name| name == "MPIJobStatus"));
    for coordinator in [
        "LAUNCHER_POD",
        "LAUNCHER_JOB_POD",
        "MASTER_POD",
        "LIGHTHOUSE",
    ] {
        assert!(
            KIND_COORDINATORS.iter().any(|found| found == coordinator),
            "{coordinator} in {:?}",
            *KIND_COORDINATORS
        );
    }
}

#[test]
fn kinds_and_shapes_are_found_in_code_only() {
    assert!(names_a_kind_or_shape(&code_only(
        "fn f(job: &PyTorchJob) {}"
    )));
    assert!(names_a_kind_or_shape(&code_only(
        "if coordinator == MASTER_POD {}"
    )));
    assert!(names_a_kind_or_shape(&code_only(
        "let lost = lighthouse_loss(run);"
    )));
    assert!(names_a_kind_or_shape(&code_only(
        "use crate::QuorumReport;"
    )));
    assert!(!names_a_kind_or_shape(&code_only(
        "// a PyTorchJob's Lighthouse\nlet x = \"MPIJob quorum\"; let y = r#\"torchrun \"x\"\"#;\nlet c = '\"'; let d = '\\\"';"
    )));
    assert!(!names_a_kind_or_shape(&code_only(
        "fn f() {}\n#[cfg(test)]\nmod tests { fn g(_: PyTorchJob) {} }"
    )));
}
