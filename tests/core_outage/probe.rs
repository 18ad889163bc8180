//! The probe: who probes when a hold ends, and what its run or its failure proves.

use super::*;

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
