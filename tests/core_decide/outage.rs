//! An agent under its policy's outage breaker: a failure an open outage names holds the
//! restart (phase CircuitOpen, reason Outage) and counts toward nothing; the hold ends when the
//! outage does, when the policy picks the agent as its probe, or when a person steps in.

use agent_supervisor::api::{
    AgentStatus, BreakerState, FailureReason, Outage, OutageState, Phase, Trigger,
};
use agent_supervisor::supervise::EventReason;
use agent_supervisor::supervise::conditions::{CIRCUIT_BREAKER_OPEN, READY};
use agent_supervisor::supervise::fingerprint::fingerprint;
use agent_supervisor::supervise::input::PodPhase;

use crate::build::{AGENT, breaker, condition, fast, named, reasons, secs, strict, time};
use crate::clock::t;
use crate::pods::new_pod;
use crate::sim::Sim;

const PROVIDER: &str = "provider returned 503 (request req_7f3a91c2d4e5)";

fn provider_fingerprint() -> String {
    fingerprint(FailureReason::Error, Some(1), Some(PROVIDER), &[])
}

fn outage(fingerprint: &str) -> Outage {
    Outage {
        fingerprint: fingerprint.to_string(),
        reason: FailureReason::Error,
        message: Some(PROVIDER.to_string()),
        since: time(90),
        agents: 3,
        state: OutageState::Holding,
        probe_agent: None,
        probe_attempt: None,
        probe_started_at: None,
        next_probe_at: Some(time(400)),
        failed_probes: 0,
    }
}

fn probing(agent: &str, attempt: u32) -> Outage {
    Outage {
        state: OutageState::Probing,
        probe_agent: Some(agent.to_string()),
        probe_attempt: Some(attempt),
        probe_started_at: Some(time(400)),
        next_probe_at: None,
        ..outage(&provider_fingerprint())
    }
}

/// A running agent whose first pod fails with the provider's error at t(100) while an outage
/// for it is open.
fn held() -> (Sim, agent_supervisor::supervise::Plan) {
    let mut sim = Sim::running(named(strict()));
    sim.input.outages = vec![outage(&provider_fingerprint())];
    sim.runs(5).exits(1, Some(PROVIDER), 100);
    let plan = sim.at(100).step();
    (sim, plan)
}

fn assert_held(s: &AgentStatus) {
    assert_eq!(s.phase, Some(Phase::CircuitOpen));
    assert_eq!(s.next_restart_at, None);
    let record = &s.restart_history[0];
    assert_eq!(
        (record.trigger, record.restarted_at.clone()),
        (Trigger::Outage, None)
    );
    let c = condition(s, CIRCUIT_BREAKER_OPEN);
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "Outage"));
    assert!(
        c.message.contains("RestartPolicy fast's outage"),
        "{}",
        c.message
    );
    let r = condition(s, READY);
    assert_eq!((r.status.as_str(), r.reason.as_str()), ("False", "Outage"));
}

#[test]
fn a_failure_an_open_outage_names_holds_the_restart_and_counts_toward_nothing() {
    let (mut sim, plan) = held();
    let s = &plan.status;
    assert_held(s);
    assert_eq!(s.restart_history[0].backoff, None);
    assert_eq!(s.consecutive_failures, 0, "not counted");
    assert_eq!(
        breaker(s).state,
        BreakerState::Closed,
        "a breaker at 1 did not open"
    );
    assert_eq!(
        s.last_failure.as_ref().and_then(|f| f.fingerprint.clone()),
        Some(provider_fingerprint())
    );
    assert_eq!(plan.create_pod, None);
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert!(
        plan.events[0].note.contains("restart held"),
        "{}",
        plan.events[0].note
    );
    assert_eq!(plan.requeue_at, None, "the policy's status wakes it");
    // Held for as long as the outage is open: nothing done, nothing said.
    for at in [200, 400, 5_000] {
        let plan = sim.at(at).step();
        assert_eq!((plan.create_pod, plan.delete_pod), (None, None), "at {at}");
        assert!(plan.events.is_empty(), "at {at}: {:?}", plan.events);
        assert_held(&plan.status);
    }
}

#[test]
fn a_different_failure_during_an_outage_is_supervised_as_usual() {
    let mut sim = Sim::running(named(fast()));
    sim.input.outages = vec![outage(&provider_fingerprint())];
    let plan = sim.crash(5, 100);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.consecutive_failures, 1);
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::Failure);
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
}

#[test]
fn a_restart_already_scheduled_when_the_outage_opens_is_held_and_uncounted() {
    let mut sim = Sim::running(named(fast()));
    sim.runs(5).exits(1, Some(PROVIDER), 100);
    let plan = sim.at(100).step();
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.consecutive_failures, 1);
    sim.input.outages = vec![outage(&provider_fingerprint())];
    let plan = sim.at(105).step();
    assert_held(&plan.status);
    assert_eq!(plan.status.consecutive_failures, 0, "un-counted");
    assert_eq!(plan.create_pod, None);
    assert_eq!(reasons(&plan), [EventReason::RestartScheduled]);
    assert!(
        plan.events[0].note.contains("Restart held"),
        "{}",
        plan.events[0].note
    );
}

#[test]
fn the_held_restart_happens_when_the_outage_ends_counted_toward_nothing() {
    let (mut sim, _) = held();
    sim.input.outages.clear();
    let plan = sim.at(500).step();
    let new = plan
        .create_pod
        .as_ref()
        .expect("restarted when the outage ended");
    assert_eq!(
        (new.attempt, new.origin.trigger),
        (2, Some(Trigger::Outage))
    );
    let s = &plan.status;
    assert_eq!((s.phase, s.restart_count), (Some(Phase::Pending), 1));
    assert!(s.recent_restarts.is_empty(), "counted toward no limit");
    assert_eq!(
        s.restart_history[0].backoff,
        Some(secs(400)),
        "held from 100 to 500"
    );
    assert_eq!(s.restart_history[0].restarted_at, Some(time(500)));
    assert_eq!(reasons(&plan), [EventReason::Restarted]);
    assert!(
        plan.events[0].note.contains("after an outage"),
        "{}",
        plan.events[0].note
    );
    assert_eq!(condition(s, CIRCUIT_BREAKER_OPEN).status, "False");
}

#[test]
fn the_probe_is_the_agent_and_attempt_the_policy_named_and_starts_once() {
    let (mut sim, _) = held();
    for (stale, why) in [
        (probing("someone-else", 1), "another agent probes"),
        (probing(AGENT, 0), "an older attempt was named"),
    ] {
        sim.input.outages = vec![stale];
        let plan = sim.at(400).step();
        assert_eq!(plan.create_pod, None, "{why}");
        assert_held(&plan.status);
    }
    sim.input.outages = vec![probing(AGENT, 1)];
    let plan = sim.at(400).step();
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.attempt),
        Some(2),
        "the probe"
    );
    assert!(
        reasons(&plan).contains(&EventReason::RestartScheduled),
        "{:?}",
        reasons(&plan)
    );
    // Once started, the same order starts nothing more.
    sim.runs(401);
    for at in [402, 410] {
        let plan = sim.at(at).step();
        assert_eq!(plan.create_pod, None, "at {at}");
        assert_eq!(plan.status.attempt, 2);
    }
    // The probe fails the same way: held again, still counting nothing.
    sim.pod().phase = PodPhase::Running;
    sim.exits(1, Some(PROVIDER), 420);
    let plan = sim.at(420).step();
    assert_held(&plan.status);
    assert_eq!(plan.status.restart_history[0].attempt, 2);
    assert_eq!(plan.status.consecutive_failures, 0);
    assert!(plan.status.recent_restarts.is_empty());
}

#[test]
fn a_person_can_let_a_held_agent_go() {
    let (mut sim, _) = held();
    sim.input.agent.restart_requested = Some("now-please".to_string());
    let plan = sim.at(200).step();
    assert!(plan.create_pod.is_some(), "a manual restart releases it");
    assert!(reasons(&plan).contains(&EventReason::ManualRestart));

    let (mut sim, _) = held();
    sim.input.agent.reset_requested = Some("reset-1".to_string());
    let mut created = None;
    for at in [200, 200] {
        let plan = sim.at(at).step();
        created = created.or(plan.create_pod);
    }
    assert!(created.is_some(), "a reset releases it");
    assert_eq!(sim.status().restart_count, 1);
}

#[test]
fn disruptions_and_requested_waits_are_never_held() {
    let evicted = fingerprint(
        FailureReason::Evicted,
        None,
        Some("The node was low on resource: memory."),
        &[],
    );
    let mut sim = Sim::running(named(fast()));
    sim.input.outages = vec![outage(&evicted)];
    sim.evicted();
    let plan = sim.at(100).step();
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::Disruption);

    let asked = r#"{"retryAfter":"1m"}"#;
    let mut sim = Sim::running(named(fast()));
    sim.input.outages = vec![outage(&fingerprint(
        FailureReason::Error,
        Some(1),
        Some(asked),
        &[],
    ))];
    sim.runs(5).exits(1, Some(asked), 100);
    let plan = sim.at(100).step();
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.restart_history[0].trigger, Trigger::RetryAfter);
}

#[test]
fn an_open_breakers_probe_waits_for_the_outage() {
    let mut sim = Sim::running(named(strict()));
    sim.runs(5).exits(1, Some(PROVIDER), 100);
    let opened = sim.at(100).step();
    assert_eq!(opened.status.phase, Some(Phase::CircuitOpen));
    let half_open_at = breaker(&opened.status)
        .half_open_at
        .expect("a probe time")
        .0;
    sim.input.outages = vec![outage(&provider_fingerprint())];
    sim.input.now = half_open_at;
    let plan = sim.step();
    assert_eq!(
        plan.create_pod, None,
        "the breaker's probe waits while the outage is open"
    );
    assert_eq!(condition(&plan.status, READY).reason, "Outage");
    assert_eq!(breaker(&plan.status).state, BreakerState::Open, "kept");
    sim.input.outages.clear();
    let plan = sim.step();
    assert!(plan.create_pod.is_some(), "then probes");
    assert!(reasons(&plan).contains(&EventReason::CircuitHalfOpen));
}

#[test]
fn a_release_whose_status_write_was_lost_is_adopted_counted_toward_nothing() {
    let (mut sim, _) = held();
    let before = sim.input.status.clone();
    sim.input.outages.clear();
    let plan = sim.at(500).step();
    let new = plan.create_pod.clone().expect("released");
    sim.input.status = before;
    sim.input.pod = Some(new_pod(&new, "h1", t(500), Some("ContainerCreating")));
    let adopted = sim.at(501).step();
    assert_eq!(adopted.create_pod, None);
    let s = &adopted.status;
    assert_eq!((s.attempt, s.restart_count), (2, 1));
    assert!(s.recent_restarts.is_empty());
    assert_eq!(s.restart_history[0].backoff, Some(secs(400)));
}
