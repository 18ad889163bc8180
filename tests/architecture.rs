//! The layers of `src/` point one way: the API types, then the pure core, then the controllers
//! (IO, and the metrics, health and caches they write), then what people read (renderings), then
//! the plugin's commands and the process's wiring. A module may name only the layers below its
//! own (and itself); this test reads every file under `src/` and fails on a name that points up
//! or sideways, with the file and the line. The core names no Kubernetes object.

use std::path::{Path, PathBuf};

/// Each top-level module of the library and its layer.
const LAYERS: [(&str, u8); 6] = [
    ("api", 0),
    ("supervise", 1),
    ("controller", 2),
    ("view", 3),
    ("cli", 4),
    ("process", 4),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// Where `file` (relative to `src/`) sits: its module path, e.g. `controller/mod.rs` is
/// `[controller]` and `controller/error.rs` is `[controller, error]`.
fn module_path(file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The top-level modules `source` names, with the line of each: `crate::x`, each name of a
/// `crate::{x, y::z}` group, and `super::` chains that climb to the crate root from `path`.
fn named_modules(path: &[String], source: &str) -> Vec<(String, usize)> {
    let code = without_comments(source);
    let line_of = |offset: usize| code[..offset].matches('\n').count() + 1;
    let mut named = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let after = &code[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            named.extend(group_heads(group).into_iter().map(|m| (m, line_of(at))));
        } else {
            named.push((ident(after), line_of(at)));
        }
    }
    for (at, _) in code.match_indices("super::") {
        // Only a chain that starts here: `super::super::x`.
        if code[..at].ends_with("::") {
            continue;
        }
        let mut after = &code[at..];
        let mut climbs = 0;
        while let Some(next) = after.strip_prefix("super::") {
            climbs += 1;
            after = next;
        }
        if climbs >= path.len() {
            named.push((ident(after), line_of(at)));
        }
    }
    named
}

/// `source` with its comments out and its lines kept: a group of imports may span lines.
fn without_comments(source: &str) -> String {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifier `s` starts with.
fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first name of each item in a `{a::b, c, d::{e, f}}` group (after its opening brace).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expecting = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => expecting = true,
            c if expecting && depth == 0 && (c.is_alphanumeric() || c == '_') => {
                heads.push(ident(&group[i..]));
                expecting = false;
            }
            _ => {}
        }
    }
    heads
}

/// The names in `source` (the file at module `path`) that point up or sideways.
fn violations(path: &[String], source: &str) -> Vec<String> {
    let Some(own) = path.first().and_then(|m| layer(m)) else {
        return Vec::new();
    };
    named_modules(path, source)
        .into_iter()
        .filter_map(|(module, line)| {
            let theirs = layer(&module)?;
            let fine = module == path[0] || theirs < own;
            (!fine).then(|| format!("line {line}: {} names {module}", path[0]))
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_names_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let path = module_path(relative);
        if path.first().and_then(|m| layer(m)).is_none() {
            continue; // lib.rs, main.rs, bin/: the top, which may name anything.
        }
        checked += 1;
        let source = std::fs::read_to_string(file).expect("read a source file");
        problems.extend(
            violations(&path, &source)
                .into_iter()
                .map(|v| format!("src/{}: {v}", relative.display())),
        );
    }
    assert!(checked > 50, "only {checked} files found under src/");
    assert!(
        problems.is_empty(),
        "imports that point up:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_core_takes_facts_not_kubernetes_objects() {
    // The shell turns Pods, Leases, Agents and AgentGroups into facts (`controller::facts`,
    // `gather`); the decision core takes the facts (and its own API's statuses and specs, which
    // are plain data) and returns plans.
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/supervise");
    let mut files = Vec::new();
    rust_files(&core, &mut files);
    assert!(!files.is_empty());
    let mut found = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("read a source file");
        found.extend(
            objects_named(&source)
                .into_iter()
                .map(|(what, line)| format!("{}:{line}: {what}", file.display())),
        );
    }
    assert!(
        found.is_empty(),
        "the core names Kubernetes objects:\n{}",
        found.join("\n")
    );
}

/// The Kubernetes objects `source` names: anything of kube or k8s-openapi, and this API's whole
/// objects (`Agent`, `AgentGroup`, `RestartPolicy`) taken from `crate::api`.
fn objects_named(source: &str) -> Vec<(String, usize)> {
    const OBJECTS: [&str; 3] = ["Agent", "AgentGroup", "RestartPolicy"];
    let code = without_comments(source);
    let line_of = |offset: usize| code[..offset].matches('\n').count() + 1;
    let mut found = Vec::new();
    for client in ["kube::", "k8s_openapi::"] {
        for (at, _) in code.match_indices(client) {
            if !code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                found.push((client.trim_end_matches("::").to_string(), line_of(at)));
            }
        }
    }
    for (at, _) in code.match_indices("crate::api::") {
        let after = &code[at + "crate::api::".len()..];
        let names = match after.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => vec![ident(after)],
        };
        for name in names.into_iter().filter(|n| OBJECTS.contains(&n.as_str())) {
            found.push((format!("crate::api::{name}"), line_of(at)));
        }
    }
    found
}

#[test]
fn the_object_check_catches_each_way_of_naming_one() {
    let named = |source: &str| -> Vec<String> {
        objects_named(source)
            .into_iter()
            .map(|(what, _)| what)
            .collect()
    };
    assert_eq!(
        named("use k8s_openapi::api::core::v1::Pod;"),
        ["k8s_openapi"]
    );
    assert_eq!(named("fn f(c: kube::Client) {}"), ["kube"]);
    assert_eq!(
        named("use crate::api::{\n    AgentStatus, Agent,\n    Phase};"),
        ["crate::api::Agent"]
    );
    assert_eq!(
        named("fn f(g: &crate::api::AgentGroup) {}"),
        ["crate::api::AgentGroup"]
    );
    assert!(
        named("use crate::api::{AgentStatus, AgentGroupStatus, RestartPolicySpec};").is_empty()
    );
    assert!(named("// kube::Client and crate::api::Agent in a comment").is_empty());
}

fn at(path: &str) -> Vec<String> {
    module_path(Path::new(path))
}

#[test]
fn the_checker_catches_each_way_of_naming_a_module_above() {
    let controller = at("controller/error.rs");
    assert_eq!(controller, ["controller", "error"]);
    assert_eq!(
        violations(&controller, "use crate::process::metrics::Metrics;"),
        ["line 1: controller names process"]
    );
    assert_eq!(
        violations(&controller, "use crate::{api::Agent,\n  view::list};"),
        ["line 1: controller names view"]
    );
    assert_eq!(
        violations(&controller, "let m = crate::cli::main();"),
        ["line 1: controller names cli"]
    );
    // From `controller/mod.rs`, one `super::` is the crate root; from `controller/error.rs`,
    // two are.
    assert_eq!(
        violations(&at("controller/mod.rs"), "use super::process::x;"),
        ["line 1: controller names process"]
    );
    assert_eq!(
        violations(&controller, "use super::super::view::x;"),
        ["line 1: controller names view"]
    );
    assert!(violations(&controller, "use super::events::Sender;").is_empty());
    // Downward, its own, and comments are fine; a sibling at the same layer is not.
    assert!(violations(&controller, "use crate::{api, supervise::decide};").is_empty());
    assert!(violations(&controller, "use crate::controller::x; // crate::process").is_empty());
    assert_eq!(
        violations(&at("cli/mod.rs"), "use crate::process::client;"),
        ["line 1: cli names process"]
    );
    assert!(violations(&at("process/server.rs"), "use crate::controller::health;").is_empty());
}
