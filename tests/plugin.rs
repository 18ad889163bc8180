//! `kubectl agent`, the plugin binary, against the real API server: agents put in each phase
//! (their status written as the operator writes it, no operator running to change it), the text
//! each command prints about them, the changes its actions make, and its errors. One test runs
//! the real operator and reads a real crash back.

mod support;

#[path = "plugin/actions.rs"]
mod actions;
#[path = "plugin/checkpoints.rs"]
mod checkpoints;
#[path = "plugin/errors.rs"]
mod errors;
#[path = "plugin/group.rs"]
mod group;
#[path = "plugin/list.rs"]
mod list;
#[path = "plugin/real_crash.rs"]
mod real_crash;
#[path = "plugin/sandbox.rs"]
mod sandbox;
#[path = "plugin/spend.rs"]
mod spend;
#[path = "plugin/why.rs"]
mod why;

use std::path::Path;
use std::process::Command;

use agent_supervisor::api::Agent;
use jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use support::TestNamespace;

/// What a run of the plugin printed.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn plugin_with(kubeconfig: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-agent"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl-agent");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the plugin in `ns`, and expects success.
fn plugin(ns: &TestNamespace, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["-n", &ns.name]);
    let run = plugin_with(support::kubeconfig(), &all);
    assert_eq!(
        run.code, 0,
        "kubectl agent {args:?} failed:\n{}{}",
        run.stdout, run.stderr
    );
    assert!(
        !run.stdout.contains('\x1b'),
        "no colour when not on a terminal:\n{}",
        run.stdout
    );
    run.stdout
}

async fn setup() -> TestNamespace {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    ns
}

fn at(offset_secs: i64) -> String {
    let t = Timestamp::now() + SignedDuration::from_secs(offset_secs);
    Timestamp::from_second(t.as_second()).unwrap().to_string()
}

/// The absolute form `why` prints next to a relative time.
fn absolute(time: &str) -> String {
    let t: Timestamp = time.parse().unwrap();
    t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, since: i64) -> Value {
    json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": at(since), "observedGeneration": 1
    })
}

fn failure(reason: &str, exit_code: i32, message: &str, ago: i64) -> Value {
    json!({
        "time": at(-ago), "reason": reason, "class": "Transient", "exitCode": exit_code,
        "message": message, "container": "agent", "ranFor": "3s"
    })
}

/// Creates an agent and writes its status, as the operator would have.
async fn agent_with(ns: &TestNamespace, name: &str, spec: Value, status: Value) -> Agent {
    ns.create_agent(name, spec).await;
    let patch = json!({ "status": status });
    ns.api::<Agent>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("write the status of {name}: {e}"))
}

/// Creates a group and writes its status, as the operator would have.
async fn group_with(ns: &TestNamespace, name: &str, spec: Value, status: Value) {
    let group: agent_supervisor::api::AgentGroup = serde_json::from_value(serde_json::json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "AgentGroup",
        "metadata": { "name": name }, "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("group {name}: {e}"));
    let api = ns.api::<agent_supervisor::api::AgentGroup>();
    api.create(&kube::api::PostParams::default(), &group)
        .await
        .unwrap_or_else(|e| panic!("create group {name}: {e}"));
    let patch = serde_json::json!({ "status": status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("write the status of group {name}: {e}"));
}

fn assert_says(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "expected {part:?} in:\n{text}");
    }
}
