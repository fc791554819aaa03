//! The indexes a newcomer reads keep telling the truth:
//! - the controller's layers (`crates/controller/src/lib.rs`, "# Layers"): every module is in
//!   one layer and uses only modules of its layer or of the layers before it;
//! - docs/development.md's "Where each rule lives" names every module of the engine (its
//!   top-level modules, the rules of a run under `plan/run/`, the kinds under `kind/`) and
//!   every test file of the workspace.

use std::collections::BTreeMap;
use std::path::Path;

use eto_tests::rust_source::code_only;
use eto_tests::workspace_root;

/// The identifiers in code spans of `text`: `` `caches` ``, `` [`apply`] ``.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The layer of each module, from the numbered list under `# Layers` in `lib.rs`'s docs.
fn layers(lib: &str) -> BTreeMap<String, usize> {
    let mut layers = BTreeMap::new();
    let mut current = None;
    let mut in_section = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            break;
        };
        let doc = doc.trim();
        if doc.starts_with('#') {
            in_section = doc == "# Layers";
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some((number, _)) = doc.split_once(". ")
            && let Ok(number) = number.parse::<usize>()
        {
            current = Some(number);
        }
        if let Some(layer) = current {
            for module in code_spans(doc) {
                layers.insert(module.to_string(), layer);
            }
        }
    }
    layers
}

/// The modules `lib.rs` declares, but those only tests compile.
fn declared_modules(lib: &str) -> Vec<String> {
    let mut modules = Vec::new();
    let mut test_only = false;
    for line in lib.lines() {
        if line.trim() == "#[cfg(test)]" {
            test_only = true;
            continue;
        }
        let declared = line
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'));
        if let Some(module) = declared
            && !test_only
        {
            modules.push(module.to_string());
        }
        test_only = false;
    }
    modules
}

/// The modules of the crate whose names are `modules` that `source` uses (`crate::x`,
/// `crate::{x, y}`) in its code: not in comments, strings or its test module (see
/// [`code_only`]).
fn uses(source: &str, modules: &[String]) -> Vec<String> {
    let code = code_only(source);
    let mut used = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(',')
                .map(|part| part.trim().split("::").next().unwrap_or_default())
                .collect()
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            vec![&rest[..end]]
        };
        for name in names {
            if modules.iter().any(|module| module == name) && !used.iter().any(|u| u == name) {
                used.push(name.to_string());
            }
        }
    }
    used
}

/// The product source of module `module` of the crate at `src`: its file, or every file of
/// its directory but its tests (`tests/`, `tests.rs`, `*_tests.rs`, `properties.rs`).
fn module_source(src: &Path, module: &str) -> String {
    let file = src.join(format!("{module}.rs"));
    if file.exists() {
        return std::fs::read_to_string(file).unwrap();
    }
    let mut source = String::new();
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs")
                && !name.ends_with("_tests.rs")
                && !["tests.rs", "properties.rs"].contains(&name.as_str())
            {
                source.push_str(&std::fs::read_to_string(&path).unwrap());
                source.push('\n');
            }
        }
    }
    assert!(!source.is_empty(), "no source found for module {module}");
    source
}

/// Which modules of the crate at `src` each of its modules uses.
fn module_uses(src: &Path, modules: &[String]) -> BTreeMap<String, Vec<String>> {
    modules
        .iter()
        .map(|module| {
            let used = uses(&module_source(src, module), modules)
                .into_iter()
                .filter(|used| used != module)
                .collect();
            (module.clone(), used)
        })
        .collect()
}

/// The arrows of `uses` that run from a module to one of a later layer of `layers`.
fn upward_arrows(
    uses: &BTreeMap<String, Vec<String>>,
    layers: &BTreeMap<String, usize>,
) -> Vec<String> {
    let mut upwards = Vec::new();
    for (module, used) in uses {
        for used in used {
            if layers[used] > layers[module] {
                upwards.push(format!(
                    "{module} (layer {}) uses {used} (layer {})",
                    layers[module], layers[used]
                ));
            }
        }
    }
    upwards
}

/// A circle of modules in `uses` (each using the next, the last the first), if there is one.
fn circle(uses: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        uses: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == module) {
            return Some(path[at..].to_vec());
        }
        if done.iter().any(|seen| seen == module) {
            return None;
        }
        path.push(module.to_string());
        for used in uses.get(module).into_iter().flatten() {
            if let Some(found) = visit(used, uses, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.push(module.to_string());
        None
    }
    let mut done = Vec::new();
    uses.keys()
        .find_map(|module| visit(module, uses, &mut Vec::new(), &mut done))
}

/// Every module of the crate at `src` is in a layer of its `lib.rs`, none uses a module of a
/// later layer, and none is in a circle.
fn assert_layered(src: &Path) {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layers = layers(&lib);
    let modules = declared_modules(&lib);
    let unplaced: Vec<&String> = modules
        .iter()
        .filter(|module| !layers.contains_key(*module))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer of {}: {unplaced:?}",
        src.join("lib.rs").display()
    );
    let uses = module_uses(src, &modules);
    let upwards = upward_arrows(&uses, &layers);
    assert!(
        upwards.is_empty(),
        "modules using a later layer:\n{}",
        upwards.join("\n")
    );
    assert_eq!(circle(&uses), None, "modules using each other in a circle");
}

#[test]
fn every_controller_module_is_in_one_layer_and_uses_none_after_it() {
    assert_layered(&workspace_root().join("crates/controller/src"));
}

#[test]
fn every_engine_module_is_in_one_layer_and_uses_none_after_it_nor_in_a_circle() {
    assert_layered(&workspace_root().join("crates/engine/src"));
}

#[test]
fn a_circle_is_found_and_an_arrow_up_is_named() {
    let uses: BTreeMap<String, Vec<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(module, used)| {
        (
            module.to_string(),
            used.into_iter().map(String::from).collect(),
        )
    })
    .collect();
    assert_eq!(
        circle(&uses),
        Some(vec!["a".to_string(), "b".into(), "c".into()])
    );
    let layers: BTreeMap<String, usize> = [("a", 1), ("b", 2), ("c", 2), ("d", 3)]
        .into_iter()
        .map(|(module, layer)| (module.to_string(), layer))
        .collect();
    assert_eq!(
        upward_arrows(&uses, &layers),
        ["a (layer 1) uses b (layer 2)"]
    );
    let mut straight = uses.clone();
    straight.insert("c".into(), vec![]);
    assert_eq!(circle(&straight), None);
}

#[test]
fn layers_and_uses_are_read_as_written() {
    let lib = "//! # Layers\n//! Intro `not_a_module`... no number.\n//! 1. Base: [`a`], `b`,\n//!    [`c`].\n//! 2. Top: [`d`].\n//!\n//! # Other\n//! 3. [`e`]\n\npub mod a;\n#[cfg(test)]\nmod t;\nmod d;\n";
    let layers = layers(lib);
    assert_eq!(layers.get("a"), Some(&1));
    assert_eq!(layers.get("c"), Some(&1));
    assert_eq!(layers.get("d"), Some(&2));
    assert_eq!(layers.get("e"), None, "outside the section");
    assert_eq!(declared_modules(lib), ["a", "d"]);
    let modules: Vec<String> = ["a", "b", "d"].map(String::from).to_vec();
    assert_eq!(
        uses(
            "use crate::{a, d::X};\n// crate::b\nfn f() { crate::b::g() }\n#[cfg(test)]\nmod tests { use crate::x; }",
            &modules
        ),
        ["a", "d", "b"]
    );
}

/// The names a newcomer looks for in the index: every engine module (`already_applied.rs`,
/// `plan/`), every rule of a run (`plan/run/phase.rs`) and every kind (`kind/pytorch_job/`).
fn engine_modules(root: &Path) -> Vec<String> {
    let src = root.join("crates/engine/src");
    let mut names = Vec::new();
    for (dir, prefix) in [(src.clone(), ""), (src.join("plan/run"), "plan/run/")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            if ["lib.rs", "mod.rs", "testing.rs", "tests"].contains(&file.as_str()) {
                continue;
            }
            if path.is_dir() {
                names.push(format!("{prefix}{file}/"));
            } else {
                names.push(format!("{prefix}{file}"));
            }
        }
    }
    for kind in ["training_job", "mpi_job", "pytorch_job"] {
        names.push(format!("kind/{kind}/"));
    }
    names.sort();
    names
}

#[test]
fn the_development_guide_names_every_engine_module_and_test_file() {
    let root = workspace_root();
    let guide = std::fs::read_to_string(root.join("docs/development.md")).unwrap();
    let spans = code_spans(&guide);
    let named = |name: &str| {
        spans
            .iter()
            .any(|span| *span == name || span.ends_with(&format!("/{name}")))
    };
    let mut missing: Vec<String> = engine_modules(&root)
        .into_iter()
        .filter(|module| !named(module) && !named(&format!("crates/engine/src/{module}")))
        .collect();
    for entry in std::fs::read_dir(root.join("tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            let file = format!("tests/{}", path.file_name().unwrap().to_string_lossy());
            if !named(&file) {
                missing.push(file);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/development.md does not name: {missing:?}"
    );
}
