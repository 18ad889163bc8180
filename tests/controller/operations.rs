//! What people do to agents: restart, reset, change the template — and what happens when the
//! operator itself is killed.

use std::time::Duration;

use agent_supervisor::api::{Agent, Phase, Trigger};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::support::{Operator, TestNamespace};
use crate::{fast_policy, setup};

async fn annotate(ns: &TestNamespace, agent: &str, key: &str, value: &str) {
    let patch = json!({ "metadata": { "annotations": { key: value } } });
    ns.api::<Agent>()
        .patch(agent, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate");
}

#[tokio::test]
async fn a_manual_restart_happens_once_per_value_and_counts_toward_nothing() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", fast_policy("1s")).await;
    ns.create_policy("q", fast_policy("1s")).await;
    let pods = ns.record_pods().await;
    ns.create_agent("worker", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("worker-1").await;
    annotate(
        &ns,
        "worker",
        "supervisor.dev/restart-requested-at",
        "2026-11-21T10:00:00Z",
    )
    .await;
    ns.wait_running("worker-2").await;
    let status = ns
        .wait_status("worker", "the manual restart", |s| {
            s.restart_count == 1 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(status.restart_history[0].trigger, Trigger::Manual);
    assert_eq!(status.consecutive_failures, 0);
    assert!(status.recent_restarts.is_empty());
    ns.wait_event("worker", "ManualRestart").await;
    ns.wait_gone("worker-1").await;

    // The same value again does nothing. A spec change (an identical policy) makes the operator
    // decide again with the request still there, and say so with observedGeneration.
    let patch = json!({ "spec": { "restartPolicyRef": { "name": "q" } } });
    let generation = ns
        .api::<Agent>()
        .patch("worker", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("change the policy")
        .metadata
        .generation;
    let status = ns
        .wait_status("worker", "the new generation observed", |s| {
            s.observed_generation >= generation
        })
        .await;
    assert_eq!(status.attempt, 2, "a handled request is not repeated");
    // A new value restarts once more, and exactly once: the old one was never acted on again.
    annotate(
        &ns,
        "worker",
        "supervisor.dev/restart-requested-at",
        "2026-11-21T11:00:00Z",
    )
    .await;
    ns.wait_running("worker-3").await;
    let status = ns
        .wait_status("worker", "the second manual restart", |s| {
            s.restart_count == 2 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(status.attempt, 3, "a handled request is not repeated");
    assert_eq!(
        status.handled_restart_request.as_deref(),
        Some("2026-11-21T11:00:00Z")
    );
    let triggers: Vec<_> = status.restart_history.iter().map(|r| r.trigger).collect();
    assert_eq!(triggers, [Trigger::Manual, Trigger::Manual]);
    let ever: Vec<String> = pods
        .distinct()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(
        ever,
        ["worker-1", "worker-2", "worker-3"],
        "one pod per distinct request"
    );
}

#[tokio::test]
async fn a_template_change_rolls_the_pod_out_without_counting() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", fast_policy("1s")).await;
    ns.create_agent("roller", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("roller-1").await;
    let patch = json!({ "spec": { "template": { "spec": { "containers": [{ "name": "agent", "image": "example.invalid/agent:2" }] } } } });
    ns.api::<Agent>()
        .patch("roller", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("change template");
    let pod = ns.wait_running("roller-2").await;
    assert_eq!(
        pod.spec.unwrap().containers[0].image.as_deref(),
        Some("example.invalid/agent:2")
    );
    let status = ns
        .wait_status("roller", "the rollout", |s| {
            s.phase == Some(Phase::Running) && s.attempt == 2
        })
        .await;
    assert_eq!(status.restart_history[0].trigger, Trigger::Rollout);
    assert_eq!(status.consecutive_failures, 0);
    assert!(
        status.recent_restarts.is_empty(),
        "a rollout counts toward no limit"
    );
    assert!(status.last_failure.is_none(), "a rollout is not a failure");
    ns.wait_event("roller", "RolledOut").await;
}

#[tokio::test]
async fn a_killed_operator_restarts_at_the_scheduled_time_without_a_second_pod() {
    let ns = TestNamespace::new().await;
    crate::support::install_crds(&ns.client).await;
    // The backoff written at once, so that the operator is killed with it written.
    let operator = Operator::start_prompt(&ns.name).await;
    ns.create_policy("p", fast_policy("8s")).await;
    let versions = ns.record_agent("phoenix").await;
    let pods = ns.record_pods().await;
    ns.create_agent("phoenix", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("phoenix-1").await;
    ns.terminate("phoenix-1", 1, "Error", "crash").await;
    let backing_off = versions
        .wait_for("agent phoenix: BackingOff", |a| {
            a.status.as_ref().and_then(|s| s.phase) == Some(Phase::BackingOff)
        })
        .await
        .status
        .unwrap();
    let scheduled = backing_off.next_restart_at.unwrap().0;

    operator.kill().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _operator = Operator::start(&ns.name).await;

    // Eventually restarted, never before the scheduled time.
    let pod = ns.wait_running("phoenix-2").await;
    let created = pod.metadata.creation_timestamp.unwrap().0;
    assert!(
        created >= scheduled,
        "restarted at {created}, before the scheduled {scheduled}"
    );
    // The new operator kept the schedule it found: while backing off, the status never named
    // another time, and the restart was recorded at or after it.
    let moved: Vec<_> = versions
        .versions()
        .into_iter()
        .filter_map(|a| a.status)
        .filter(|s| s.phase == Some(Phase::BackingOff))
        .filter_map(|s| s.next_restart_at)
        .filter(|t| t.0 != scheduled)
        .collect();
    assert!(
        moved.is_empty(),
        "the restart was rescheduled from {scheduled} to {moved:?}"
    );
    // The replacement runs and the operator records it: it has acted on the restart.
    let status = ns
        .wait_status("phoenix", "restartCount 1 and Running", |s| {
            s.restart_count == 1 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(status.attempt, 2);
    let restarted_at = status.restart_history[0].restarted_at.clone().unwrap().0;
    assert!(
        restarted_at >= scheduled && restarted_at <= created,
        "restart recorded at {restarted_at}, not between {scheduled} and the pod's creation {created}"
    );
    // Over the whole run: one pod per attempt, and the count never went past one.
    let ever: Vec<String> = pods
        .distinct()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(ever, ["phoenix-1", "phoenix-2"], "no second pod");
    let counts: Vec<u32> = versions
        .versions()
        .into_iter()
        .filter_map(|a| a.status)
        .map(|s| s.restart_count)
        .collect();
    assert!(
        counts.iter().all(|&c| c <= 1),
        "restartCount went past 1: {counts:?}"
    );
    let pods = ns.api::<Pod>().list(&ListParams::default()).await.unwrap();
    let live: Vec<_> = pods
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(live, ["phoenix-2"], "exactly one live pod");
    assert_eq!(
        ns.status("phoenix").await.restart_count,
        1,
        "restartCount stays exact"
    );
}

#[tokio::test]
async fn kubectl_describe_shows_the_restart_history_and_events() {
    let (ns, _operator) = setup().await;
    ns.create_policy("p", fast_policy("1s")).await;
    ns.create_agent("described", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("described-1").await;
    ns.terminate("described-1", 3, "Error", "config file missing")
        .await;
    ns.wait_running("described-2").await;
    ns.wait_status("described", "restart recorded", |s| s.restart_count == 1)
        .await;
    // A restart due by the time the crash is seen is told with it ("restarted as pod …");
    // else the crash says when ("restarting in …") and a Restarted Event follows.
    let text = crate::support::eventually(
        crate::support::kubelet::REACT,
        "kubectl describe telling the crash and the restart",
        || async {
            let out = crate::support::kubectl()
                .args(["-n", &ns.name, "describe", "agent", "described"])
                .output()
                .expect("run kubectl describe");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let told = text.contains("restarted as pod described-2")
                || (text.contains("restarting in") && text.contains("Restarted"));
            told.then_some(text)
        },
    )
    .await;
    for want in [
        "Restart History:",
        "Trigger:",
        "Failure",
        "Exit Code:",
        "config file missing",
        "Restarted At:",
        "Events:",
        "Crashed",
    ] {
        assert!(
            text.contains(want),
            "kubectl describe lacks {want:?}:\n{text}"
        );
    }
}

#[tokio::test]
async fn a_missing_policy_holds_the_agent_until_it_appears() {
    let (ns, _operator) = setup().await;
    ns.create_agent(
        "waiting",
        json!({ "restartPolicyRef": { "name": "later" } }),
    )
    .await;
    let status = ns
        .wait_status("waiting", "PolicyResolved=False", |s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "PolicyResolved" && c.status == "False")
        })
        .await;
    assert_eq!(status.attempt, 0, "no pod without its policy");
    let note = ns.wait_event("waiting", "PolicyNotFound").await;
    assert!(note.contains("later"), "{note}");
    assert!(
        ns.api::<Pod>()
            .get_opt("waiting-1")
            .await
            .unwrap()
            .is_none()
    );

    // Creating the policy re-reconciles the agents that name it.
    ns.create_policy("later", fast_policy("1s")).await;
    ns.wait_running("waiting-1").await;
    let status = ns
        .wait_status("waiting", "Running", |s| s.phase == Some(Phase::Running))
        .await;
    assert_eq!(status.restart_count, 0, "a first start, not a restart");
    assert!(status.last_failure.is_none());
}
