//! The outage breaker against the real API server: many agents failing the same way hold their
//! restarts behind one probe.

use std::collections::BTreeMap;

use agent_supervisor::api::{AgentStatus, OutageState, Phase, RestartPolicy, Trigger};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;

use crate::setup;
use crate::support::{Operator, TestNamespace, eventually};

const REACT: std::time::Duration = std::time::Duration::from_secs(60);

/// A policy with a slow backoff (so no agent restarts on its own before the outage opens), no
/// breaker, and an outage after `agents` agents within a minute, held `hold` before a probe
/// that ends it once it has run `reset_after`.
fn outage_policy(agents: u32, hold: &str, reset_after: &str) -> serde_json::Value {
    json!({
        "backoff": { "type": "Exponential", "initialDelay": "2m", "maxDelay": "5m", "jitter": 0.0 },
        "resetAfter": reset_after,
        "circuitBreaker": { "failureThreshold": 0, "openDuration": "30s", "maxOpenDuration": "1m" },
        "outage": { "agents": agents, "window": "1m", "holdFor": hold },
    })
}

/// The provider's error, as each agent words it: the same failure, a different request id.
fn provider_error(i: usize) -> String {
    format!(
        "LLM provider returned 503 Service Unavailable (request 3f2a9c1e-77b0-4c1d-9e8f-{i:012x}) after 1532 ms"
    )
}

async fn agents_running(ns: &TestNamespace, names: &[String]) {
    for name in names {
        ns.create_agent(name, json!({ "restartPolicyRef": { "name": "llm" } }))
            .await;
    }
    for name in names {
        ns.wait_running(&format!("{name}-1")).await;
    }
}

async fn policy(ns: &TestNamespace) -> RestartPolicy {
    ns.api::<RestartPolicy>()
        .get("llm")
        .await
        .expect("read policy")
}

/// The pods of each attempt number, each with when it was created (by the API server's clock).
async fn pods_by_attempt(ns: &TestNamespace) -> BTreeMap<u32, Vec<(String, jiff::Timestamp)>> {
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default())
        .await
        .expect("list pods");
    let mut by = BTreeMap::<u32, Vec<(String, jiff::Timestamp)>>::new();
    for pod in pods.items {
        let attempt = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("supervisor.dev/attempt"))
            .and_then(|a| a.parse().ok())
            .unwrap_or(0);
        let created = pod
            .metadata
            .creation_timestamp
            .map(|t| t.0)
            .unwrap_or_default();
        by.entry(attempt)
            .or_default()
            .push((pod.metadata.name.unwrap_or_default(), created));
    }
    by
}

/// The Events on the policy, oldest first, as (reason, note): one for each time it was told (a
/// repeat updates its Event's count).
async fn policy_events(ns: &TestNamespace) -> Vec<(String, String)> {
    let events: Api<Event> = ns.api();
    let params = ListParams::default().fields("regarding.name=llm,regarding.kind=RestartPolicy");
    let mut list = events.list(&params).await.expect("list events").items;
    list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    crate::support::kubelet::occurrences(list)
}

/// The reasons of the Events on the policy, oldest first, once every one of `expected` is
/// among them.
async fn policy_event_reasons(ns: &TestNamespace, expected: &[&str]) -> Vec<String> {
    eventually(
        REACT,
        &format!("Events {expected:?} on the policy"),
        || async {
            let reasons: Vec<String> = policy_events(ns)
                .await
                .into_iter()
                .map(|(r, _)| r)
                .collect();
            expected
                .iter()
                .all(|e| reasons.iter().any(|r| r == e))
                .then_some(reasons)
        },
    )
    .await
}

/// Waits until every one of `names` is held by the outage, all at once, and returns each
/// status as it was seen held.
async fn wait_held(ns: &TestNamespace, names: &[String]) -> Vec<AgentStatus> {
    futures::future::join_all(names.iter().map(|name| {
        ns.wait_status_for(REACT, name, "held by the outage", |s| {
            s.phase == Some(Phase::CircuitOpen)
                && s.restart_history
                    .first()
                    .is_some_and(|r| r.trigger == Trigger::Outage && r.restarted_at.is_none())
        })
    }))
    .await
}

/// Waits until the policy is probing, and returns the probe agent.
async fn wait_probe(ns: &TestNamespace) -> String {
    eventually(REACT, "a probe", || async {
        let policy = policy(ns).await;
        let outage = policy.status?.outages.into_iter().next()?;
        (outage.state == OutageState::Probing).then_some(outage.probe_agent?)
    })
    .await
}

#[tokio::test]
async fn twenty_agents_failing_alike_open_one_outage_behind_one_probe() {
    let (ns, _operator) = setup().await;
    // Held 45 s: the probe comes after it, and the outage ends 15 s after the probe. What
    // the hold was is read from when each agent was seen held and when pods were created (on
    // CI's loaded machine the probe's pod was made before a check made at the end of 15 and
    // then 30 s).
    ns.create_policy("llm", outage_policy(5, "45s", "15s"))
        .await;
    let names: Vec<String> = (0..20).map(|i| format!("worker-{i}")).collect();
    agents_running(&ns, &names).await;

    for (i, name) in names.iter().enumerate() {
        ns.terminate(&format!("{name}-1"), 1, "Error", &provider_error(i))
            .await;
    }
    let held = wait_held(&ns, &names).await;
    let policy_now = policy(&ns).await;
    let status = policy_now.status.expect("policy status");
    assert_eq!(status.outages.len(), 1, "one outage: {:?}", status.outages);
    let outage = &status.outages[0];
    assert!(outage.agents >= 5, "{outage:?}");
    let fingerprint = outage.fingerprint.clone();
    let since = outage.since.0;
    // Nothing restarted while holding: a pod of attempt 2 (the probe's) comes after the hold.
    // Creation times are whole seconds: one of slack.
    let hold_ends = since + jiff::SignedDuration::from_secs(45 - 1);
    for (pod, created) in pods_by_attempt(&ns).await.remove(&2).unwrap_or_default() {
        assert!(
            created >= hold_ends,
            "nothing restarted while holding: {pod} created at {created}, the outage began at {since}"
        );
    }
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Outage")
        .expect("Outage condition");
    assert_eq!(condition.status, "True");
    for (name, s) in names.iter().zip(&held) {
        assert_eq!(
            s.last_failure.as_ref().and_then(|f| f.fingerprint.clone()),
            Some(fingerprint.clone()),
            "{name}: the same fingerprint"
        );
        assert_eq!(
            s.consecutive_failures, 0,
            "{name}: a held failure counts toward nothing"
        );
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == "CircuitBreakerOpen")
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Outage"),
            "{name}"
        );
    }

    // After holdFor: one probe, one restart.
    let probe = wait_probe(&ns).await;
    let probe_pod = format!("{probe}-2");
    ns.wait_running(&probe_pod).await;
    // Exactly one probe: every other pod of attempt 2 came once it had run resetAfter (15 s,
    // less a second for whole seconds).
    let second = pods_by_attempt(&ns).await.remove(&2).unwrap_or_default();
    let probed = second
        .iter()
        .find(|(pod, _)| *pod == probe_pod)
        .map(|(_, created)| *created)
        .expect("the probe's pod");
    for (pod, created) in &second {
        assert!(
            *pod == probe_pod || *created >= probed + jiff::SignedDuration::from_secs(15 - 1),
            "exactly one probe: {pod} created at {created}, the probe {probe_pod} at {probed}"
        );
    }

    // The probe runs for resetAfter: the outage ends, and everyone restarts, once.
    eventually(REACT, "the outage to end", || async {
        policy(&ns)
            .await
            .status
            .filter(|s| s.outages.is_empty())
            .map(|_| ())
    })
    .await;
    for name in &names {
        ns.wait_running(&format!("{name}-2")).await;
    }
    let by = pods_by_attempt(&ns).await;
    assert_eq!(by.get(&2).map(Vec::len), Some(20));
    assert_eq!(by.get(&3), None, "nobody restarted twice");
    for name in &names {
        let s = ns.status(name).await;
        assert_eq!(s.restart_count, 1, "{name}");
        assert!(
            s.recent_restarts.is_empty(),
            "{name}: counted toward no limit"
        );
        assert_eq!(s.restart_history[0].trigger, Trigger::Outage, "{name}");
    }
    let reasons = policy_event_reasons(&ns, &["OutageDetected", "OutageEnded"]).await;
    assert_eq!(
        reasons.iter().filter(|r| *r == "OutageDetected").count(),
        1,
        "{reasons:?}"
    );
    assert_eq!(
        reasons.iter().filter(|r| *r == "OutageEnded").count(),
        1,
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r == "OutageProbe"), "{reasons:?}");
    let status = policy(&ns).await.status.unwrap();
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Outage")
        .unwrap();
    assert_eq!(condition.status, "False");
}

#[tokio::test]
async fn a_probe_failing_alike_doubles_the_hold_and_an_operator_killed_mid_outage_resumes_it() {
    let ns = TestNamespace::new().await;
    crate::support::install_crds(&ns.client).await;
    let operator = Operator::start(&ns.name).await;
    // Held long enough for the agents to be seen held, and the policy read, before the probe
    // (5 s was not always, on a loaded machine); the probe is failed by the test long before
    // it has run a minute.
    ns.create_policy("llm", outage_policy(3, "20s", "1m")).await;
    let names: Vec<String> = (0..5).map(|i| format!("caller-{i}")).collect();
    agents_running(&ns, &names).await;
    for (i, name) in names.iter().enumerate() {
        ns.terminate(&format!("{name}-1"), 1, "Error", &provider_error(i))
            .await;
    }
    wait_held(&ns, &names).await;
    let first = policy(&ns).await.status.unwrap().outages[0].clone();

    // Killed while holding: the new operator keeps the outage as it was.
    operator.kill().await;
    let _operator = Operator::start(&ns.name).await;
    let probe = wait_probe(&ns).await;
    let probing = policy(&ns).await.status.unwrap().outages[0].clone();
    assert_eq!(probing.since, first.since, "the same outage, resumed");
    assert_eq!(probing.fingerprint, first.fingerprint);
    let started = probing.probe_started_at.clone().unwrap().0;
    assert!(
        started >= first.next_probe_at.clone().unwrap().0,
        "not probed before the hold ended"
    );

    // The probe fails the same way: held again, for twice as long.
    let probe_pod = format!("{probe}-2");
    ns.wait_running(&probe_pod).await;
    ns.terminate(&probe_pod, 1, "Error", &provider_error(99))
        .await;
    let held = eventually(REACT, "the hold to double", || async {
        let outage = policy(&ns).await.status?.outages.into_iter().next()?;
        (outage.failed_probes == 1 && outage.state == OutageState::Holding).then_some(outage)
    })
    .await;
    let next = held.next_probe_at.clone().unwrap().0;
    let waited = (next - started).get_seconds();
    assert!(
        waited >= 40,
        "held 2 × 20s after the failed probe: {waited}s"
    );
    ns.wait_status_for(REACT, &probe, "held again", |s| {
        s.phase == Some(Phase::CircuitOpen) && s.attempt == 2
    })
    .await;
    let by = pods_by_attempt(&ns).await;
    let second: Option<Vec<&str>> = by
        .get(&2)
        .map(|pods| pods.iter().map(|(name, _)| name.as_str()).collect());
    assert_eq!(
        second,
        Some(vec![probe_pod.as_str()]),
        "only the probe restarted"
    );
    assert_eq!(by.get(&3), None);
    let reasons = policy_event_reasons(&ns, &["OutageDetected", "OutageProbeFailed"]).await;
    assert_eq!(
        reasons.iter().filter(|r| *r == "OutageDetected").count(),
        1,
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r == "OutageProbeFailed"),
        "{reasons:?}"
    );
}
