//! Two replicas with leader election: only the leader writes; when it stops, the other takes
//! over, and at no point do both act.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::json;

use crate::process::{OperatorProcess, RELEASE, install_chart, token_kubeconfig};
use crate::support::{self, TestNamespace, eventually};

/// Long enough that a leader on a loaded machine renews in time (the replicas renew a third of
/// the duration before it ends): the standby takes over only when the leader stops.
const LEASE_SECONDS: u64 = 15;

/// (time, user agent) of every write the operator replicas made in `namespace`.
fn writes_by_replica(
    namespace: &str,
    since: support::AuditPosition,
) -> Vec<(jiff::Timestamp, String)> {
    let log = support::audit_log();
    assert!(
        log.exists(),
        "this test reads the local control plane's audit log {}",
        log.display()
    );
    let text = support::audit_log_since(since);
    let mut writes: Vec<_> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["objectRef"]["namespace"] == namespace)
        .filter(|e| {
            e["userAgent"]
                .as_str()
                .is_some_and(|ua| ua.starts_with("agent-supervisor/"))
        })
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete")
            )
        })
        .filter(|e| e["objectRef"]["resource"] != "leases" || e["objectRef"]["name"] != RELEASE)
        .filter_map(|e| {
            let at = e["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            Some((at, e["userAgent"].as_str()?.to_string()))
        })
        .collect();
    writes.sort();
    writes
}

#[tokio::test]
async fn only_the_leader_acts_and_a_standby_takes_over() {
    // The writes of this test, even if the audit log is rotated meanwhile.
    let log_start = support::audit_log_position();
    let release = TestNamespace::new().await;
    let watched = TestNamespace::new().await;
    support::install_crds(&watched.client).await;
    install_chart(&release.name, &[&watched.name]);
    let kubeconfig = token_kubeconfig(&release, &release.name, RELEASE).await;
    let args = [
        format!("--namespaces={}", watched.name),
        format!("--leader-election-namespace={}", release.name),
        format!("--leader-election-lease-name={RELEASE}"),
        format!("--leader-election-lease-duration={LEASE_SECONDS}"),
        // As the chart runs it by default: its RBAC grants nothing on Sandboxes.
        "--sandboxes=false".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut a = OperatorProcess::start(&kubeconfig, "replica-a", &args);
    a.ready().await;
    // Let replica-a lead before replica-b starts, so the roles are known.
    let leases = release.api::<Lease>();
    let holder = |leases: kube::Api<Lease>| async move {
        leases.get_opt(RELEASE).await.ok()??.spec?.holder_identity
    };
    let first = eventually(Duration::from_secs(30), "a leader", || {
        holder(leases.clone())
    })
    .await;
    assert!(first.starts_with("replica-a"), "replica-a leads: {first}");
    let mut b = OperatorProcess::start(&kubeconfig, "replica-b", &args);
    b.ready().await;

    // Work for the leader: agents that crash and restart.
    watched.create_policy("p", json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 0 } })).await;
    for name in ["one", "two"] {
        watched
            .create_agent(name, json!({ "restartPolicyRef": { "name": "p" } }))
            .await;
        watched.wait_running(&format!("{name}-1")).await;
        watched
            .terminate(&format!("{name}-1"), 1, "Error", "crash")
            .await;
        watched.wait_running(&format!("{name}-2")).await;
    }
    support::audit_log_caught_up(&watched).await;
    let before = writes_by_replica(&watched.name, log_start);
    assert!(!before.is_empty(), "the leader wrote");
    assert!(
        before.iter().all(|(_, ua)| ua.contains("replica-a")),
        "only the leader wrote: {before:?}"
    );

    // The leader stops; the standby takes over: eventually (how fast is not this test's
    // business on a loaded machine), exactly once, and never while the leader still ran.
    let handed_over = leases
        .get(RELEASE)
        .await
        .expect("the leader Lease")
        .spec
        .unwrap();
    let stopped_at = jiff::Timestamp::now();
    a.terminate().await;
    // (Taking the Lease is two writes: the holder, then the transition count.)
    let transitions = handed_over.lease_transitions.unwrap_or(0) + 1;
    let taken = eventually(
        Duration::from_secs(LEASE_SECONDS) + support::kubelet::REACT,
        "replica-b to lead, after one handover",
        || {
            let leases = leases.clone();
            async move {
                let spec = leases.get_opt(RELEASE).await.ok()??.spec?;
                let led = spec
                    .holder_identity
                    .as_deref()
                    .is_some_and(|h| h.starts_with("replica-b"));
                (led && spec.lease_transitions.unwrap_or(0) == transitions).then_some(spec)
            }
        },
    )
    .await;
    let acquired = taken.acquire_time.expect("acquireTime set").0;
    assert!(
        acquired >= stopped_at,
        "replica-b acquired the Lease at {acquired}, before replica-a was stopped at {stopped_at}"
    );
    assert_eq!(taken.lease_duration_seconds, Some(LEASE_SECONDS as i32));

    // The new leader acts: a crash is restarted.
    watched.terminate("one-2", 1, "Error", "crash").await;
    watched.wait_running("one-3").await;
    support::audit_log_caught_up(&watched).await;
    let after = writes_by_replica(&watched.name, log_start);
    let last_a = after
        .iter()
        .filter(|(_, ua)| ua.contains("replica-a"))
        .map(|(t, _)| *t)
        .max()
        .expect("replica-a's writes are in the audit log");
    let first_b = after
        .iter()
        .filter(|(_, ua)| ua.contains("replica-b"))
        .map(|(t, _)| *t)
        .min();
    let first_b = first_b.expect("replica-b wrote after taking over");
    assert!(
        last_a < first_b,
        "both acted at once: replica-a wrote at {last_a}, replica-b at {first_b}"
    );
    drop(b);
}
