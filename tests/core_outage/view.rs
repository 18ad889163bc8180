//! `AgentOutageView::of`: what the outage decision reads of an Agent, its pod and its Lease.

use agent_supervisor::api::{
    Agent, AgentStatus, FailureClass, FailureReason, Phase, RestartRecord, Time, Trigger,
};
use agent_supervisor::controller::facts::agent_traits;
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase};
use agent_supervisor::supervise::outage::AgentOutageView;
use agent_supervisor::supervise::{LeaseFacts, PodFacts, PodOrigin};
use serde_json::json;

use super::{A, B, t};

/// The outage view of `agent` as the shell builds it: its traits and its status.
fn of(agent: &Agent, pod: Option<&PodFacts>, lease: Option<&LeaseFacts>) -> AgentOutageView {
    let status = agent.status.clone().unwrap_or_default();
    AgentOutageView::of(&agent_traits(agent), &status, pod, lease)
}

fn agent(spec: serde_json::Value, status: AgentStatus) -> Agent {
    let mut agent: Agent = serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
        "metadata": { "name": "caller" }, "spec": spec,
    }))
    .expect("an Agent");
    agent.status = Some(status);
    agent
}

fn plain() -> serde_json::Value {
    json!({ "template": { "spec": { "containers": [{ "name": "agent", "image": "x" }] } } })
}

fn record(
    attempt: u32,
    trigger: Trigger,
    fingerprint: &str,
    failed: i64,
    restarted: Option<i64>,
) -> RestartRecord {
    RestartRecord {
        attempt,
        trigger,
        failed_at: Some(Time(t(failed))),
        reason: Some(FailureReason::Error),
        class: Some(FailureClass::Transient),
        exit_code: Some(1),
        signal: None,
        message: None,
        ran_for: None,
        fingerprint: Some(fingerprint.to_string()),
        backoff: None,
        restarted_at: restarted.map(|r| Time(t(r))),
        checkpoint: None,
        progress: None,
        spend: None,
    }
}

fn running_pod(attempt: u32, since: i64, ready: bool) -> PodFacts {
    PodFacts {
        name: format!("caller-{attempt}"),
        attempt,
        template_hash: None,
        created_at: t(since - 1),
        adopted_at: None,
        deleting: false,
        phase: PodPhase::Running,
        reason: None,
        message: None,
        disruption: None,
        unschedulable: None,
        scheduled_at: None,
        ready,
        containers: vec![ContainerFacts {
            name: "agent".to_string(),
            state: ContainerPhase::Running {
                started_at: Some(t(since)),
            },
        }],
        agent_container: None,
        origin: PodOrigin::default(),
    }
}

#[test]
fn failures_that_count_and_the_hold_are_read_from_the_history() {
    let status = AgentStatus {
        phase: Some(Phase::CircuitOpen),
        attempt: 4,
        restart_history: vec![
            record(4, Trigger::Outage, A, 400, None),
            record(3, Trigger::Failure, B, 300, Some(310)),
            RestartRecord {
                class: Some(FailureClass::Disruption),
                ..record(2, Trigger::Disruption, B, 200, Some(200))
            },
            record(1, Trigger::RetryAfter, A, 100, Some(160)),
        ],
        ..AgentStatus::default()
    };
    let view = of(&agent(plain(), status), None, None);
    assert_eq!(view.attempt, 4);
    let seen: Vec<(&str, u32, bool)> = view
        .failures
        .iter()
        .map(|f| (f.fingerprint.as_str(), f.attempt, f.fresh))
        .collect();
    assert_eq!(
        seen,
        [(A, 4, false), (B, 3, true)],
        "held and fresh ones; not disruptions nor waits asked for"
    );
    assert_eq!(view.held, Some((A.to_string(), t(400))));
    assert!(view.available);
}

#[test]
fn failures_up_to_the_latest_release_from_an_outage_are_left_out() {
    let status = AgentStatus {
        phase: Some(Phase::Running),
        attempt: 3,
        restart_history: vec![
            record(2, Trigger::Failure, A, 220, Some(221)),
            record(1, Trigger::Outage, A, 100, Some(200)),
        ],
        ..AgentStatus::default()
    };
    let view = of(&agent(plain(), status), None, None);
    let attempts: Vec<u32> = view.failures.iter().map(|f| f.attempt).collect();
    assert_eq!(
        attempts,
        [2],
        "the held failure is gone, the probe's own is kept"
    );
    assert_eq!(view.held, None);
    assert!(!view.available);
}

#[test]
fn a_suspended_or_shut_down_agent_is_no_probe() {
    let held = AgentStatus {
        phase: Some(Phase::CircuitOpen),
        attempt: 1,
        restart_history: vec![record(1, Trigger::Outage, A, 100, None)],
        ..AgentStatus::default()
    };
    let mut spec = plain();
    spec["suspend"] = json!(true);
    let view = of(&agent(spec, held.clone()), None, None);
    assert!(view.held.is_some() && !view.available);
    let shut = AgentStatus {
        phase: Some(Phase::Shutdown),
        ..held
    };
    assert_eq!(of(&agent(plain(), shut), None, None).held, None);
}

#[test]
fn proof_needs_what_the_agent_supports() {
    let running = AgentStatus {
        phase: Some(Phase::Running),
        attempt: 2,
        ..AgentStatus::default()
    };
    let pod = running_pod(2, 100, true);
    // Nothing to prove itself with: only running for resetAfter counts.
    let view = of(&agent(plain(), running.clone()), Some(&pod), None);
    assert_eq!(
        (view.running_since, view.proven, view.provable),
        (Some(t(100)), false, false)
    );
    // A readiness probe: Ready proves it.
    let mut probed = plain();
    probed["template"]["spec"]["containers"][0]["readinessProbe"] =
        json!({ "exec": { "command": ["true"] } });
    let ready = of(&agent(probed.clone(), running.clone()), Some(&pod), None);
    assert!(ready.proven && ready.provable);
    let not_ready = running_pod(2, 100, false);
    assert!(!of(&agent(probed, running.clone()), Some(&not_ready), None).proven);
    // A heartbeat: a renewal by this very pod since it started proves it.
    let mut beating = plain();
    beating["heartbeat"] = json!({ "timeout": "30s" });
    let renewed = LeaseFacts {
        expect_slow_until: None,
        holder: Some("caller-2".to_string()),
        renew_time: Some(t(105)),
        reported: Default::default(),
    };
    let stale = LeaseFacts {
        expect_slow_until: None,
        holder: Some("caller-1".to_string()),
        renew_time: Some(t(105)),
        reported: Default::default(),
    };
    let before = LeaseFacts {
        expect_slow_until: None,
        holder: Some("caller-2".to_string()),
        renew_time: Some(t(90)),
        reported: Default::default(),
    };
    let proven = |lease: &LeaseFacts| {
        of(
            &agent(beating.clone(), running.clone()),
            Some(&pod),
            Some(lease),
        )
        .proven
    };
    assert!(proven(&renewed));
    assert!(!proven(&stale), "another attempt's holder");
    assert!(!proven(&before), "renewed before it started");
    // A pod of another attempt is not the current one.
    let old = running_pod(1, 100, true);
    assert_eq!(
        of(&agent(plain(), running), Some(&old), None).running_since,
        None
    );
}
