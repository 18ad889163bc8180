//! The outage breaker's policy-side decision, `decide_outages`: when an outage opens, how it
//! holds and probes, how a probe's outcome ends it or doubles the hold; and how an agent's view
//! is read from its status (`AgentOutageView::of`).

#[path = "core_outage/probe.rs"]
mod probe;
#[path = "core_outage/view.rs"]
mod view;

use std::sync::Arc;

use agent_supervisor::api::{Duration, FailureReason, Outage, OutagePolicy, OutageState, Time};
use agent_supervisor::supervise::outage::{
    AgentOutageView, FailureSeen, OutageEventReason, OutageInput, OutagePlan, decide_outages,
};

const A: &str = "aaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbb";

#[path = "common/clock.rs"]
mod clock;
use clock::t;

fn config(agents: u32) -> OutagePolicy {
    OutagePolicy {
        agents,
        window: Duration::from_secs(60),
        hold_for: Duration::from_secs(30),
    }
}

fn failure(fingerprint: &str, at: i64, attempt: u32) -> FailureSeen {
    FailureSeen {
        fingerprint: fingerprint.to_string(),
        at: t(at),
        attempt,
        reason: FailureReason::Error,
        message: Some(Arc::from(format!("provider 503 ({fingerprint})"))),
        fresh: true,
    }
}

/// An agent whose attempt `attempt` failed with `fingerprint` at `at`, its restart scheduled.
fn failed(name: &str, fingerprint: &str, at: i64, attempt: u32) -> AgentOutageView {
    AgentOutageView {
        name: name.to_string(),
        attempt,
        failures: vec![failure(fingerprint, at, attempt)],
        ..AgentOutageView::default()
    }
}

/// An agent held for `fingerprint` since its failure at `at`.
fn held(name: &str, fingerprint: &str, at: i64, attempt: u32) -> AgentOutageView {
    let mut view = failed(name, fingerprint, at, attempt);
    view.failures[0].fresh = false;
    view.held = Some((fingerprint.to_string(), t(at)));
    view.available = true;
    view
}

fn input(now: i64, agents: Vec<AgentOutageView>, outages: Vec<Outage>) -> OutageInput {
    OutageInput {
        now: t(now),
        config: Some(config(3)),
        reset_after: std::time::Duration::from_secs(20),
        max_hold: std::time::Duration::from_secs(100),
        outages,
        agents,
    }
}

fn decide(input: &OutageInput) -> OutagePlan {
    let plan = decide_outages(input);
    assert_eq!(decide_outages(input), plan, "repeatable");
    plan
}

fn reasons(plan: &OutagePlan) -> Vec<OutageEventReason> {
    plan.events.iter().map(|e| e.reason).collect()
}

/// The outage opened at `since` for `fingerprint`, holding until `since + 30`.
fn holding(fingerprint: &str, since: i64) -> Outage {
    Outage {
        fingerprint: fingerprint.to_string(),
        reason: FailureReason::Error,
        message: None,
        since: Time(t(since)),
        agents: 3,
        state: OutageState::Holding,
        probe_agent: None,
        probe_attempt: None,
        probe_started_at: None,
        next_probe_at: Some(Time(t(since + 30))),
        failed_probes: 0,
    }
}

fn probing(fingerprint: &str, agent: &str, attempt: u32, started: i64) -> Outage {
    Outage {
        state: OutageState::Probing,
        probe_agent: Some(agent.to_string()),
        probe_attempt: Some(attempt),
        probe_started_at: Some(Time(t(started))),
        next_probe_at: None,
        ..holding(fingerprint, started - 30)
    }
}

// --- Detection --------------------------------------------------------------------------------

#[test]
fn an_outage_opens_at_n_distinct_agents_within_the_window_and_not_before() {
    let two = vec![failed("x", A, 100, 1), failed("y", A, 110, 1)];
    assert_eq!(
        decide(&input(120, two.clone(), vec![])),
        OutagePlan::default()
    );

    let mut three = two.clone();
    three.push(failed("z", A, 115, 1));
    let plan = decide(&input(120, three, vec![]));
    assert_eq!(plan.outages.len(), 1);
    let o = &plan.outages[0];
    assert_eq!(
        (o.fingerprint.as_str(), o.agents, o.state),
        (A, 3, OutageState::Holding)
    );
    assert_eq!(o.since, Time(t(120)));
    assert_eq!(o.next_probe_at, Some(Time(t(150))), "holdFor after");
    assert_eq!(
        o.message.as_deref(),
        Some("provider 503 (aaaaaaaaaaaaaaaa)"),
        "the latest's"
    );
    assert_eq!(reasons(&plan), [OutageEventReason::OutageDetected]);
    assert!(plan.events[0].reason.is_warning());
    assert!(plan.events[0].note.contains(A), "{}", plan.events[0].note);
    assert_eq!(plan.requeue_at, Some(t(150)));
}

#[test]
fn failures_outside_the_window_other_fingerprints_and_repeats_do_not_count() {
    let agents = vec![
        failed("x", A, 50, 1), // 70 s before now: outside the 1m window
        failed("y", A, 110, 1),
        failed("z", B, 115, 1), // another failure
        AgentOutageView {
            // one agent failing twice counts once
            failures: vec![failure(A, 118, 2), failure(A, 112, 1)],
            ..failed("w", A, 118, 2)
        },
    ];
    assert!(decide(&input(120, agents, vec![])).outages.is_empty());
}

#[test]
fn only_fresh_failures_declare_an_outage() {
    let stale = vec![
        held("x", A, 100, 1),
        held("y", A, 101, 1),
        held("z", A, 102, 1),
    ];
    assert!(decide(&input(110, stale, vec![])).outages.is_empty());
}

#[test]
fn at_most_sixteen_outages_are_open() {
    let mut agents = Vec::new();
    for f in 0..20 {
        let fingerprint = format!("{f:016x}");
        for a in 0..3 {
            agents.push(failed(&format!("a{f}-{a}"), &fingerprint, 100, 1));
        }
    }
    let plan = decide(&input(110, agents, vec![]));
    assert_eq!(plan.outages.len(), 16);
}

#[test]
fn without_detection_configured_every_outage_ends() {
    let mut i = input(200, vec![held("x", A, 100, 1)], vec![holding(A, 110)]);
    i.config = None;
    let plan = decide(&i);
    assert!(plan.outages.is_empty());
    assert_eq!(reasons(&plan), [OutageEventReason::OutageEnded]);
}

// --- Holding and probing ----------------------------------------------------------------------

#[test]
fn an_outage_that_ended_is_not_declared_again_in_the_same_decision() {
    let agents = vec![
        AgentOutageView {
            attempt: 2,
            running_since: Some(t(100)),
            ..failed("p", A, 135, 1)
        },
        failed("q", A, 130, 1),
        failed("r", A, 131, 1),
    ];
    let plan = decide(&input(150, agents, vec![probing(A, "p", 1, 120)]));
    assert!(plan.outages.is_empty(), "{:?}", plan.outages);
    assert_eq!(reasons(&plan), [OutageEventReason::OutageEnded]);
}

#[test]
fn the_count_of_agents_grows_with_new_failures_and_never_shrinks() {
    let mut agents: Vec<_> = (0..5)
        .map(|i| held(&format!("h{i}"), A, 100 + i, 1))
        .collect();
    let plan = decide(&input(120, agents.clone(), vec![holding(A, 105)]));
    assert_eq!(plan.outages[0].agents, 5);
    agents.truncate(1);
    let plan = decide(&input(121, agents, vec![plan.outages[0].clone()]));
    assert_eq!(plan.outages[0].agents, 5);
}
