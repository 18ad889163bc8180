//! The Helm chart in charts/agent-supervisor: it lints clean and renders what the operator needs
//! (render, rbac, monitoring), its alerts fire when they should (alerts, with promtool), its objects pass the real API server's validation and Pod Security "restricted"
//! (admission), and it installs, grants exactly enough, and uninstalls (install); the operator
//! works with exactly those permissions (operator); supervising agent-sandbox Sandboxes adds
//! exactly their permissions and flag, and is off by default (sandboxes).

mod support;

#[path = "chart/admission.rs"]
mod admission;
#[path = "chart/alerts.rs"]
mod alerts;
#[path = "chart/install.rs"]
mod install;
#[path = "chart/monitoring.rs"]
mod monitoring;
#[path = "chart/operator.rs"]
mod operator;
#[path = "chart/rbac.rs"]
mod rbac;
#[path = "chart/render.rs"]
mod render;
#[path = "chart/sandboxes.rs"]
mod sandboxes;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_yaml::Value;

/// The release name in every test. It contains the chart's name, so it is also the full name
/// of the release's objects.
const RELEASE: &str = "agent-supervisor";

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/agent-supervisor")
}

// ---------------------------------------------------------------------------------------------
// Running commands

fn shown(cmd: &Command) -> String {
    let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    words.join(" ")
}

/// Runs `cmd`, feeding it `stdin`, and returns what it did, whether it succeeded or not.
fn output(cmd: &mut Command, stdin: Option<&str>) -> Output {
    let what = shown(cmd);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{what}`: {e}"));
    // Written from another thread, so a command that answers while reading never blocks us.
    let writer = stdin.map(|input| {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        let input = input.to_owned();
        std::thread::spawn(move || pipe.write_all(input.as_bytes()))
    });
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("`{what}` did not finish: {e}"));
    if let Some(writer) = writer {
        let written = writer.join().expect("the stdin writer does not panic");
        if let (Err(e), true) = (written, out.status.success()) {
            panic!("`{what}` succeeded without reading all its input: {e}");
        }
    }
    out
}

/// Runs `cmd` and returns its stdout; panics with its stderr unless it succeeds.
fn run(cmd: &mut Command, stdin: Option<&str>) -> String {
    let out = output(cmd, stdin);
    if !out.status.success() {
        panic!(
            "`{}` failed ({}):\n{}{}",
            shown(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    String::from_utf8(out.stdout).expect("output is UTF-8")
}

/// `--set` arguments for `sets`.
fn set_args<'a>(sets: &'a [&'a str]) -> impl Iterator<Item = &'a str> {
    sets.iter().flat_map(|s| ["--set", s])
}

/// The control plane's version: `helm template` checks the chart's kubeVersion against it.
fn kube_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let out = run(support::kubectl().args(["version", "--output=json"]), None);
        let version: serde_json::Value = serde_json::from_str(&out).expect("kubectl version JSON");
        version["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap_or_else(|| panic!("no server version in {out}"))
            .to_owned()
    })
}

// ---------------------------------------------------------------------------------------------
// Rendering and reading the chart

/// `helm template` of the chart into `namespace`, as YAML.
fn template(namespace: &str, sets: &[&str]) -> String {
    run(
        support::helm()
            .args(["template", RELEASE])
            .arg(chart())
            .args(["--namespace", namespace, "--kube-version", kube_version()])
            .args(set_args(sets)),
        None,
    )
}

/// The objects in a YAML stream.
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("invalid YAML: {e}\n{yaml}")))
        .filter(|doc| !doc.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

/// The one object of `kind` named `name`.
fn the<'a>(docs: &'a [Value], kind: &str, namespace: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = of_kind(docs, kind)
        .into_iter()
        .filter(|d| {
            d["metadata"]["name"] == name
                && d["metadata"]["namespace"].as_str().unwrap_or_default() == namespace
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "want one {kind} {namespace}/{name}, found {found:?}"
    );
    found[0]
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|items| {
            items
                .iter()
                .map(|i| {
                    i.as_str()
                        .unwrap_or_else(|| panic!("not a string: {i:?}"))
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}
