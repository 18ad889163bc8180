//! The outage breaker's policy-side decision, `decide_outages`: when an outage opens, how it
//! holds and probes, how a probe's outcome ends it or doubles the hold; and how an agent's view
//! is read from its status (`AgentOutageView::of`).

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
fn the_longest_held_available_agent_probes_when_the_hold_ends() {
    let agents = vec![
        held("late", A, 105, 1),
        AgentOutageView {
            available: false, // suspended
            ..held("first", A, 100, 1)
        },
        held("b-early", A, 101, 2),
        held("a-early", A, 101, 1),
    ];
    let before = decide(&input(139, agents.clone(), vec![holding(A, 110)]));
    let counted = Outage {
        agents: 4,
        ..holding(A, 110)
    };
    assert_eq!(
        before.outages,
        [counted],
        "still holding, the four agents counted"
    );
    assert_eq!(before.requeue_at, Some(t(140)));
    assert!(before.events.is_empty());

    let plan = decide(&input(140, agents, vec![holding(A, 110)]));
    let o = &plan.outages[0];
    assert_eq!(o.state, OutageState::Probing);
    assert_eq!(
        o.probe_agent.as_deref(),
        Some("a-early"),
        "held longest, then by name"
    );
    assert_eq!(
        (o.probe_attempt, o.probe_started_at.clone()),
        (Some(1), Some(Time(t(140))))
    );
    assert_eq!(o.next_probe_at, None);
    assert_eq!(reasons(&plan), [OutageEventReason::OutageProbe]);
    assert_eq!(plan.events[0].agent.as_deref(), Some("a-early"));
}

#[test]
fn with_no_agent_held_any_more_the_outage_ends() {
    let plan = decide(&input(
        140,
        vec![failed("x", A, 100, 1)],
        vec![holding(A, 110)],
    ));
    assert!(plan.outages.is_empty());
    assert_eq!(reasons(&plan), [OutageEventReason::OutageEnded]);
}

#[test]
fn a_probe_not_started_yet_is_waited_for() {
    let probe = held("p", A, 100, 1);
    let o = probing(A, "p", 1, 140);
    let plan = decide(&input(
        150,
        vec![probe, held("q", A, 101, 1)],
        vec![o.clone()],
    ));
    assert_eq!(plan.outages, [o]);
    assert!(plan.events.is_empty());
}

#[test]
fn a_probe_that_runs_for_reset_after_ends_the_outage() {
    let running = AgentOutageView {
        attempt: 2,
        running_since: Some(t(142)),
        ..failed("p", A, 100, 1)
    };
    let others = vec![held("q", A, 101, 1), held("r", A, 102, 1)];
    let o = probing(A, "p", 1, 140);
    let mut agents = vec![running.clone()];
    agents.extend(others.clone());
    let waiting = decide(&input(150, agents.clone(), vec![o.clone()]));
    assert_eq!(waiting.outages, std::slice::from_ref(&o));
    assert_eq!(
        waiting.requeue_at,
        Some(t(162)),
        "running since 142 + resetAfter 20"
    );

    let plan = decide(&input(162, agents, vec![o]));
    assert!(plan.outages.is_empty());
    assert_eq!(reasons(&plan), [OutageEventReason::OutageEnded]);
    assert!(
        plan.events[0].note.contains("2 held agent(s)"),
        "{}",
        plan.events[0].note
    );
}

/// Restarted, its pod not seen running: its status may say Running before the pod cache does,
/// and a pod's change reconciles no policy. The decision looks again, or the outage would hold
/// every agent for good (a fault-injection run caught it).
#[test]
fn a_restarted_probe_whose_pod_is_not_seen_running_is_looked_at_again() {
    let restarted = AgentOutageView {
        attempt: 2,
        running_since: None,
        ..failed("p", A, 100, 1)
    };
    let o = probing(A, "p", 1, 140);
    let plan = decide(&input(145, vec![restarted], vec![o.clone()]));
    assert_eq!(plan.outages, [o]);
    assert_eq!(plan.requeue_at, Some(t(150)), "looked at again in 5 s");
}

#[test]
fn a_probe_that_proves_itself_ends_the_outage_early_and_is_polled_until_then() {
    let mut probe = AgentOutageView {
        attempt: 2,
        running_since: Some(t(142)),
        provable: true,
        ..failed("p", A, 100, 1)
    };
    let o = probing(A, "p", 1, 140);
    let polled = decide(&input(145, vec![probe.clone()], vec![o.clone()]));
    assert_eq!(polled.requeue_at, Some(t(150)), "looked at again in 5 s");
    probe.proven = true;
    let plan = decide(&input(146, vec![probe], vec![o]));
    assert!(plan.outages.is_empty());
    assert!(plan.events[0].note.contains("proved itself ready"));
}

#[test]
fn a_probe_failing_alike_doubles_the_hold_up_to_the_maximum() {
    let mut o = probing(A, "p", 1, 140);
    let mut expected_holds = Vec::new();
    for round in 1..=4u32 {
        let probe = AgentOutageView {
            attempt: o.probe_attempt.unwrap() + 1,
            failures: vec![failure(A, 150, o.probe_attempt.unwrap() + 1)],
            ..held("p", A, 150, o.probe_attempt.unwrap() + 1)
        };
        let plan = decide(&input(
            150,
            vec![probe, held("q", A, 101, 1)],
            vec![o.clone()],
        ));
        let next = &plan.outages[0];
        assert_eq!(next.state, OutageState::Holding);
        assert_eq!(next.failed_probes, round);
        let hold = next.next_probe_at.clone().unwrap().0.as_second() - t(150).as_second();
        expected_holds.push(hold);
        assert_eq!(reasons(&plan), [OutageEventReason::OutageProbeFailed]);
        assert_eq!(plan.events[0].agent.as_deref(), Some("p"));
        o = Outage {
            state: OutageState::Probing,
            probe_agent: Some("p".to_string()),
            probe_attempt: next.probe_attempt.or(Some(round + 1)),
            probe_started_at: Some(Time(t(140))),
            next_probe_at: None,
            ..next.clone()
        };
    }
    // holdFor 30 s doubled each time, capped at maxOpenDuration (100 s).
    assert_eq!(expected_holds, [60, 100, 100, 100]);
}

#[test]
fn a_probe_that_fails_another_way_or_is_gone_proves_nothing() {
    let o = probing(A, "p", 1, 140);
    let other_failure = AgentOutageView {
        attempt: 2,
        failures: vec![failure(B, 150, 2), failure(A, 100, 1)],
        ..failed("p", B, 150, 2)
    };
    let others = || vec![held("q", A, 101, 1), held("r", A, 102, 1)];
    let mut agents = vec![other_failure];
    agents.extend(others());
    let plan = decide(&input(150, agents, vec![o.clone()]));
    let next = &plan.outages[0];
    assert_eq!(next.state, OutageState::Probing, "another probe at once");
    assert_eq!(next.probe_agent.as_deref(), Some("q"));
    assert_eq!(next.failed_probes, 0, "no doubling");
    assert_eq!(
        reasons(&plan),
        [
            OutageEventReason::OutageProbe,
            OutageEventReason::OutageProbe
        ]
    );

    // Gone (deleted): likewise.
    let plan = decide(&input(150, others(), vec![o.clone()]));
    assert_eq!(plan.outages[0].probe_agent.as_deref(), Some("q"));
    // Not restartable any more (suspended while held): likewise.
    let mut suspended = held("p", A, 100, 1);
    suspended.available = false;
    let mut agents = vec![suspended];
    agents.extend(others());
    let plan = decide(&input(150, agents, vec![o]));
    assert_eq!(plan.outages[0].probe_agent.as_deref(), Some("q"));
}

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
