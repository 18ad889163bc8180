//! Heartbeats: an agent is alive iff it recently proved it, by renewing its Lease.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_supervisor::api::{FailureReason, Phase, Trigger};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::setup;
use crate::support::TestNamespace;

/// The heartbeat timeout (and grace period) of the test agents. The renewers below renew
/// every half second: a renewer would have to fall sixteen periods behind before a healthy
/// agent could look hung, which load alone does not do.
const TIMEOUT_SECS: i64 = 8;
const RENEW_EVERY: Duration = Duration::from_millis(500);

/// (renewTime written, when the write returned) of each renewal that succeeded.
type Renewals = Arc<Mutex<Vec<(jiff::Timestamp, jiff::Timestamp)>>>;

/// Renews the Lease `lease` as `holder` from a task of its own, as the agent process would,
/// until aborted, and records its renewals.
fn renewer(
    ns: &TestNamespace,
    lease: &str,
    holder: &str,
) -> (tokio::task::JoinHandle<()>, Renewals) {
    let leases: kube::Api<Lease> = ns.api();
    let (lease, holder) = (lease.to_string(), holder.to_string());
    let renewed = Arc::new(Mutex::new(Vec::new()));
    let task = tokio::spawn({
        let renewed = renewed.clone();
        async move {
            loop {
                let now = jiff::Timestamp::now();
                let stamp = now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
                let patch = json!({ "spec": { "holderIdentity": holder, "renewTime": stamp } });
                if leases
                    .patch(&lease, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .is_ok()
                {
                    renewed.lock().unwrap().push((now, jiff::Timestamp::now()));
                }
                tokio::time::sleep(RENEW_EVERY).await;
            }
        }
    });
    (task, renewed)
}

fn heartbeat_agent() -> serde_json::Value {
    json!({
        "restartPolicyRef": { "name": "p" },
        "heartbeat": { "timeout": format!("{TIMEOUT_SECS}s"), "gracePeriod": format!("{TIMEOUT_SECS}s") },
    })
}

fn whole_second(t: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_second(t.as_second()).unwrap()
}

async fn create_heartbeat_agent(ns: &TestNamespace, name: &str) {
    ns.create_policy(
        "p",
        json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    ns.create_agent(name, heartbeat_agent()).await;
}

#[tokio::test]
async fn a_renewing_agent_stays_and_a_silent_one_is_restarted() {
    let (ns, _operator) = setup().await;
    // After the first HeartbeatLost, the next pod (which nobody renews) is lost too, a grace
    // period later: the watches keep the first failure and the second pod's run.
    let versions = ns.record_agent("beater").await;
    let pods = ns.record_pods().await;
    create_heartbeat_agent(&ns, "beater").await;
    // The agent renews from the start (renewals fail until the operator creates the Lease), so
    // a test that sees the pod run late cannot miss the grace period.
    let (task, renewed) = renewer(&ns, "beater", "beater-1");
    let pod = ns.wait_running("beater-1").await;
    let env = pod.spec.unwrap().containers[0].env.clone().unwrap();
    let lease_name = env
        .iter()
        .find(|e| e.name == "AGENT_HEARTBEAT_LEASE")
        .and_then(|e| e.value.clone());
    assert_eq!(
        lease_name.as_deref(),
        Some("beater"),
        "the pod is told its Lease"
    );
    let lease = ns
        .api::<Lease>()
        .get("beater")
        .await
        .expect("the operator created the Lease");
    let owner = &lease.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Agent", "beater")
    );

    // Renewing for two and a half timeouts keeps it alive.
    tokio::time::sleep(Duration::from_secs(TIMEOUT_SECS as u64 * 5 / 2)).await;
    task.abort();
    let _ = task.await;
    let renewed = renewed.lock().unwrap().clone();
    // The Lease was never older than the timeout: from each renewal's time to the moment the
    // next one was written.
    let longest = renewed
        .windows(2)
        .map(|w| w[1].1.duration_since(w[0].0))
        .max()
        .expect("the renewer renewed");
    assert!(
        longest < jiff::SignedDuration::from_secs(TIMEOUT_SECS),
        "the test's renewer fell {longest:?} behind: it cannot show a renewing agent"
    );
    let last_renewal = renewed.last().unwrap().0;
    let status = ns.status("beater").await;
    assert_eq!(
        (status.attempt, status.phase),
        (1, Some(Phase::Running)),
        "a renewing agent is left running"
    );
    assert!(status.last_failure.is_none(), "{:?}", status.last_failure);

    // Silence: hung. Deleted, recorded as HeartbeatLost, restarted.
    let status = versions
        .wait_for("agent beater: a HeartbeatLost failure", |a| {
            a.status.as_ref().is_some_and(|s| s.last_failure.is_some())
        })
        .await
        .status
        .unwrap();
    let failure = status.last_failure.unwrap();
    assert_eq!(failure.reason, FailureReason::HeartbeatLost);
    assert_eq!(status.restart_history[0].trigger, Trigger::HeartbeatLost);
    // Only once the last renewal was a whole timeout old: never while it was renewed. (The
    // operator records whole seconds.)
    let lapsed = whole_second(last_renewal + jiff::SignedDuration::from_secs(TIMEOUT_SECS));
    assert!(
        failure.time.0 >= lapsed,
        "declared hung at {}, before the last renewal ({last_renewal}) had lapsed",
        failure.time.0
    );
    assert_eq!(
        status.restart_history.len(),
        1,
        "one failure: {:?}",
        status.restart_history
    );
    assert_eq!(status.restart_history[0].attempt, 1);
    ns.wait_event("beater", "HeartbeatLost").await;
    ns.wait_gone("beater-1").await;
    pods.wait_for("pod beater-2 to run", |p| {
        p.metadata.name.as_deref() == Some("beater-2")
            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
}

#[tokio::test]
async fn renewal_by_a_stale_holder_does_not_count() {
    let (ns, _operator) = setup().await;
    // haunted-1 runs only until its grace period ends: the pod watch sees it run.
    let pods = ns.record_pods().await;
    create_heartbeat_agent(&ns, "haunted").await;
    let pod = pods
        .wait_for("pod haunted-1 to run", |p| {
            p.metadata.name.as_deref() == Some("haunted-1")
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .await;
    // A process from an earlier attempt keeps renewing: it is not the current pod.
    let (stale, _) = renewer(&ns, "haunted", "haunted-0");
    let status = ns
        .wait_status("haunted", "a HeartbeatLost failure", |s| {
            s.last_failure.is_some()
        })
        .await;
    stale.abort();
    let failure = status.last_failure.unwrap();
    assert_eq!(failure.reason, FailureReason::HeartbeatLost);
    assert!(
        failure.message.unwrap_or_default().contains("haunted-0"),
        "the message names the stale holder"
    );
    // Not before the grace period after the pod started had ended.
    let started = pod.status.unwrap().start_time.expect("a start time").0;
    let grace_end = started + jiff::SignedDuration::from_secs(TIMEOUT_SECS);
    assert!(
        failure.time.0 >= grace_end,
        "declared hung at {}, within the grace period (until {grace_end})",
        failure.time.0
    );
}

/// The operator in this test process with every watch event `lag` late (its caches stale).
fn start_lagging(namespace: &str, lag: Duration) -> tokio::task::JoinHandle<()> {
    let namespace = namespace.to_string();
    tokio::spawn(async move {
        let client =
            kube::Client::try_from(crate::support::admin_config().await).expect("operator client");
        let config = agent_supervisor::controller::Config {
            namespaces: vec![namespace],
            faults: agent_supervisor::controller::WatchFaults {
                lag: Some(lag),
                coalesce: true,
                pods_only: false,
            },
            ..Default::default()
        };
        agent_supervisor::controller::run(client, config, futures::future::pending()).await;
    })
}

#[tokio::test]
async fn a_stale_lease_cache_never_kills_a_renewing_agent() {
    let ns = TestNamespace::new().await;
    crate::support::install_crds(&ns.client).await;
    // Every event reaches the operator 6 s late: its cached Lease is always older than the
    // 4 s timeout, though the agent renews it every half second.
    let operator = start_lagging(&ns.name, Duration::from_secs(6));
    ns.create_agent("renewer", json!({ "heartbeat": { "timeout": "4s" } }))
        .await;
    ns.wait_running("renewer-1").await;
    let leases = ns.api::<Lease>();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let last_renewal = Arc::new(Mutex::new(jiff::Timestamp::now()));
    let renewer = {
        let (stop, last_renewal, leases) = (stop.clone(), last_renewal.clone(), leases.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let now = jiff::Timestamp::now();
                let renew = json!({ "spec": { "holderIdentity": "renewer-1", "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string() } });
                if leases
                    .patch("renewer", &PatchParams::default(), &Patch::Merge(&renew))
                    .await
                    .is_ok()
                {
                    *last_renewal.lock().unwrap() = now;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    // Renewing for well past the grace period and the lag: running, never killed.
    ns.wait_status("renewer", "Running", |s| s.phase == Some(Phase::Running))
        .await;
    // (The scenario's length, not a wait for something: the checks below hold whenever it ends.)
    tokio::time::sleep(Duration::from_secs(20)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    renewer.await.unwrap();
    let stopped_renewing = *last_renewal.lock().unwrap();

    // Now it is hung: killed once, for that, and not before the Lease lapsed.
    let status = ns
        .wait_status("renewer", "HeartbeatLost", |s| {
            s.last_failure
                .as_ref()
                .is_some_and(|f| f.reason == FailureReason::HeartbeatLost)
        })
        .await;
    let failure = status.last_failure.unwrap();
    let lapsed = stopped_renewing + jiff::SignedDuration::from_secs(3);
    assert!(
        failure.time.0 >= lapsed,
        "killed at {} though the Lease was renewed at {stopped_renewing}",
        failure.time.0
    );
    let lost: Vec<_> = status
        .restart_history
        .iter()
        .filter(|r| r.reason == Some(FailureReason::HeartbeatLost))
        .collect();
    assert_eq!(lost.len(), 1, "one kill, after the renewals stopped");
    operator.abort();
}
