//! Third-party tools the tests run, installed once into `target/tools/`.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use crate::workspace_root;

static INSTALLING: Mutex<()> = Mutex::new(());

/// Where the Python package `name` at `version` is installed (`pip install --target`), once
/// per workspace; `module` is a file inside it that shows the install is complete.
///
/// # Panics
/// When `python3 -m pip` cannot install it (no pip, no network): the test that needs it fails
/// and says why, rather than passing without it.
pub fn python_package(name: &str, version: &str, module: &str) -> PathBuf {
    let _installing = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = workspace_root().join(format!("target/tools/{name}-{version}"));
    if dir.join(module).exists() {
        return dir;
    }
    let output = std::process::Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--target"])
        .arg(&dir)
        .arg(format!("{name}=={version}"))
        .output()
        .unwrap_or_else(|error| panic!("cannot install {name}: cannot run python3: {error}"));
    assert!(
        output.status.success(),
        "cannot install {name} {version} with pip:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir
}

/// Where the Python package `name` at `version` is installed with its dependencies (`pip
/// install --target`), once per workspace, for a client that needs them (the `kubeflow` SDK);
/// `module` is a file inside it that shows the install is complete.
///
/// # Panics
/// As [`python_package`].
pub fn python_package_with_dependencies(name: &str, version: &str, module: &str) -> PathBuf {
    let _installing = INSTALLING.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = workspace_root().join(format!("target/tools/{name}-{version}-with-dependencies"));
    if dir.join(module).exists() {
        return dir;
    }
    let output = std::process::Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--target"])
        .arg(&dir)
        .arg(format!("{name}=={version}"))
        .output()
        .unwrap_or_else(|error| panic!("cannot install {name}: cannot run python3: {error}"));
    assert!(
        dir.join(module).exists(),
        "cannot install {name} {version} with pip:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir
}
