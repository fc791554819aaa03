//! Every link between eto's documents leads somewhere: README.md, `docs/` and the examples'
//! READMEs link to files that exist and to headings that exist (as GitHub names their
//! anchors). The source files docs/development.md names, where each rule lives, exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use eto_tests::workspace_root;

/// The Markdown files the project publishes.
fn documents() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut documents = vec![
        root.join("README.md"),
        root.join("examples/horovod/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    documents.extend(docs);
    documents
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as
/// `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    prose(&text)
        .into_iter()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| anchor(heading.trim_start_matches('#')))
        .collect()
}

/// The targets of the inline links `[text](target)` of `text`.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            if let Some(end) = rest.find(')') {
                found.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    found
}

#[test]
fn every_link_between_documents_leads_to_a_file_and_a_heading() {
    let mut broken = Vec::new();
    for document in documents() {
        let text = std::fs::read_to_string(&document).unwrap();
        let dir = document.parent().unwrap();
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let path = if file.is_empty() {
                document.clone()
            } else {
                dir.join(file)
            };
            let shown = document.strip_prefix(workspace_root()).unwrap().display();
            if !path.exists() {
                broken.push(format!("{shown}: {target}: no such file"));
            } else if !fragment.is_empty()
                && (path.extension().is_none_or(|ext| ext != "md")
                    || !anchors(&path).contains(fragment))
            {
                broken.push(format!("{shown}: {target}: no such heading"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn headings_are_anchored_as_github_anchors_them() {
    assert_eq!(
        anchor("MPIJob: Kubeflow mpi-operator's API"),
        "mpijob-kubeflow-mpi-operators-api"
    );
    assert_eq!(
        anchor("Suspend, checkpoint and resume"),
        "suspend-checkpoint-and-resume"
    );
    assert_eq!(anchor("`kubectl eto get`"), "kubectl-eto-get");
    assert_eq!(
        links("see [a](docs/a.md#b) and [`c`](../c.rs)\n```\n[no](x)\n```"),
        ["docs/a.md#b", "../c.rs"]
    );
}

/// Every source file under `dir`, as a path relative to the workspace.
fn source_files(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if !path.ends_with("target") {
                source_files(&path, found);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path.strip_prefix(workspace_root()).unwrap();
            found.push(relative.to_string_lossy().into_owned());
        }
    }
}

/// The Rust files a text names in code spans: `plan/run/phase.rs`, `rbac.rs`.
fn named_sources(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            span.ends_with(".rs")
                && span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_/.".contains(c))
        })
        .collect()
}

#[test]
fn every_source_file_the_development_guide_names_exists() {
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in ["crates", "tests"] {
        source_files(&root.join(dir), &mut files);
    }
    let guide = std::fs::read_to_string(root.join("docs/development.md")).unwrap();
    let missing: Vec<&str> = named_sources(&guide)
        .into_iter()
        .filter(|named| {
            !files
                .iter()
                .any(|file| file == named || file.ends_with(&format!("/{named}")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/development.md names files that do not exist: {missing:?}"
    );
    assert_eq!(
        named_sources("see `plan/run/phase.rs` and `kubectl eto` and `rbac.rs`"),
        ["plan/run/phase.rs", "rbac.rs"]
    );
}
