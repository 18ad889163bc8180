//! Economic and voluntary shutdowns are left alone, whoever records them.

use std::time::Duration;

use agent_supervisor::api::{Agent, Phase, ShutdownType};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::setup;
use crate::support::{Change, TestNamespace};

const DELAY_SECS: u64 = 2;

fn policy() -> serde_json::Value {
    json!({ "backoff": { "type": "Exponential", "initialDelay": format!("{DELAY_SECS}s"), "jitter": 0.0 } })
}

/// (name, uid) of every pod in the namespace.
async fn pods(ns: &TestNamespace) -> Vec<(String, String)> {
    let list = ns
        .api::<Pod>()
        .list(&ListParams::default())
        .await
        .expect("list pods");
    let mut pods: Vec<_> = list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| (p.metadata.name.unwrap(), p.metadata.uid.unwrap()))
        .collect();
    pods.sort();
    pods
}

/// Changes the Agent's pod template (an annotation), so the operator decides again, and
/// returns the new generation. While the agent is shut down this must not roll anything out.
async fn poke(ns: &TestNamespace, agent: &str, value: &str) -> Option<i64> {
    let patch = json!({ "spec": { "template": { "metadata": { "annotations": { "test.supervisor.dev/poke": value } } } } });
    ns.api::<Agent>()
        .patch(agent, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("poke agent")
        .metadata
        .generation
}

/// For twice the policy's delay, and through two more decisions the operator acknowledges
/// (status.observedGeneration): no pod is created or deleted — not even briefly, the pods are
/// watched throughout — and `status.shutdown` stays exactly as it is.
async fn assert_left_alone(ns: &TestNamespace, agent: &str) {
    let watched = ns.record_pods().await;
    let before_pods = pods(ns).await;
    let before = ns.status(agent).await.shutdown.expect("shutdown is set");
    for round in 0..2 {
        // A restart the policy scheduled would be due by now.
        tokio::time::sleep(Duration::from_secs(DELAY_SECS)).await;
        let generation = poke(ns, agent, &format!("{round}")).await;
        ns.wait_status(agent, "the poke observed", |s| {
            s.observed_generation >= generation
        })
        .await;
    }
    assert_eq!(
        pods(ns).await,
        before_pods,
        "no pod created or deleted while shut down"
    );
    let recorded = watched.all();
    // A pod already being deleted when this began may finish going: that was before.
    let going: Vec<_> = recorded
        .iter()
        .filter(|(change, pod)| {
            *change == Change::Existing && pod.metadata.deletion_timestamp.is_some()
        })
        .map(|(_, pod)| pod.metadata.uid.clone())
        .collect();
    let changes: Vec<String> = recorded
        .into_iter()
        .filter(|(_, pod)| !going.contains(&pod.metadata.uid))
        .filter(|(change, pod)| {
            matches!(change, Change::Added | Change::Deleted)
                || pod.metadata.deletion_timestamp.is_some()
        })
        .map(|(change, pod)| format!("{change:?} {}", pod.metadata.name.unwrap_or_default()))
        .collect();
    assert!(
        changes.is_empty(),
        "pods created or deleted while shut down: {changes:?}"
    );
    let status = ns.status(agent).await;
    assert_eq!(
        status.shutdown,
        Some(before),
        "status.shutdown is never rewritten"
    );
    assert_eq!(status.phase, Some(Phase::Shutdown));
}

/// What a person (or an economy service) types: a merge patch of the status subresource.
fn kubectl_patch_status(ns: &TestNamespace, agent: &str, patch: &str) {
    let out = crate::support::kubectl()
        .args([
            "-n",
            &ns.name,
            "patch",
            "agent",
            agent,
            "--subresource=status",
            "--type=merge",
            "-p",
            patch,
        ])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl patch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Clearing `status.shutdown` resumes supervision with a new pod.
async fn assert_clearing_resumes(ns: &TestNamespace, agent: &str, next_pod: &str) {
    kubectl_patch_status(ns, agent, r#"{"status":{"shutdown":null}}"#);
    ns.wait_running(next_pod).await;
    ns.wait_status(agent, "running again", |s| s.phase == Some(Phase::Running))
        .await;
}

#[tokio::test]
async fn an_economic_shutdown_in_the_termination_message_is_respected() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", policy()).await;
    ns.create_agent("spender", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("spender-1").await;
    ns.terminate(
        "spender-1",
        1,
        "Error",
        r#"{"shutdown":"economic","reason":"budget exhausted"}"#,
    )
    .await;

    let status = ns
        .wait_status("spender", "Shutdown", |s| s.phase == Some(Phase::Shutdown))
        .await;
    let shutdown = status.shutdown.expect("shutdown recorded");
    assert_eq!(shutdown.kind, ShutdownType::Economic);
    assert_eq!(shutdown.reason.as_deref(), Some("budget exhausted"));
    assert_eq!(shutdown.source.as_deref(), Some("TerminationMessage"));
    assert_eq!(status.restart_count, 0);
    ns.wait_event("spender", "ShutdownRespected").await;
    assert_left_alone(&ns, "spender").await;
    assert_clearing_resumes(&ns, "spender", "spender-2").await;
}

#[tokio::test]
async fn exit_zero_is_a_voluntary_shutdown_by_default() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", policy()).await;
    ns.create_agent("finisher", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("finisher-1").await;
    ns.terminate("finisher-1", 0, "Completed", "").await;
    let status = ns
        .wait_status("finisher", "Shutdown", |s| s.phase == Some(Phase::Shutdown))
        .await;
    let shutdown = status.shutdown.expect("shutdown recorded");
    assert_eq!(shutdown.kind, ShutdownType::Voluntary);
    assert_eq!(shutdown.source.as_deref(), Some("Rule"));
    assert_left_alone(&ns, "finisher").await;
}

#[tokio::test]
async fn a_shutdown_patched_in_by_someone_else_is_respected_and_kept() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", policy()).await;
    ns.create_agent("managed", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("managed-1").await;
    ns.wait_status("managed", "Running", |s| s.phase == Some(Phase::Running))
        .await;

    // The economy service (here: kubectl) decides the agent is out of budget.
    kubectl_patch_status(
        &ns,
        "managed",
        r#"{"status":{"shutdown":{"type":"Economic","reason":"monthly budget spent"}}}"#,
    );
    ns.wait_status("managed", "Shutdown", |s| s.phase == Some(Phase::Shutdown))
        .await;
    ns.wait_event("managed", "ShutdownRespected").await;
    // Even a crash now is not the operator's business.
    ns.terminate("managed-1", 1, "Error", "crash while shut down")
        .await;
    assert_left_alone(&ns, "managed").await;
    let status = ns.status("managed").await;
    assert_eq!(status.restart_count, 0);
    assert_eq!(
        status.consecutive_failures, 0,
        "no failure is counted while shut down"
    );
    let shutdown = status.shutdown.unwrap();
    assert_eq!(shutdown.reason.as_deref(), Some("monthly budget spent"));
    assert_eq!(shutdown.source, None, "the operator added nothing to it");
    assert_clearing_resumes(&ns, "managed", "managed-2").await;
}
