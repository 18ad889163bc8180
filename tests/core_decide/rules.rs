//! Rules and defaults: what a stop, shutdown, ignore or restart rule does to an ending, the
//! default for exit code 0 and for an eviction, and the `Never` backoff.

use agent_supervisor::api::{
    Backoff, BackoffType, BreakerState, CircuitBreakerPolicy, Duration, ExitCodeOperator,
    ExitCodeSelector, FailureClass, FailureReason, Limits, Phase, RestartPolicySpec, Rule,
    RuleAction, ShutdownType, Trigger,
};
use agent_supervisor::supervise::conditions::READY;
use agent_supervisor::supervise::input::ContainerPhase;
use agent_supervisor::supervise::{EventReason, LastFailure, NewPod, PodOrigin, PolicyResolution};

use crate::build::{breaker, condition, fast, named, reasons, secs, time};
use crate::sim::Sim;

fn rule(codes: &[i32], reasons: &[FailureReason], action: RuleAction) -> Rule {
    Rule {
        exit_codes: (!codes.is_empty()).then(|| ExitCodeSelector {
            operator: ExitCodeOperator::In,
            values: codes.to_vec(),
        }),
        reasons: reasons.to_vec(),
        action,
    }
}

fn with_rules(rules: Vec<Rule>) -> PolicyResolution {
    named(RestartPolicySpec { rules, ..fast() })
}

#[test]
fn a_stop_rule_stops_the_agent() {
    let mut sim = Sim::running(with_rules(vec![rule(&[3], &[], RuleAction::Stop)]));
    sim.runs(5).exits(3, Some("config invalid"), 40);
    let plan = sim.at(41).step();
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Stopped));
    assert_eq!(plan.create_pod, None);
    assert_eq!(s.next_restart_at, None);
    assert_eq!(s.shutdown, None);
    assert_eq!(
        s.last_failure.as_ref().map(|f| f.class),
        Some(FailureClass::Permanent)
    );
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert_eq!(condition(s, READY).reason, "StoppedByRule");

    // Nothing happens later either.
    let later = sim.at(100_000).step();
    assert_eq!(later.create_pod, None);
    assert!(later.events.is_empty());
    assert_eq!(later.status.phase, Some(Phase::Stopped));
    assert_eq!(condition(&later.status, READY).reason, "StoppedByRule");
}

#[test]
fn an_agent_that_says_its_failure_is_permanent_is_stopped_with_its_reason() {
    // Whatever its exit code and whatever the rules say (here: restart everything), and even
    // with a retry-after beside it.
    let restart_all = with_rules(vec![rule(&[], &[], RuleAction::Restart)]);
    for message in [
        r#"{"permanent": true, "reason": "no API key configured"}"#,
        r#"{"permanent": true, "reason": "no API key configured", "retryAfter": "1m", "progress": 4}"#,
    ] {
        let mut sim = Sim::running(restart_all.clone());
        sim.runs(5).exits(1, Some(message), 40);
        let plan = sim.at(41).step();
        let s = &plan.status;
        assert_eq!(s.phase, Some(Phase::Stopped), "{message}");
        assert_eq!(plan.create_pod, None);
        assert_eq!(s.next_restart_at, None);
        assert_eq!(s.shutdown, None);
        let failure = s.last_failure.as_ref().expect("the failure recorded");
        assert_eq!(failure.class, FailureClass::Permanent);
        assert_eq!(failure.exit_code, Some(1));
        assert_eq!(failure.message.as_deref(), Some("no API key configured"));
        assert_eq!(reasons(&plan), [EventReason::Crashed]);
        let ready = condition(s, READY);
        assert_eq!(ready.reason, "PermanentFailure");
        assert!(
            ready.message.contains("no API key configured"),
            "{}",
            ready.message
        );
        let later = sim.at(100_000).step();
        assert_eq!(later.create_pod, None);
        assert_eq!(later.status.phase, Some(Phase::Stopped));
    }
    // `permanent` false, or beside a shutdown (which wins), is not one.
    for (message, phase) in [
        (r#"{"permanent": false, "reason": "x"}"#, Phase::BackingOff),
        (
            r#"{"permanent": true, "shutdown": "voluntary"}"#,
            Phase::Shutdown,
        ),
    ] {
        let mut sim = Sim::running(restart_all.clone());
        sim.runs(5).exits(1, Some(message), 40);
        let plan = sim.at(41).step();
        assert_eq!(plan.status.phase, Some(phase), "{message}");
    }
}

#[test]
fn shutdown_rules_record_the_shutdown_and_never_restart() {
    for (action, kind) in [
        (RuleAction::VoluntaryShutdown, ShutdownType::Voluntary),
        (RuleAction::EconomicShutdown, ShutdownType::Economic),
    ] {
        let mut sim = Sim::running(with_rules(vec![rule(&[42], &[], action)]));
        sim.runs(5).exits(42, None, 40);
        let plan = sim.at(41).step();
        let s = &plan.status;
        let shutdown = s.shutdown.clone().expect("a shutdown is recorded");
        assert_eq!(shutdown.kind, kind, "{action:?}");
        assert_eq!(shutdown.source.as_deref(), Some("Rule"), "{action:?}");
        assert_eq!(shutdown.at, Some(time(41)), "{action:?}");
        assert_eq!(plan.record_shutdown, Some(shutdown), "{action:?}");
        assert_eq!(s.phase, Some(Phase::Shutdown), "{action:?}");
        assert_eq!(
            s.last_failure.as_ref().map(|f| f.class),
            Some(FailureClass::Shutdown)
        );
        assert_eq!(s.consecutive_failures, 0, "a shutdown is not a failure");
        assert_eq!(plan.create_pod, None);
        assert_eq!(reasons(&plan), [EventReason::ShutdownRespected]);

        let later = sim.at(100_000).step();
        assert_eq!(later.create_pod, None, "{action:?}");
        assert!(later.events.is_empty(), "{:?}", later.events);
        assert_eq!(later.record_shutdown, None);
        assert_eq!(later.status.shutdown, s.shutdown);
    }
}

#[test]
fn an_ignore_rule_restarts_at_once_without_counting() {
    let policy = RestartPolicySpec {
        limits: Limits {
            max_restarts: 1,
            window: secs(3600),
        },
        circuit_breaker: CircuitBreakerPolicy {
            failure_threshold: 1,
            ..CircuitBreakerPolicy::default()
        },
        rules: vec![rule(&[], &[FailureReason::OomKilled], RuleAction::Ignore)],
        ..fast()
    };
    let mut sim = Sim::running(named(policy));
    let mut now = 20;
    for n in 1..=3u32 {
        sim.runs(now - 10);
        sim.exits(137, None, now);
        if let ContainerPhase::Terminated(term) = &mut sim.pod().containers[0].state {
            term.reason = Some("OOMKilled".to_string());
        }
        let (_, plan) = sim.at(now).restart_at_once();
        let s = &plan.status;
        assert_eq!(
            plan.create_pod.as_ref().map(|p| p.attempt),
            Some(n + 1),
            "restarted at once, within the limit of 1 and under a breaker at 1"
        );
        assert_eq!(s.consecutive_failures, 0);
        assert!(s.recent_restarts.is_empty());
        assert_eq!(s.restart_count, n);
        assert_eq!(breaker(s).state, BreakerState::Closed);
        let record = &s.restart_history[0];
        assert_eq!(record.class, Some(FailureClass::Disruption));
        assert_eq!(record.reason, Some(FailureReason::OomKilled));
        assert_eq!(record.backoff, Some(Duration::ZERO));
        assert_eq!(record.restarted_at, Some(time(now)));
        assert!(reasons(&plan).contains(&EventReason::Restarted));
        now += 30;
    }
    // An ordinary crash is still within the limit: the ignored restarts did not count.
    let plan = sim.crash(now - 10, now);
    assert_eq!(plan.status.consecutive_failures, 1);
    assert_eq!(plan.status.phase, Some(Phase::CircuitOpen));
}

#[test]
fn a_restart_rule_overrides_the_default_for_exit_code_zero() {
    let mut sim = Sim::running(with_rules(vec![rule(&[0], &[], RuleAction::Restart)]));
    sim.runs(5).exits(0, None, 40);
    let plan = sim.at(40).step();
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.shutdown, None);
    assert_eq!(plan.status.next_restart_at, Some(time(50)));
    assert_eq!(
        plan.status.last_failure.as_ref().map(|f| f.reason),
        Some(FailureReason::Completed)
    );
}

#[test]
fn by_default_exit_zero_is_a_voluntary_shutdown() {
    let mut sim = Sim::running(PolicyResolution::BuiltIn);
    sim.runs(5).exits(0, None, 40);
    let plan = sim.at(41).step();
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Shutdown));
    let shutdown = s.shutdown.clone().expect("recorded");
    assert_eq!(shutdown.kind, ShutdownType::Voluntary);
    assert_eq!(plan.record_shutdown, Some(shutdown));
    assert_eq!(plan.create_pod, None);
    assert_eq!(reasons(&plan), [EventReason::ShutdownRespected]);
}

#[test]
fn the_termination_message_shuts_the_agent_down_whatever_the_exit_code() {
    for code in [0, 1, 137] {
        let mut sim = Sim::running(with_rules(vec![rule(&[], &[], RuleAction::Restart)]));
        sim.runs(5).exits(
            code,
            Some(r#"{"shutdown":"economic","reason":"budget exhausted"}"#),
            40,
        );
        let plan = sim.at(41).step();
        let s = &plan.status;
        let shutdown = s.shutdown.clone().expect("recorded");
        assert_eq!(shutdown.kind, ShutdownType::Economic, "exit {code}");
        assert_eq!(shutdown.reason.as_deref(), Some("budget exhausted"));
        assert_eq!(shutdown.source.as_deref(), Some("TerminationMessage"));
        assert_eq!(shutdown.at, Some(time(41)));
        assert_eq!(plan.record_shutdown, Some(shutdown));
        assert_eq!(s.phase, Some(Phase::Shutdown));
        assert_eq!(plan.create_pod, None);
        assert_eq!(s.consecutive_failures, 0);
        assert_eq!(
            s.last_failure.as_ref().map(|f| f.class),
            Some(FailureClass::Shutdown)
        );
    }
}

#[test]
fn by_default_an_eviction_restarts_at_once_and_counts_toward_nothing() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 30);
    sim.restart_when_due();
    let recent_restarts = sim.status().recent_restarts.clone();
    assert_eq!(sim.status().consecutive_failures, 1);
    sim.runs(45).evicted();
    let (_, plan) = sim.at(100).restart_at_once();
    let s = &plan.status;
    assert_eq!(
        plan.create_pod,
        Some(NewPod {
            name: "researcher-3".to_string(),
            attempt: 3,
            restart_count: 2,
            last_failure_reason: Some(FailureReason::Evicted),
            last_failure: Some(LastFailure {
                attempt: Some(2),
                reason: FailureReason::Evicted,
                class: FailureClass::Disruption,
                exit_code: None,
                message: Some("The node was low on resource: memory.".into()),
            }),
            progress: None,
            origin: PodOrigin {
                trigger: Some(Trigger::Disruption),
                ..PodOrigin::default()
            },
        })
    );
    assert_eq!(s.consecutive_failures, 1, "unchanged");
    assert_eq!(
        s.recent_restarts, recent_restarts,
        "not counted toward the limit"
    );
    assert_eq!(s.phase, Some(Phase::Pending));
    let failure = s.last_failure.clone().unwrap();
    assert_eq!(failure.reason, FailureReason::Evicted);
    assert_eq!(failure.class, FailureClass::Disruption);
    assert_eq!(
        failure.message.as_deref(),
        Some("The node was low on resource: memory.")
    );
    let record = &s.restart_history[0];
    assert_eq!(record.attempt, 2);
    assert_eq!(record.trigger, Trigger::Disruption);
    assert_eq!(record.backoff, Some(Duration::ZERO));
    assert_eq!(record.restarted_at, Some(time(100)));
    assert_eq!(s.restart_history.len(), 2);
    assert!(!reasons(&plan).contains(&EventReason::Crashed));
    assert!(!reasons(&plan).contains(&EventReason::RestartScheduled));
}

#[test]
fn the_never_backoff_stops_after_a_failure() {
    let policy = RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Never,
            ..Backoff::default()
        },
        ..RestartPolicySpec::default()
    };
    let mut sim = Sim::running(named(policy));
    let plan = sim.crash(5, 40);
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert_eq!(plan.create_pod, None);
    assert_eq!(condition(&plan.status, READY).reason, "RestartPolicyNever");
    assert_eq!(sim.at(10_000).step().create_pod, None);
}
