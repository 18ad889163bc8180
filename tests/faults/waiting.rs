//! What waits for its write when something happens first (SPEC, "Nothing decided is lost"): the
//! operator killed while a change waits keeps the restart's time to the second; someone else's
//! status write while a change waits keeps what happened before it, also when it comes just
//! before a graceful stop; finished pods removed by others while the operator is down still
//! count as restarts.

use std::sync::Arc;
use std::time::Duration;

use agent_supervisor::controller::WatchFaults;
use agent_supervisor::controller::metrics::Metrics;

use agent_supervisor::api::{AgentStatus, Phase, Time, Trigger};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::support::{self, Operator, TestNamespace};

/// An interval long enough that every change after a test's first crash waits for it.
const LONG: Duration = Duration::from_secs(300);

/// A namespace with the CRDs and an operator whose status interval is `LONG`.
async fn waiting_operator() -> (TestNamespace, Operator) {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let operator = start(&ns).await;
    (ns, operator)
}

async fn start(ns: &TestNamespace) -> Operator {
    start_counted(ns, Arc::default()).await
}

/// `start`, with the operator's metrics in `metrics`.
async fn start_counted(ns: &TestNamespace, metrics: Arc<Metrics>) -> Operator {
    let config = agent_supervisor::controller::Config {
        namespaces: vec![ns.name.clone()],
        status_interval: LONG,
        metrics,
        ..Default::default()
    };
    Operator::start_with_config(Operator::admin_client().await, config)
}

/// When the pod's agent container finished, as its status says.
async fn finished_at(ns: &TestNamespace, pod: &str) -> jiff::Timestamp {
    let pod = ns.api::<Pod>().get(pod).await.expect("the pod");
    let statuses = pod.status.and_then(|s| s.container_statuses).unwrap();
    let terminated = statuses[0].state.clone().and_then(|s| s.terminated);
    terminated.and_then(|t| t.finished_at).expect("finished").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_while_a_crash_waits_keeps_its_restart_time() {
    let (ns, operator) = waiting_operator().await;
    ns.create_policy(
        "linear",
        json!({ "backoff": { "type": "Linear", "initialDelay": "20s", "maxDelay": "5m", "jitter": 0.0 },
                "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    ns.create_agent("slow", json!({ "restartPolicyRef": { "name": "linear" } }))
        .await;
    ns.wait_running("slow-1").await;
    ns.terminate("slow-1", 1, "Error", "first").await;
    // The first crash is written at once; its restart comes 20 s after it.
    ns.wait_running("slow-2").await;
    ns.terminate("slow-2", 1, "Error", "second").await;
    let ended = finished_at(&ns, "slow-2").await;
    // The second crash waits for the interval in the first operator, which dies with it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = ns.status("slow").await;
    assert_eq!(
        (written.attempt, written.restart_count),
        (1, 0),
        "the restart and the second crash wait: {written:?}"
    );
    operator.kill().await;
    // A successor a few seconds later decides it again: the same instant, from when it ended.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let _successor = start(&ns).await;
    let status = ns
        .wait_status("slow", "the second crash recorded", |s| {
            s.restart_history.first().is_some_and(|r| r.attempt == 2)
        })
        .await;
    let due = ended + jiff::SignedDuration::from_secs(40);
    assert_eq!(status.phase, Some(Phase::BackingOff), "{status:?}");
    assert_eq!(status.next_restart_at, Some(Time(due)), "Linear: 2 × 20 s");
    // And the restart is made then, not before.
    let next = ns.wait_pod("slow-3").await;
    let created = next.metadata.creation_timestamp.expect("created").0;
    assert!(created >= due, "created {created}, due {due}");
}

/// Crashes `looper`'s attempts `attempts` in turn, and waits for the next to run.
async fn crash(ns: &TestNamespace, attempts: std::ops::RangeInclusive<u32>) {
    let next = format!("looper-{}", attempts.end() + 1);
    ns.crash_looper(attempts).await;
    ns.wait_running(&next).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_written_by_others_while_a_crash_waits_keeps_the_crash() {
    let (ns, _operator) = waiting_operator().await;
    ns.looper().await;
    two_crashes_the_second_waiting(&ns).await;
    // An economy service shuts the agent down while the second crash's record waits.
    let patch = json!({ "status": { "shutdown": {
        "type": "Economic", "reason": "out of money", "source": "economy" } } });
    ns.api::<agent_supervisor::api::Agent>()
        .patch_status("looper", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch the shutdown");
    let status = ns
        .wait_status("looper", "the shutdown respected", |s| {
            s.phase == Some(Phase::Shutdown)
        })
        .await;
    assert_both_crashes(&status, "the second restart happened before the shutdown");
    let shutdown = status.shutdown.expect("theirs, kept");
    assert_eq!(shutdown.source.as_deref(), Some("economy"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_written_by_others_just_before_a_graceful_stop_keeps_both() {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    // Its watches are late: it stops before it can see the other write, so the pending status
    // it writes on stopping is refused (409) and must be moved onto theirs.
    let metrics = Arc::new(Metrics::default());
    let pending = metrics.status_pending.clone();
    let config = agent_supervisor::controller::Config {
        namespaces: vec![ns.name.clone()],
        status_interval: LONG,
        metrics,
        faults: WatchFaults {
            lag: Some(Duration::from_secs(3)),
            ..WatchFaults::default()
        },
        ..Default::default()
    };
    let operator = Operator::start_with_config(Operator::admin_client().await, config);
    ns.looper().await;
    let written = two_crashes_the_second_waiting(&ns).await;
    support::eventually(Duration::from_secs(30), "the second crash held", || {
        let pending = pending.clone();
        async move { (pending.get() == 1).then_some(()) }
    })
    .await;
    // Another controller adds a condition of its own, and the operator is stopped at once.
    let mut conditions = serde_json::to_value(&written.conditions).expect("conditions");
    conditions.as_array_mut().expect("a list").push(json!({
        "type": "Reviewed", "status": "True", "reason": "Audited",
        "message": "looked at by a person", "lastTransitionTime": "2026-01-01T00:00:00Z" }));
    let patch = json!({ "status": { "conditions": conditions } });
    ns.api::<agent_supervisor::api::Agent>()
        .patch_status("looper", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("add a condition");
    operator.stop().await;
    let status = ns.status("looper").await;
    assert_both_crashes(&status, "the pending crash written on stopping");
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert!(types.contains(&"Reviewed"), "theirs, kept: {types:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_pods_removed_while_the_operator_is_down_still_count() {
    let (ns, operator) = waiting_operator().await;
    let pods = ns.record_pods().await;
    ns.looper().await;
    crash(&ns, 1..=4).await;
    let written = ns
        .wait_status("looper", "the first crash written", |s| {
            s.restart_count == 1
        })
        .await;
    assert_eq!(written.attempt, 2, "crashes 2 to 4 wait: {written:?}");
    operator.kill().await;
    // Someone removes two finished pods whose ends were never written.
    for pod in ["looper-3", "looper-4"] {
        ns.api::<Pod>()
            .delete(pod, &DeleteParams::default())
            .await
            .expect("delete a finished pod");
        ns.wait_gone(pod).await;
    }
    let _successor = start(&ns).await;
    let status = ns
        .wait_status("looper", "attempt 5 adopted", |s| s.attempt == 5)
        .await;
    assert_eq!(status.restart_count, 4, "every restart counted: {status:?}");
    let history: Vec<_> = status
        .restart_history
        .iter()
        .map(|r| (r.attempt, r.trigger, r.exit_code, r.message.as_deref()))
        .collect();
    let gone = Some("pod gone before its end was recorded");
    assert_eq!(
        history,
        [
            (4, Trigger::Failure, None, gone),
            (3, Trigger::Failure, None, gone),
            (2, Trigger::Failure, Some(2), Some("failure 2")),
            (1, Trigger::Failure, Some(1), Some("failure 1")),
        ]
    );
    // Nothing was made again: five pods in all, one live.
    let made: std::collections::BTreeSet<String> = pods
        .all()
        .into_iter()
        .filter_map(|(_, p)| p.metadata.name)
        .collect();
    assert_eq!(made.len(), 5, "pods made: {made:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_attempts_lease_report_is_written_before_the_lease_changes_hands() {
    let (ns, operator) = waiting_operator().await;
    ns.create_immediate_policy().await;
    ns.create_agent(
        "spender",
        json!({ "restartPolicyRef": { "name": "immediate" }, "heartbeat": { "timeout": "5m" } }),
    )
    .await;
    ns.wait_running("spender-1").await;
    ns.report_spend("spender", "spender-1", r#"{"cost": "0.50"}"#)
        .await;
    // It dies without last words (nothing written yet: the first record waits for the long
    // interval); the next attempt takes the Lease and reports its own.
    ns.terminate("spender-1", 1, "Error", "").await;
    ns.wait_running("spender-2").await;
    ns.report_spend("spender", "spender-2", r#"{"cost": "0.10"}"#)
        .await;
    let written = ns
        .wait_status("spender", "attempt 1's end written", |s| s.attempt >= 1)
        .await;
    let cost =
        |s: &agent_supervisor::api::AgentStatus| s.spend.as_ref().and_then(|s| s.cost.clone());
    assert_eq!(
        cost(&written).as_deref(),
        Some("0.50"),
        "written before attempt 2 existed: {written:?}"
    );
    operator.kill().await;
    // A successor takes attempt 2's report from the Lease (attempt 1's from the status): its
    // first change is written at once, a later one waits for the interval, and a graceful stop
    // writes what waits.
    let metrics = Arc::new(Metrics::default());
    let pending = metrics.status_pending.clone();
    let successor = start_counted(&ns, metrics).await;
    support::eventually(Duration::from_secs(60), "the report decided", || {
        let (ns, pending) = (&ns, pending.clone());
        async move {
            let written = ns.status("spender").await;
            let counted = written.spend.is_some_and(|s| s.current.attempt == 2);
            (counted || pending.get() == 1).then_some(())
        }
    })
    .await;
    successor.stop().await;
    let status = ns.status("spender").await;
    assert_eq!(status.spend.as_ref().map(|s| s.current.attempt), Some(2));
    assert_eq!(
        cost(&status).as_deref(),
        Some("0.60"),
        "each attempt once: {status:?}"
    );
}

/// The looper's two crashes (exit codes 1 and 2) both in the record, and its third attempt.
fn assert_both_crashes(status: &AgentStatus, why: &str) {
    assert_eq!(
        (status.restart_count, status.attempt),
        (2, 3),
        "{why}: {status:?}"
    );
    let history: Vec<_> = status
        .restart_history
        .iter()
        .map(|r| (r.attempt, r.exit_code))
        .collect();
    assert_eq!(history, [(2, Some(2)), (1, Some(1))], "{why}");
}

/// The looper crashes twice in a row: the first crash is written, the second waits for the
/// interval. The status as the first crash's write left it.
async fn two_crashes_the_second_waiting(ns: &TestNamespace) -> AgentStatus {
    crash(ns, 1..=2).await;
    let written = ns
        .wait_status("looper", "the first crash written", |s| {
            s.restart_count == 1
        })
        .await;
    assert_eq!(written.attempt, 2, "the second crash waits: {written:?}");
    written
}
