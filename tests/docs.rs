//! The documentation in docs/ and the README stands alone and cannot drift: the field reference
//! is what the types generate, and the reference names exactly the phases, reasons, triggers,
//! Event reasons, metrics and flags the operator has. Every link stays inside the repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agent_supervisor::api::{Agent, Trigger};
use agent_supervisor::controller::metrics::{
    FailureLabels, Metrics, ReasonLabel, RestartLabels, TriggerLabel,
};
use agent_supervisor::supervise::EventReason;
use agent_supervisor::supervise::group::GroupEventReason;
use agent_supervisor::supervise::outage::OutageEventReason;
use clap::CommandFactory;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// The rows of the Markdown table that follows `## {section}`: each row's cells, trimmed, with
/// the backticks of the first cell removed.
fn table(doc: &str, section: &str) -> Vec<Vec<String>> {
    let start = doc
        .find(&format!("\n## {section}\n"))
        .unwrap_or_else(|| panic!("no section {section:?}"));
    let body = &doc[start + 1..];
    let end = body[3..].find("\n## ").map(|i| i + 3).unwrap_or(body.len());
    let mut rows: Vec<Vec<String>> = Vec::new();
    for line in body[..end].lines().filter(|l| l.starts_with('|')) {
        if line.starts_with("|---") {
            // The row above was a table's header.
            rows.pop();
            continue;
        }
        rows.push(
            line.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect(),
        );
    }
    rows
}

fn first_column(doc: &str, section: &str) -> BTreeSet<String> {
    table(doc, section)
        .into_iter()
        .map(|row| row[0].clone())
        .collect()
}

fn crd(kind: &str) -> Value {
    agent_supervisor::api::crd_files()
        .into_iter()
        .map(|(_, yaml)| serde_yaml::from_str::<Value>(&yaml).unwrap())
        .find(|c| c["spec"]["names"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no CRD for {kind}"))
}

/// The values the Agent CRD allows at `path` (a chain of property names).
fn enum_values(path: &[&str]) -> BTreeSet<String> {
    let mut node = &crd("Agent")["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    for part in path {
        node = if *part == "[]" {
            &node["items"]
        } else {
            &node["properties"][part]
        };
    }
    node["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no enum at {path:?}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_field_reference_is_what_the_types_generate() {
    let on_disk = read("docs/fields.md");
    assert!(
        on_disk == agent_supervisor::api::field_reference(),
        "docs/fields.md is stale: run make crds"
    );
    // And it lists every field of every kind.
    for kind in ["Agent", "RestartPolicy", "AgentGroup"] {
        for path in agent_supervisor::api::field_paths(&crd(kind)) {
            assert!(
                on_disk.contains(&format!("| `{path}` |")),
                "{kind} {path} is not in docs/fields.md"
            );
        }
    }
}

#[test]
fn the_reference_names_every_phase_reason_class_and_trigger() {
    let doc = read("docs/reference.md");
    let phases = enum_values(&["status", "phase"]);
    assert_eq!(first_column(&doc, "Phases"), phases);
    let reasons = enum_values(&["status", "lastFailure", "reason"]);
    let classes = enum_values(&["status", "lastFailure", "class"]);
    let tables = table(&doc, "Failure classification");
    let firsts: BTreeSet<String> = tables.iter().map(|r| r[0].clone()).collect();
    let expected: BTreeSet<String> = reasons.union(&classes).cloned().collect();
    assert_eq!(firsts, expected, "the reason and class tables");
    let triggers: BTreeSet<String> = Trigger::ALL
        .iter()
        .map(|t| t.as_str().to_string())
        .collect();
    assert_eq!(
        triggers,
        enum_values(&["status", "restartHistory", "[]", "trigger"])
    );
    assert_eq!(first_column(&doc, "Restart triggers"), triggers);
}

#[test]
fn the_reference_lists_exactly_the_event_reasons() {
    let doc = read("docs/reference.md");
    let documented: BTreeSet<(String, String)> = table(&doc, "Events")
        .into_iter()
        .map(|row| (row[0].clone(), row[2].clone()))
        .collect();
    let mut emitted = BTreeSet::new();
    for r in EventReason::ALL {
        emitted.insert((r.as_str().to_string(), "Agent".to_string()));
    }
    for r in GroupEventReason::ALL {
        emitted.insert((r.as_str().to_string(), "AgentGroup".to_string()));
    }
    for r in OutageEventReason::ALL {
        emitted.insert((r.as_str().to_string(), "RestartPolicy".to_string()));
    }
    assert_eq!(
        documented, emitted,
        "(reason, object) pairs in docs/reference.md's Events table"
    );
    // Warning or Normal as the operator sends them.
    for row in table(&doc, "Events") {
        if let Some(r) = EventReason::ALL.iter().find(|r| r.as_str() == row[0]) {
            let want = if r.is_warning() { "Warning" } else { "Normal" };
            if row[2] == "Agent" {
                assert_eq!(row[1], want, "{}", row[0]);
            }
        }
    }
}

/// The metric names the operator exports, each family made to show at least one series.
fn exported_metrics() -> BTreeSet<String> {
    use kube::runtime::reflector;
    use kube::runtime::watcher;
    let metrics = Metrics::new(true);
    let failure = FailureLabels {
        reason: "Error".into(),
        class: "Transient".into(),
    };
    metrics.crashes.get_or_create(&failure).inc();
    let restart = RestartLabels {
        reason: "Error".into(),
        class: "Transient".into(),
        trigger: "Failure".into(),
    };
    metrics.restarts.get_or_create(&restart).inc();
    let reason = ReasonLabel { reason: "x".into() };
    metrics.give_ups.get_or_create(&reason).inc();
    metrics.reconcile_errors.get_or_create(&reason).inc();
    metrics.outage_events.get_or_create(&reason).inc();
    metrics
        .group_restarts
        .get_or_create(&TriggerLabel {
            trigger: "Failure".into(),
        })
        .inc();
    // One agent in the cache, for the per-agent gauge.
    let (store, mut writer) = reflector::store::<agent_supervisor::api::wire::Guarded<Agent>>();
    let agent: Agent = serde_json::from_value(serde_json::json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
        "metadata": { "name": "a", "namespace": "n" },
        "spec": { "template": {} },
        "status": { "phase": "Running", "restartCount": 1 }
    }))
    .unwrap();
    writer.apply_watcher_event(&watcher::Event::Apply(
        agent_supervisor::api::wire::Guarded(Ok(agent)),
    ));
    metrics.watch_agents(store);
    let text = metrics.encode();
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().unwrap().to_string();
            match words.next() {
                Some("counter") => format!("{name}_total"),
                _ => name,
            }
        })
        .collect()
}

#[test]
fn the_reference_lists_exactly_the_exported_metrics() {
    let doc = read("docs/reference.md");
    let documented = first_column(&doc, "Metrics");
    let exported = exported_metrics();
    assert!(exported.len() >= 15, "{exported:?}");
    assert_eq!(
        documented, exported,
        "docs/reference.md's Metrics table against /metrics"
    );
}

#[test]
fn the_reference_lists_exactly_the_operator_flags() {
    let doc = read("docs/reference.md");
    let rows = table(&doc, "Operator flags");
    let documented: BTreeSet<(String, String)> =
        rows.iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    let command = agent_supervisor::process::config::Args::command();
    let flags: BTreeSet<(String, String)> = command
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let env = a.get_env()?.to_string_lossy().into_owned();
            Some((format!("--{long}"), env))
        })
        .collect();
    assert_eq!(
        documented, flags,
        "(flag, environment variable) in docs/reference.md"
    );
    // The defaults written are clap's.
    for arg in command.get_arguments() {
        let (Some(long), defaults) = (arg.get_long(), arg.get_default_values()) else {
            continue;
        };
        let Some(default) = defaults.first() else {
            continue;
        };
        let row = rows.iter().find(|r| r[0] == format!("--{long}")).unwrap();
        assert_eq!(row[2], default.to_string_lossy(), "--{long}'s default");
    }
}

/// Relative links (`[text](target)`) in a Markdown file.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    out
}

#[test]
fn every_link_stays_inside_the_repository_and_resolves() {
    let mut files = vec![PathBuf::from("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path.strip_prefix(root()).unwrap().to_path_buf());
        }
    }
    assert!(files.len() >= 3, "{files:?}");
    let repo = root().canonicalize().unwrap();
    for file in files {
        let text = read(file.to_str().unwrap());
        assert!(
            !text.contains("../shared"),
            "{} points outside the repository",
            file.display()
        );
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") || link.starts_with('#')
            {
                continue;
            }
            let target = link.split('#').next().unwrap();
            let path = root().join(&file).parent().unwrap().join(target);
            let resolved = path.canonicalize().unwrap_or_else(|e| {
                panic!("{}: link {link} does not resolve: {e}", file.display())
            });
            assert!(
                resolved.starts_with(&repo),
                "{}: link {link} leaves the repository",
                file.display()
            );
        }
    }
}

#[test]
fn the_krew_manifest_names_the_plugin_binary_for_every_platform() {
    let template = read(".krew.yaml");
    // What krew's release automation does: the tag, and each archive's URL and checksum.
    let mut rendered = String::new();
    for line in template.lines() {
        let line = line.replace("{{ .TagName }}", "v0.1.0");
        match line.trim_start().strip_prefix("{{addURIAndSha \"") {
            Some(rest) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                let uri = rest.split('"').next().unwrap();
                rendered.push_str(&format!(
                    "{indent}uri: {uri}\n{indent}sha256: {}\n",
                    "0".repeat(64)
                ));
            }
            None => {
                assert!(!line.contains("{{"), "an unknown template action: {line}");
                rendered.push_str(&line);
                rendered.push('\n');
            }
        }
    }
    let manifest: Value = serde_yaml::from_str(&rendered).expect("the rendered manifest is YAML");
    assert_eq!(
        manifest["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(manifest["kind"], "Plugin");
    // `kubectl agent` runs the binary `kubectl-agent`: the plugin's name is the part after it.
    assert_eq!(manifest["metadata"]["name"], "agent");
    assert_eq!(manifest["spec"]["version"], "v0.1.0");
    let short = manifest["spec"]["shortDescription"].as_str().unwrap();
    assert!(!short.is_empty() && short.len() <= 50, "{short}");
    let platforms = manifest["spec"]["platforms"].as_array().unwrap();
    let mut seen = BTreeSet::new();
    for p in platforms {
        let labels = &p["selector"]["matchLabels"];
        let key = format!(
            "{}/{}",
            labels["os"].as_str().unwrap(),
            labels["arch"].as_str().unwrap()
        );
        assert!(seen.insert(key.clone()), "{key} twice");
        assert_eq!(p["bin"], "kubectl-agent", "{key}");
        assert!(p["uri"].as_str().unwrap().starts_with("https://"), "{key}");
        assert!(p["uri"].as_str().unwrap().ends_with(".tar.gz"), "{key}");
    }
    assert!(seen.contains("linux/amd64"), "{seen:?}");
    // And that binary is one this crate builds.
    let cargo = read("Cargo.toml");
    assert!(
        cargo.contains("name = \"kubectl-agent\""),
        "Cargo.toml builds kubectl-agent"
    );
}
