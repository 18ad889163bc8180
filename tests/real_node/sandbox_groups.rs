//! Sandboxes under the rest of the operator's supervision, on the real node with agent-sandbox's
//! own controller: a Sandbox as a member of a `OneForAll` AgentGroup, its running pod restarted
//! when a sibling crashes; and a Sandbox whose crashes report what they spent, stopped by its
//! spend budget and suspended.

use agent_supervisor::api::sandbox::SUSPENDED_BY_OPERATOR_ANNOTATION;
use agent_supervisor::api::{
    FailureReason, GroupPhase, GroupTrigger, Phase, ShutdownType, Trigger,
};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::json;

use crate::install::shell_template;
use crate::sandboxes::{REAL, create_sandbox, operating_mode, sandboxes, setup};
use crate::support::{TestNamespace, eventually};

/// The Sandbox's pod if it runs as `attempt` of its Agent.
async fn running_attempt(ns: &TestNamespace, sandbox: &str, attempt: u32) -> Option<Pod> {
    let pod = ns.api::<Pod>().get_opt(sandbox).await.ok()??;
    let label = pod.labels().get("supervisor.dev/attempt").cloned();
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    (label == Some(attempt.to_string()) && running && pod.metadata.deletion_timestamp.is_none())
        .then_some(pod)
}

/// The uids of the pods recorded whose name is `name`.
fn uids(pods: &[Pod], name: &str) -> Vec<String> {
    pods.iter()
        .filter(|p| p.name_any() == name)
        .filter_map(|p| p.uid())
        .collect()
}

/// Each recorded pod as (name, uid), for a failure's message.
fn names(pods: &[Pod]) -> Vec<(String, Option<String>)> {
    pods.iter().map(|p| (p.name_any(), p.uid())).collect()
}

#[tokio::test]
async fn a_sandbox_in_a_one_for_all_group_is_restarted_when_its_sibling_crashes() {
    let (ns, operator) = setup().await;
    let pods = ns.record_pods().await;
    ns.create_policy(
        "steady",
        json!({ "backoff": { "type": "Linear", "initialDelay": "2s", "maxDelay": "2s", "jitter": 0.0 },
                "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    let policy = json!({ "name": "steady" });
    create_sandbox(&ns, "box", "sleep 3600", Some("Never")).await;
    ns.create_agent(
        "boxed",
        json!({ "sandboxRef": { "name": "box" }, "restartPolicyRef": policy }),
    )
    .await;
    // Runs until the test tells it to crash (a file in its own /tmp, which a new pod lacks).
    let worker = "while [ ! -e /tmp/crash ]; do sleep 1; done; \
                  echo 'told to crash' >/dev/termination-log; exit 3";
    ns.create_agent(
        "worker",
        json!({ "restartPolicyRef": policy, "template": shell_template(worker, json!({})) }),
    )
    .await;
    ns.create_group(
        "pair",
        json!({ "strategy": "OneForAll",
                "members": [{ "agent": "boxed" }, { "agent": "worker" }] }),
    )
    .await;
    let first = eventually(REAL, "the Sandbox's pod running as attempt 1", || {
        running_attempt(&ns, "box", 1)
    })
    .await;
    ns.wait_status_for(REAL, "worker", "attempt 1 running", |s| {
        s.attempt == 1 && s.phase == Some(Phase::Running)
    })
    .await;
    let boxed = ns
        .wait_status_for(REAL, "boxed", "attempt 1 running in the group", |s| {
            s.attempt == 1 && s.phase == Some(Phase::Running) && s.group.is_some()
        })
        .await;
    assert_eq!(boxed.group.map(|g| g.name).as_deref(), Some("pair"));

    // The worker crashes for real: its container exits 3, saying why.
    let out = crate::support::kubectl()
        .args(["exec", "-n", &ns.name, "worker-1", "-c", "agent", "--"])
        .args(["touch", "/tmp/crash"])
        .output()
        .expect("run kubectl exec");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The Sandbox's running pod is restarted with it: a new pod, made by agent-sandbox's
    // controller, adopted as attempt 2.
    let second = eventually(REAL, "the Sandbox's pod running as attempt 2", || {
        running_attempt(&ns, "box", 2)
    })
    .await;
    assert_ne!(second.uid(), first.uid(), "a new pod for the group restart");
    let worker = ns
        .wait_status_for(REAL, "worker", "attempt 2 running", |s| {
            s.attempt == 2 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(worker.restart_count, 1, "{worker:?}");
    let crash = &worker.restart_history[0];
    assert_eq!(crash.trigger, Trigger::Failure, "{crash:?}");
    assert_eq!(
        (crash.exit_code, crash.reason),
        (Some(3), Some(FailureReason::Error))
    );
    assert_eq!(
        crash.message.as_deref().map(str::trim),
        Some("told to crash")
    );

    // Recorded on the Sandbox's Agent as a restart by its group: not a failure of its own,
    // counted toward none of its limits.
    let boxed = ns
        .wait_status_for(REAL, "boxed", "attempt 2 running", |s| {
            s.attempt == 2 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(boxed.restart_count, 1, "{boxed:?}");
    assert_eq!(
        boxed.restart_history.len(),
        1,
        "{:?}",
        boxed.restart_history
    );
    let record = &boxed.restart_history[0];
    assert_eq!(
        (record.attempt, record.trigger),
        (1, Trigger::Group),
        "{record:?}"
    );
    assert_eq!(record.reason, None, "{record:?}");
    // Restarted together with the worker, when the worker's restart was due (2 s): not before.
    let failed = crash.failed_at.clone().expect("the crash's time").0;
    let restarted = record.restarted_at.clone().expect("restarted").0;
    assert!(
        restarted >= failed + jiff::SignedDuration::from_secs(2),
        "restarted at {restarted}, the worker failed at {failed}, backoff 2s"
    );
    assert_eq!(boxed.consecutive_failures, 0, "{boxed:?}");
    assert!(boxed.recent_restarts.is_empty(), "{boxed:?}");
    assert_eq!(operating_mode(&ns, "box").await.as_deref(), Some("Running"));

    let group = ns
        .wait_group("pair", "running after one restart", |s| {
            s.phase == Some(GroupPhase::Running) && s.restart_count >= 1
        })
        .await;
    assert_eq!(group.restart_count, 1, "{group:?}");
    let restart = &group.restart_history[0];
    assert_eq!(restart.member.as_deref(), Some("worker"), "{restart:?}");
    assert_eq!(restart.restarted, ["boxed", "worker"], "in member order");
    assert_eq!(restart.trigger, GroupTrigger::Failure);
    let note = ns.wait_group_event("pair", "GroupRestart").await;
    assert!(note.contains("worker"), "{note}");

    // Nothing done twice: decided on once more, each has had exactly two pods.
    let again = ns.decided_again("boxed").await;
    assert_eq!((again.attempt, again.restart_count), (2, 1), "{again:?}");
    let seen = pods.distinct();
    assert_eq!(
        uids(&seen, "box").len(),
        2,
        "the Sandbox's pods: {:?}",
        names(&seen)
    );
    assert_eq!(uids(&seen, "worker-1").len(), 1);
    assert_eq!(uids(&seen, "worker-2").len(), 1);
    assert!(uids(&seen, "worker-3").is_empty());
    operator.stop().await;
}

#[tokio::test]
async fn a_sandbox_that_spends_its_budget_is_shut_down_and_suspended() {
    let (ns, operator) = setup().await;
    let pods = ns.record_pods().await;
    ns.create_policy(
        "metered",
        json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 0 },
                "budget": { "maxCost": "1.00" } }),
    )
    .await;
    // Each attempt spends 0.40 and crashes: the third brings the total to 1.20.
    let burn = r#"sleep 1; echo '{"reason":"tool failed","spend":{"cost":"0.40","tokens":100}}' >/dev/termination-log; exit 1"#;
    create_sandbox(&ns, "burner", burn, Some("Never")).await;
    ns.create_agent(
        "burner",
        json!({ "sandboxRef": { "name": "burner" }, "restartPolicyRef": { "name": "metered" } }),
    )
    .await;

    let status = ns
        .wait_status_for(REAL, "burner", "shut down by its budget", |s| {
            s.phase == Some(Phase::Shutdown)
        })
        .await;
    let shutdown = status.shutdown.clone().expect("a shutdown");
    assert_eq!(shutdown.kind, ShutdownType::Economic, "{shutdown:?}");
    assert_eq!(shutdown.source.as_deref(), Some("Budget"), "{shutdown:?}");
    assert_eq!(
        shutdown.reason.as_deref(),
        Some("spend budget exhausted: 1.20 of 1.00")
    );
    let spend = status.spend.clone().expect("spend recorded");
    assert_eq!(
        (spend.cost.as_deref(), spend.tokens),
        (Some("1.20"), Some(300))
    );
    assert_eq!((status.attempt, status.restart_count), (3, 2), "{status:?}");
    for record in &status.restart_history {
        assert_eq!(record.reason, Some(FailureReason::Error), "{record:?}");
        assert_eq!(record.message.as_deref(), Some("tool failed"), "{record:?}");
    }
    // The warning came first, at 0.80 (warnAt 0.8), and its condition stays.
    let low = ns.wait_event("burner", "BudgetLow").await;
    assert!(low.contains("0.80 of 1.00"), "{low}");
    let condition = status.conditions.iter().find(|c| c.type_ == "BudgetLow");
    assert_eq!(
        condition.map(|c| c.status.as_str()),
        Some("True"),
        "{status:?}"
    );
    let note = ns.wait_event("burner", "BudgetExhausted").await;
    assert!(note.contains("1.20 of 1.00"), "{note}");
    let events = ns.event_objects("burner").await;
    let exhausted = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("BudgetExhausted"))
        .expect("the BudgetExhausted Event");
    assert_eq!(exhausted.type_.as_deref(), Some("Warning"));

    // The Sandbox is suspended by the operator, and its pod goes with it.
    eventually(REAL, "the Sandbox suspended by the budget stop", || async {
        (operating_mode(&ns, "burner").await.as_deref() == Some("Suspended")).then_some(())
    })
    .await;
    let sandbox = sandboxes(&ns).get("burner").await.expect("the Sandbox");
    assert_eq!(
        sandbox
            .annotations()
            .get(SUSPENDED_BY_OPERATOR_ANNOTATION)
            .map(String::as_str),
        Some("true")
    );
    eventually(REAL, "the Sandbox's pod gone", || async {
        ns.api::<Pod>()
            .get_opt("burner")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;

    // Decided on once more, nothing changes: no fourth attempt, three pods in all.
    let again = ns.decided_again("burner").await;
    assert_eq!((again.phase, again.attempt), (Some(Phase::Shutdown), 3));
    assert_eq!(again.shutdown, status.shutdown);
    assert_eq!(
        operating_mode(&ns, "burner").await.as_deref(),
        Some("Suspended")
    );
    let seen = pods.distinct();
    assert_eq!(
        uids(&seen, "burner").len(),
        3,
        "one pod per attempt: {:?}",
        names(&seen)
    );
    operator.stop().await;
}
