//! Scenarios for `decide`: an agent's life step by step, with the IO shell played by `Sim`,
//! which carries out each plan the way the operator would (write the status, create the pod,
//! mark a deleted pod as going) and lets the test play the kubelet.

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, BreakerState, CircuitBreakerPolicy, CircuitBreakerStatus,
    Condition, Duration, ExitCodeOperator, ExitCodeSelector, Failure, FailureClass, FailureReason,
    Heartbeat, Limits, Phase, RestartPolicySpec, RestartRecord, Rule, RuleAction, Shutdown,
    ShutdownType, Time, Trigger,
};
use agent_supervisor::supervise::backoff;
use agent_supervisor::supervise::conditions::{self, CIRCUIT_BREAKER_OPEN, POLICY_RESOLVED, READY};
use agent_supervisor::supervise::fingerprint::fingerprint;
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{
    AgentFacts, EventReason, Input, LeaseFacts, NewPod, Options, PodFacts, PodOrigin,
    PolicyResolution, SETTLE, decide_with,
};
use jiff::{SignedDuration, Timestamp};

const AGENT: &str = "researcher";
const UID: &str = "0b6f1c2e-researcher";

#[path = "common/clock.rs"]
mod clock;
use clock::t;

fn time(secs: i64) -> Time {
    Time(t(secs))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Rounds up to a whole second: status times are stored to the second.
fn ceil_second(ts: Timestamp) -> Timestamp {
    let down = Timestamp::from_second(ts.as_second()).unwrap();
    if down == ts {
        ts
    } else {
        down + SignedDuration::from_secs(1)
    }
}

/// A policy with round numbers: exponential from 10s, no jitter, no limit, a breaker at 5.
fn fast() -> RestartPolicySpec {
    RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Exponential,
            initial_delay: secs(10),
            max_delay: secs(300),
            multiplier: 2.0,
            jitter: 0.0,
        },
        ..RestartPolicySpec::default()
    }
}

/// `fast` with a restart limit of 1 and a breaker at 1: anything counted shows at once.
fn strict() -> RestartPolicySpec {
    RestartPolicySpec {
        limits: Limits {
            max_restarts: 1,
            window: secs(86_400),
        },
        circuit_breaker: CircuitBreakerPolicy {
            failure_threshold: 1,
            ..CircuitBreakerPolicy::default()
        },
        ..fast()
    }
}

fn named(policy: RestartPolicySpec) -> PolicyResolution {
    PolicyResolution::Named("fast".to_string(), policy)
}

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

fn reasons(plan: &agent_supervisor::supervise::Plan) -> Vec<EventReason> {
    plan.events.iter().map(|e| e.reason).collect()
}

#[track_caller]
fn condition<'a>(status: &'a AgentStatus, type_: &str) -> &'a Condition {
    conditions::get(&status.conditions, type_)
        .unwrap_or_else(|| panic!("condition {type_} is set: {:?}", status.conditions))
}

fn breaker(status: &AgentStatus) -> CircuitBreakerStatus {
    status.circuit_breaker.clone().unwrap_or_default()
}

/// The world one agent lives in. `step` decides and carries the plan out.
struct Sim {
    input: Input,
    options: Options,
}

impl Sim {
    fn new(policy: PolicyResolution) -> Sim {
        Sim {
            input: Input {
                now: t(0),
                agent: AgentFacts {
                    name: AGENT.to_string(),
                    uid: UID.to_string(),
                    generation: 1,
                    suspend: false,
                    heartbeat: None,
                    template_hash: "h1".to_string(),
                    restart_requested: None,
                    reset_requested: None,
                },
                status: AgentStatus::default(),
                policy,
                pod: None,
                previous: None,
                lease: None,
                group: None,
                outages: Vec::new(),
            },
            // Most scenarios follow a failure and its restart as two decisions, as the
            // operator makes them when the restart waits (for its backoff, or for the budget).
            // `at_once` makes a restart due at once in the failure's own decision.
            options: Options {
                restart_at_once: false,
            },
        }
    }

    /// Restarts due at once are made with the failure, as the operator makes them.
    fn at_once(mut self) -> Sim {
        self.options = Options::default();
        self
    }

    /// An agent whose first pod was created at t(0) and has run, ready, since t(5).
    fn running(policy: PolicyResolution) -> Sim {
        let mut sim = Sim::new(policy);
        sim.step();
        sim.runs(5);
        sim.at(10).step();
        assert_eq!(sim.status().phase, Some(Phase::Running));
        sim
    }

    fn at(&mut self, secs: i64) -> &mut Self {
        self.input.now = t(secs);
        self
    }

    fn status(&self) -> &AgentStatus {
        &self.input.status
    }

    fn pod(&mut self) -> &mut PodFacts {
        self.input.pod.as_mut().expect("the agent has a pod")
    }

    /// Decides without carrying anything out.
    fn decide(&self) -> agent_supervisor::supervise::Plan {
        decide_with(self.input.clone(), self.options)
    }

    /// Decides and carries out the plan.
    fn step(&mut self) -> agent_supervisor::supervise::Plan {
        let plan = decide_with(self.input.clone(), self.options);
        self.input = apply(&self.input, &plan);
        plan
    }

    /// The current pod runs, ready, since `since`.
    fn runs(&mut self, since: i64) -> &mut Self {
        let pod = self.pod();
        pod.phase = PodPhase::Running;
        pod.ready = true;
        pod.containers = vec![ContainerFacts {
            name: "agent".to_string(),
            state: ContainerPhase::Running {
                started_at: Some(t(since)),
            },
        }];
        self
    }

    /// The current pod's container exits with `code` at `at`.
    fn exits(&mut self, code: i32, message: Option<&str>, at: i64) -> &mut Self {
        let pod = self.pod();
        let started_at = pod.started_at();
        pod.phase = if code == 0 {
            PodPhase::Succeeded
        } else {
            PodPhase::Failed
        };
        pod.ready = false;
        pod.containers = vec![ContainerFacts {
            name: "agent".to_string(),
            state: ContainerPhase::Terminated(Termination {
                exit_code: code,
                signal: None,
                reason: Some(if code == 0 { "Completed" } else { "Error" }.to_string()),
                message: message.map(str::to_string),
                started_at,
                finished_at: Some(t(at)),
            }),
        }];
        self
    }

    fn evicted(&mut self) -> &mut Self {
        let pod = self.pod();
        pod.phase = PodPhase::Failed;
        pod.ready = false;
        pod.reason = Some("Evicted".to_string());
        pod.message = Some("The node was low on resource: memory.".to_string());
        self
    }

    /// The current pod runs from `run_from`, crashes with exit 1 at `crash_at`, and the operator
    /// decides then.
    fn crash(&mut self, run_from: i64, crash_at: i64) -> agent_supervisor::supervise::Plan {
        self.runs(run_from).exits(1, Some("boom"), crash_at);
        self.at(crash_at).step()
    }

    /// A restart due at once: the first decision records it (and kills a live pod), the next,
    /// at the same instant, creates its pod. Returns both plans.
    fn restart_at_once(
        &mut self,
    ) -> (
        agent_supervisor::supervise::Plan,
        agent_supervisor::supervise::Plan,
    ) {
        let now = self.input.now;
        let recorded = self.step();
        assert_eq!(recorded.create_pod, None, "recorded first: {recorded:?}");
        let s = &recorded.status;
        assert_eq!(s.phase, Some(Phase::BackingOff));
        assert_eq!(s.next_restart_at, Some(Time(now)));
        assert_eq!(s.restart_history[0].restarted_at, None, "pending");
        assert_eq!(recorded.requeue_at, Some(now), "decided again at once");
        let created = self.step();
        assert!(created.create_pod.is_some(), "then created: {created:?}");
        assert_eq!(created.delete_pod, None, "the old pod is already going");
        (recorded, created)
    }

    /// Decides at the scheduled restart time.
    fn restart_when_due(&mut self) -> agent_supervisor::supervise::Plan {
        let due = self
            .status()
            .next_restart_at
            .clone()
            .expect("a restart is scheduled");
        self.input.now = due.0;
        let plan = self.step();
        assert!(plan.create_pod.is_some(), "restarted when due: {plan:?}");
        plan
    }
}

/// Carries out a plan as the IO shell does: the status is written, a deleted pod is going, a
/// created pod appears, Pending, made from the current template.
fn apply(input: &Input, plan: &agent_supervisor::supervise::Plan) -> Input {
    let mut next = input.clone();
    next.status = plan.status.clone();
    if let (Some(name), Some(pod)) = (&plan.delete_pod, next.pod.as_mut())
        && pod.name == *name
    {
        pod.deleting = true;
    }
    if let Some(new) = &plan.create_pod {
        next.pod = Some(new_pod(new, &input.agent.template_hash, input.now));
    }
    next
}

fn new_pod(new: &NewPod, template_hash: &str, now: Timestamp) -> PodFacts {
    PodFacts {
        name: new.name.clone(),
        attempt: new.attempt,
        template_hash: Some(template_hash.to_string()),
        created_at: now,
        deleting: false,
        phase: PodPhase::Pending,
        reason: None,
        message: None,
        disruption: None,
        unschedulable: None,
        ready: false,
        containers: vec![ContainerFacts {
            name: "agent".to_string(),
            state: ContainerPhase::Waiting {
                reason: Some("ContainerCreating".to_string()),
                message: None,
            },
        }],
        agent_container: None,
        origin: new.origin.clone(),
    }
}

// --- Starting and restarting -----------------------------------------------------------------

#[test]
fn first_start_creates_attempt_one() {
    let mut sim = Sim::new(PolicyResolution::BuiltIn);
    let plan = sim.step();
    assert_eq!(
        plan.create_pod,
        Some(NewPod {
            name: "researcher-1".to_string(),
            attempt: 1,
            restart_count: 0,
            last_failure_reason: None,
            origin: PodOrigin::default(),
        })
    );
    assert_eq!(plan.delete_pod, None);
    assert_eq!(plan.record_shutdown, None);
    assert_eq!(reasons(&plan), [EventReason::PodCreated]);
    assert!(!plan.events[0].warning());
    // Look again when the pod must be running: the built-in startupTimeout is 10m.
    assert_eq!(plan.requeue_at, Some(t(600)));

    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!(s.pod_name.as_deref(), Some("researcher-1"));
    assert_eq!(s.attempt, 1);
    assert_eq!(s.restart_count, 0);
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.next_restart_at, None);
    assert_eq!(s.last_failure, None);
    assert!(s.restart_history.is_empty());
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(breaker(s).state, BreakerState::Closed);
    let ready = condition(s, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PodPending")
    );
    assert_eq!(ready.observed_generation, Some(1));
    assert_eq!(condition(s, POLICY_RESOLVED).status, "True");
    assert_eq!(condition(s, CIRCUIT_BREAKER_OPEN).status, "False");
}

#[test]
fn a_running_ready_pod_makes_the_agent_running_and_ready() {
    let mut sim = Sim::new(PolicyResolution::BuiltIn);
    sim.step();
    let plan = sim.runs(5).at(10).step();
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None);
    assert!(plan.events.is_empty(), "{:?}", plan.events);
    let ready = condition(&plan.status, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "PodReady")
    );

    // Running but not ready.
    sim.pod().ready = false;
    let plan = sim.at(11).step();
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(condition(&plan.status, READY).status, "False");
}

#[test]
fn a_crash_schedules_a_jittered_exponential_restart() {
    let mut sim = Sim::running(PolicyResolution::BuiltIn);
    sim.runs(5).exits(1, Some("RuntimeError: boom"), 65);
    // The operator's clock is not on a whole second.
    sim.input.now = t(70) + SignedDuration::from_millis(400);
    let plan = sim.step();

    // The built-in backoff: 10s × 2^0, jitter ±25%, fixed for this agent and attempt.
    let delay = backoff::delay(&Backoff::default(), 1, UID, 1).expect("a delay");
    assert!(
        (7_500..=12_500).contains(&delay.as_millis()),
        "10s ± 25%: {delay}"
    );
    assert_eq!(
        backoff::delay(&Backoff::default(), 1, UID, 1),
        Some(delay),
        "the same each time"
    );
    let due = ceil_second(t(70) + SignedDuration::from_millis(delay.as_millis() as i64));
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert_eq!(s.next_restart_at, Some(Time(due)));
    assert_eq!(plan.requeue_at, Some(due));
    assert_eq!(s.consecutive_failures, 1);
    assert_eq!(s.restart_count, 0);
    assert_eq!(s.attempt, 1);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None, "a finished pod needs no deleting");
    let print = fingerprint(
        FailureReason::Error,
        Some(1),
        Some("RuntimeError: boom"),
        &[],
    );
    assert_eq!(
        s.last_failure,
        Some(Failure {
            time: time(65),
            reason: FailureReason::Error,
            class: FailureClass::Transient,
            exit_code: Some(1),
            signal: None,
            message: Some("RuntimeError: boom".into()),
            container: Some("agent".to_string()),
            pod_name: Some("researcher-1".to_string()),
            ran_for: Some(secs(60)),
            fingerprint: Some(print.clone()),
        })
    );
    assert_eq!(
        s.restart_history,
        [RestartRecord {
            attempt: 1,
            trigger: Trigger::Failure,
            failed_at: Some(time(65)),
            reason: Some(FailureReason::Error),
            class: Some(FailureClass::Transient),
            exit_code: Some(1),
            signal: None,
            message: Some("RuntimeError: boom".into()),
            ran_for: Some(secs(60)),
            fingerprint: Some(print.clone()),
            backoff: Some(delay),
            restarted_at: None,
        }]
    );
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert!(plan.events[0].warning());
    assert!(
        plan.events[0].note.contains("exit code 1"),
        "{:?}",
        plan.events[0]
    );
    assert!(plan.events[0].note.contains("RuntimeError: boom"));
    assert!(
        plan.events[0]
            .note
            .contains(&format!("restarting in {delay} at ")),
        "one Event says what happens next: {:?}",
        plan.events[0]
    );
    let ready = condition(s, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "BackingOff")
    );

    // A second before it is due: nothing happens, and the operator comes back when it is.
    sim.input.now = due - SignedDuration::from_secs(1);
    let early = sim.decide();
    assert_eq!(early.create_pod, None);
    assert!(early.events.is_empty());
    assert_eq!(early.status, sim.input.status);
    assert_eq!(early.requeue_at, Some(due));

    // When due: attempt 2, which knows it was restarted and why.
    let plan = sim.restart_when_due();
    assert_eq!(
        plan.create_pod,
        Some(NewPod {
            name: "researcher-2".to_string(),
            attempt: 2,
            restart_count: 1,
            last_failure_reason: Some(FailureReason::Error),
            origin: PodOrigin {
                trigger: Some(Trigger::Failure),
                ..PodOrigin::default()
            },
        })
    );
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.attempt, 2);
    assert_eq!(s.pod_name.as_deref(), Some("researcher-2"));
    assert_eq!(s.next_restart_at, None);
    assert_eq!(s.consecutive_failures, 1, "not healthy yet");
    assert_eq!(s.restart_history.len(), 1);
    assert_eq!(s.restart_history[0].restarted_at, Some(Time(due)));
    assert_eq!(reasons(&plan), [EventReason::Restarted]);
}

#[test]
fn consecutive_failures_grow_the_delay_exponentially_to_the_cap() {
    // No breaker in the way.
    let mut sim = Sim::running(limited(0, 3600));
    let mut now = 100;
    let mut delays = Vec::new();
    for _ in 0..7 {
        let plan = sim.crash(now - 50, now);
        assert_eq!(plan.status.phase, Some(Phase::BackingOff), "{plan:?}");
        let due = plan.status.next_restart_at.clone().unwrap().0;
        delays.push((due - t(now)).get_seconds());
        sim.restart_when_due();
        now = due.as_second() - t(0).as_second() + 60;
    }
    assert_eq!(delays, [10, 20, 40, 80, 160, 300, 300]);
}

#[test]
fn a_restarted_pod_that_vanished_is_replaced_at_once_as_a_disruption() {
    let mut sim = Sim::running(named(fast()));
    sim.input.pod = None;
    let (_, plan) = sim.at(50).restart_at_once();
    let s = &plan.status;
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
    assert_eq!(
        s.last_failure.as_ref().map(|f| f.reason),
        Some(FailureReason::NodeLost)
    );
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.restart_history[0].trigger, Trigger::Disruption);
}

// --- Rules -----------------------------------------------------------------------------------

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

// --- Heartbeats and startup in the decision ----------------------------------------------------

#[test]
fn a_hung_pod_is_deleted_and_restarted_as_heartbeat_lost() {
    let mut sim = Sim::new(named(fast()));
    sim.input.agent.heartbeat = Some(Heartbeat {
        timeout: secs(30),
        grace_period: Some(secs(60)),
    });
    sim.step();
    sim.runs(5);
    sim.input.lease = Some(LeaseFacts {
        holder: Some("researcher-1".to_string()),
        renew_time: Some(t(100)),
    });
    let alive = sim.at(110).step();
    assert_eq!(alive.status.phase, Some(Phase::Running));
    assert_eq!(alive.requeue_at, Some(t(130)), "look again when it expires");
    assert_eq!(alive.delete_pod, None);

    let plan = sim.at(131).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(plan.create_pod, None);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert_eq!(s.next_restart_at, Some(time(141)));
    let failure = s.last_failure.clone().unwrap();
    assert_eq!(failure.reason, FailureReason::HeartbeatLost);
    assert_eq!(failure.class, FailureClass::Transient);
    assert_eq!(failure.ran_for, Some(secs(126)));
    assert_eq!(s.restart_history[0].trigger, Trigger::HeartbeatLost);
    assert_eq!(reasons(&plan), [EventReason::HeartbeatLost]);
    assert!(plan.events[0].warning());

    // The deleted pod is going: the restart still happens when due, and once.
    let plan = sim.restart_when_due();
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(2));
    assert_eq!(plan.delete_pod, None);
}

#[test]
fn a_pod_that_never_starts_is_deleted_and_restarted_as_startup_timeout() {
    let policy = RestartPolicySpec {
        startup_timeout: secs(120),
        ..fast()
    };
    let mut sim = Sim::new(named(policy));
    let plan = sim.step();
    assert_eq!(plan.requeue_at, Some(t(120)));
    sim.pod().containers[0].state = ContainerPhase::Waiting {
        reason: Some("ImagePullBackOff".to_string()),
        message: None,
    };
    let waiting = sim.at(119).step();
    assert_eq!(waiting.status.phase, Some(Phase::Pending));
    assert_eq!(waiting.delete_pod, None);
    let plan = sim.at(121).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    let failure = plan.status.last_failure.clone().unwrap();
    assert_eq!(failure.reason, FailureReason::StartupTimeout);
    assert!(failure.message.unwrap().contains("ImagePullBackOff"));
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
}

// --- Restart limit ---------------------------------------------------------------------------

fn limited(max_restarts: u32, window: u64) -> PolicyResolution {
    named(RestartPolicySpec {
        limits: Limits {
            max_restarts,
            window: secs(window),
        },
        circuit_breaker: CircuitBreakerPolicy {
            failure_threshold: 0,
            ..CircuitBreakerPolicy::default()
        },
        ..fast()
    })
}

#[test]
fn more_restarts_than_the_limit_within_the_window_give_up() {
    let mut sim = Sim::running(limited(2, 3600));
    sim.crash(5, 100);
    sim.restart_when_due();
    sim.crash(120, 200);
    sim.restart_when_due();
    assert_eq!(sim.status().restart_count, 2);

    let plan = sim.crash(240, 300);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Stopped));
    assert_eq!(plan.create_pod, None);
    assert_eq!(s.next_restart_at, None);
    assert_eq!(
        reasons(&plan),
        [EventReason::Crashed, EventReason::RestartLimitExceeded]
    );
    assert!(plan.events[1].warning());
    let ready = condition(s, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "RestartLimitExceeded")
    );
    assert_eq!(
        s.last_failure.as_ref().map(|f| f.time.clone()),
        Some(time(300)),
        "the failure that gave up is still recorded"
    );

    // Stopped stays stopped, and says so once.
    let later = sim.at(100_000).step();
    assert_eq!(later.create_pod, None);
    assert!(later.events.is_empty());
    assert_eq!(
        condition(&later.status, READY).reason,
        "RestartLimitExceeded"
    );
}

#[test]
fn restarts_outside_the_window_do_not_count() {
    let mut sim = Sim::running(limited(2, 3600));
    sim.crash(5, 100);
    let first = sim.restart_when_due();
    let first_restart = first.status.restart_history[0]
        .restarted_at
        .clone()
        .unwrap();
    sim.crash(2000, 2050);
    sim.restart_when_due();
    // The first restart is now more than an hour ago: only one restart is within the window.
    let crash_at = first_restart.0.as_second() - t(0).as_second() + 3601;
    let plan = sim.crash(crash_at - 60, crash_at);
    assert_eq!(
        plan.status.phase,
        Some(Phase::BackingOff),
        "{:?}",
        plan.events
    );
    sim.restart_when_due();
    // Two restarts within the hour now.
    let plan = sim.crash(crash_at + 60, crash_at + 120);
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert!(reasons(&plan).contains(&EventReason::RestartLimitExceeded));
}

#[test]
fn zero_max_restarts_is_unlimited() {
    let mut sim = Sim::running(limited(0, 3600));
    let mut now = 100;
    for _ in 0..20 {
        let plan = sim.crash(now - 10, now);
        assert_eq!(plan.status.phase, Some(Phase::BackingOff));
        sim.restart_when_due();
        now = sim.input.now.as_second() - t(0).as_second() + 30;
    }
    assert_eq!(sim.status().restart_count, 20);
}

// --- Circuit breaker -------------------------------------------------------------------------

fn breaker_policy() -> PolicyResolution {
    named(RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Immediate,
            ..fast().backoff
        },
        reset_after: secs(600),
        circuit_breaker: CircuitBreakerPolicy {
            failure_threshold: 3,
            open_duration: secs(60),
            open_duration_multiplier: 2.0,
            max_open_duration: secs(3600),
        },
        ..fast()
    })
}

/// Fails `n` times in a row, restarting each time, the last crash at `last`.
fn fail_times(sim: &mut Sim, n: i64, last: i64) -> agent_supervisor::supervise::Plan {
    for i in (1..n).rev() {
        let at = last - 20 * i;
        let plan = sim.crash(at - 10, at);
        assert_eq!(
            plan.status.phase,
            Some(Phase::BackingOff),
            "{:?}",
            plan.events
        );
        sim.restart_when_due();
    }
    sim.crash(last - 10, last)
}

#[test]
fn the_breaker_opens_probes_once_and_closes_after_a_healthy_probe() {
    let mut sim = Sim::running(breaker_policy());
    let plan = fail_times(&mut sim, 3, 200);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::CircuitOpen));
    assert_eq!(s.consecutive_failures, 3);
    assert_eq!(
        breaker(s),
        CircuitBreakerStatus {
            state: BreakerState::Open,
            trips: 1,
            opened_at: Some(time(200)),
            half_open_at: Some(time(260)),
        }
    );
    assert_eq!(plan.create_pod, None);
    assert_eq!(s.next_restart_at, None);
    assert_eq!(plan.requeue_at, Some(t(260)));
    assert_eq!(
        reasons(&plan),
        [EventReason::Crashed, EventReason::CircuitOpened]
    );
    assert!(plan.events[1].warning());
    assert_eq!(s.restart_history[0].backoff, Some(secs(60)));
    let open = condition(s, CIRCUIT_BREAKER_OPEN);
    assert_eq!(open.status, "True");
    assert_eq!(open.last_transition_time, time(200));
    assert_eq!(condition(s, READY).reason, "CircuitOpen");

    // No pod until halfOpenAt.
    for now in [201, 230, 259] {
        let plan = sim.at(now).step();
        assert_eq!(plan.create_pod, None, "at {now}");
        assert!(plan.events.is_empty(), "at {now}");
        assert_eq!(plan.requeue_at, Some(t(260)));
    }

    // At halfOpenAt: exactly one probe.
    let probe = sim.at(260).step();
    assert_eq!(probe.create_pod.as_ref().map(|p| p.attempt), Some(4));
    assert_eq!(breaker(&probe.status).state, BreakerState::HalfOpen);
    assert_eq!(
        reasons(&probe),
        [EventReason::CircuitHalfOpen, EventReason::Restarted]
    );
    assert_eq!(
        condition(&probe.status, CIRCUIT_BREAKER_OPEN).status,
        "False"
    );
    for now in [260, 261, 300] {
        let again = sim.at(now).step();
        assert_eq!(again.create_pod, None, "one probe only, at {now}");
        assert_eq!(breaker(&again.status).state, BreakerState::HalfOpen);
    }

    // The probe runs: it must run for resetAfter before the breaker closes.
    sim.runs(300);
    let running = sim.at(899).step();
    assert_eq!(breaker(&running.status).state, BreakerState::HalfOpen);
    assert_eq!(running.requeue_at, Some(t(900)));
    assert_eq!(running.status.consecutive_failures, 3);
    let closed = sim.at(900).step();
    assert_eq!(
        breaker(&closed.status),
        CircuitBreakerStatus::default(),
        "Closed, trips cleared"
    );
    assert_eq!(closed.status.consecutive_failures, 0);
    assert_eq!(reasons(&closed), [EventReason::CircuitClosed]);
    assert_eq!(closed.create_pod, None);
    let open = condition(&closed.status, CIRCUIT_BREAKER_OPEN);
    assert_eq!(open.status, "False");

    // The count starts again: one failure is a backoff, not a trip.
    let plan = sim.crash(300, 1000);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.consecutive_failures, 1);
}

#[test]
fn a_failed_probe_opens_the_breaker_again_for_longer() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    sim.at(260).step();
    let plan = sim.crash(265, 300);
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::CircuitOpen));
    assert_eq!(s.consecutive_failures, 4);
    assert_eq!(
        breaker(s),
        CircuitBreakerStatus {
            state: BreakerState::Open,
            trips: 2,
            opened_at: Some(time(300)),
            half_open_at: Some(time(420)),
        }
    );
    assert_eq!(
        reasons(&plan),
        [EventReason::Crashed, EventReason::CircuitOpened]
    );
    assert_eq!(plan.create_pod, None);

    assert_eq!(sim.at(419).step().create_pod, None);
    let probe = sim.at(420).step();
    assert_eq!(probe.create_pod.as_ref().map(|p| p.attempt), Some(5));
    sim.crash(421, 430);
    assert_eq!(
        breaker(sim.status()).half_open_at,
        Some(time(430 + 240)),
        "60s, 120s, 240s"
    );
    assert_eq!(breaker(sim.status()).trips, 3);
}

#[test]
fn a_probe_that_ran_for_reset_after_before_failing_closed_the_breaker() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    sim.at(260).step();
    // Nobody looked while the probe ran for more than resetAfter; then it crashed.
    let plan = sim.crash(265, 265 + 700);
    let s = &plan.status;
    assert_eq!(breaker(s).state, BreakerState::Closed);
    assert_eq!(breaker(s).trips, 0);
    assert_eq!(s.consecutive_failures, 1, "a new count");
    assert_eq!(s.phase, Some(Phase::BackingOff));
    assert!(
        reasons(&plan).contains(&EventReason::CircuitClosed),
        "the probe ran for resetAfter: the breaker closed, and says so: {:?}",
        plan.events
    );
}

#[test]
fn a_zero_threshold_disables_the_breaker() {
    let policy = match breaker_policy() {
        PolicyResolution::Named(name, mut p) => {
            p.circuit_breaker.failure_threshold = 0;
            PolicyResolution::Named(name, p)
        }
        other => other,
    };
    let mut sim = Sim::running(policy);
    let plan = fail_times(&mut sim, 10, 1000);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(breaker(&plan.status).state, BreakerState::Closed);
}

// --- Healthy again ---------------------------------------------------------------------------

#[test]
fn running_for_reset_after_resets_the_failure_count_and_the_backoff() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    sim.crash(70, 100);
    sim.restart_when_due();
    assert_eq!(sim.status().consecutive_failures, 2);
    sim.runs(200);
    let not_yet = sim.at(799).step();
    assert_eq!(not_yet.status.consecutive_failures, 2);
    assert_eq!(not_yet.requeue_at, Some(t(800)));
    let healthy = sim.at(800).step();
    assert_eq!(healthy.status.consecutive_failures, 0);
    assert!(healthy.events.is_empty());
    // The next failure waits the first delay again.
    let plan = sim.crash(200, 900);
    assert_eq!(plan.status.next_restart_at, Some(time(910)));
}

#[test]
fn a_failure_after_reset_after_starts_a_new_count_even_unobserved() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    // It ran 20 minutes; nobody looked in between.
    let plan = sim.crash(100, 1300);
    assert_eq!(plan.status.consecutive_failures, 1);
    assert_eq!(plan.status.next_restart_at, Some(time(1310)));
}

// --- Running after a failure: once it has stayed up -----------------------------------------

const SETTLE_S: i64 = SETTLE.as_secs() as i64;

#[test]
fn a_first_pod_counts_as_running_as_soon_as_it_runs() {
    let mut sim = Sim::new(named(fast()));
    sim.step();
    sim.runs(5);
    let plan = sim.at(5).step();
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert_eq!(condition(&plan.status, READY).status, "True");
}

#[test]
fn after_a_failure_the_replacement_counts_as_running_once_it_has_stayed_up() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    let restarted = sim.status().clone();
    assert_eq!(restarted.phase, Some(Phase::Pending));
    sim.runs(61);
    let early = sim.at(61 + SETTLE_S - 1).step();
    assert_eq!(early.status, restarted, "nothing new to write yet");
    assert_eq!(
        early.requeue_at,
        Some(t(61 + SETTLE_S)),
        "looked at again once settled"
    );
    let up = sim.at(61 + SETTLE_S).step();
    assert_eq!(up.status.phase, Some(Phase::Running));
    let ready = condition(&up.status, READY);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "PodReady")
    );
}

#[test]
fn a_replacement_that_crashes_before_it_settles_was_never_running() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.restart_when_due();
    sim.runs(61);
    sim.at(62).step();
    let plan = sim.crash(61, 61 + SETTLE_S - 1);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.consecutive_failures, 2);
    let ready = condition(&plan.status, READY);
    assert_eq!(ready.status, "False");
    assert_eq!(
        ready.last_transition_time,
        time(50),
        "Ready never flipped in between"
    );
    assert_eq!(
        plan.status.restart_history.len(),
        2,
        "both crashes recorded"
    );
}

// --- Shutdown set by someone else ------------------------------------------------------------

fn economy_shutdown() -> Shutdown {
    Shutdown {
        kind: ShutdownType::Economic,
        reason: Some("budget exhausted".to_string()),
        message: None,
        at: None,
        source: None,
    }
}

#[test]
fn a_shutdown_set_by_someone_else_is_respected_and_left_exactly_as_it_was() {
    let mut sim = Sim::running(named(fast()));
    sim.input.status.shutdown = Some(economy_shutdown());
    let plan = sim.at(50).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(
        plan.delete_pod, None,
        "the running pod is not the operator's to stop"
    );
    assert_eq!(plan.record_shutdown, None, "never written by the operator");
    assert_eq!(plan.status.shutdown, Some(economy_shutdown()));
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert_eq!(reasons(&plan), [EventReason::ShutdownRespected]);
    assert_eq!(plan.status.next_restart_at, None);

    // Once: not again on the next decision.
    let again = sim.at(60).step();
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert_eq!(again.status, plan.status);

    // The pod crashes meanwhile: nothing is counted or restarted.
    let before = sim.status().clone();
    let plan = sim.crash(5, 70);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None);
    assert!(plan.events.is_empty());
    assert_eq!(
        plan.status.consecutive_failures,
        before.consecutive_failures
    );
    assert_eq!(plan.status.last_failure, before.last_failure);
    assert_eq!(plan.status.restart_history, before.restart_history);
    assert_eq!(plan.status.shutdown, Some(economy_shutdown()));

    // Cleared: supervision resumes with a new pod.
    sim.input.status.shutdown = None;
    let plan = sim.at(80).step();
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(2));
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(plan.status.shutdown, None);
}

#[test]
fn a_shutdown_holds_a_scheduled_restart_and_a_manual_one() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    let due = sim.status().next_restart_at.clone().unwrap().0;
    sim.input.status.shutdown = Some(economy_shutdown());
    sim.input.agent.restart_requested = Some("now".to_string());
    sim.input.agent.reset_requested = Some("now".to_string());
    for now in [due, due + SignedDuration::from_secs(3600)] {
        sim.input.now = now;
        let plan = sim.step();
        assert_eq!(plan.create_pod, None);
        assert_eq!(plan.delete_pod, None);
        assert_eq!(plan.status.next_restart_at, None);
        assert_eq!(plan.status.shutdown, Some(economy_shutdown()));
    }
}

#[test]
fn clearing_a_shutdown_while_the_pod_still_runs_adopts_it() {
    let mut sim = Sim::running(named(fast()));
    sim.input.status.shutdown = Some(economy_shutdown());
    sim.at(50).step();
    sim.input.status.shutdown = None;
    let plan = sim.at(60).step();
    assert_eq!(plan.create_pod, None, "the pod is still live");
    assert_eq!(plan.delete_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Running));
}

// --- Suspend ---------------------------------------------------------------------------------

#[test]
fn suspend_stops_the_pod_once_and_resume_starts_a_new_one() {
    let mut sim = Sim::running(named(fast()));
    sim.input.agent.suspend = true;
    let plan = sim.at(50).step();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::Suspended));
    assert_eq!(reasons(&plan), [EventReason::Suspended]);
    assert_eq!(condition(&plan.status, READY).reason, "Suspended");

    // The pod is going, then gone: nothing more to do, and nothing more said.
    let again = sim.at(60).step();
    assert_eq!(again.delete_pod, None);
    assert!(again.events.is_empty());
    sim.pod().phase = PodPhase::Failed;
    let again = sim.at(70).step();
    assert_eq!(again.delete_pod, None);
    assert_eq!(again.create_pod, None);
    assert!(again.events.is_empty());
    assert_eq!(
        again.status.last_failure, None,
        "a suspension is not a failure"
    );
    assert_eq!(again.status.consecutive_failures, 0);

    sim.input.agent.suspend = false;
    let plan = sim.at(80).step();
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    assert_eq!(plan.status.last_failure, None);
}

#[test]
fn suspending_a_backing_off_agent_cancels_the_restart() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.input.agent.suspend = true;
    let plan = sim.at(55).step();
    assert_eq!(plan.delete_pod, None, "the crashed pod is not live");
    assert_eq!(plan.status.next_restart_at, None);
    assert_eq!(plan.status.phase, Some(Phase::Suspended));
    assert_eq!(sim.at(10_000).step().create_pod, None);
}

// --- Manual restart and reset ----------------------------------------------------------------

#[test]
fn a_restart_request_restarts_once_per_value_without_counting() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    sim.restart_when_due();
    sim.runs(60);
    sim.at(70).step();
    assert_eq!(sim.status().consecutive_failures, 1);
    let recent = sim.status().recent_restarts.clone();

    for (i, value) in ["2025-06-01T12:01:00Z", "again", "and again"]
        .into_iter()
        .enumerate()
    {
        let now = 100 + 50 * i as i64;
        let attempt = sim.status().attempt;
        let restarts = sim.status().restart_count;
        sim.input.agent.restart_requested = Some(value.to_string());
        let (killed, plan) = sim.at(now).restart_at_once();
        let pod = format!("researcher-{attempt}");
        assert_eq!(killed.delete_pod.as_deref(), Some(pod.as_str()), "{value}");
        let validated = killed
            .validate_pod
            .as_ref()
            .expect("the replacement is validated");
        assert_eq!(validated.attempt, attempt + 1);
        assert_eq!(validated.origin.trigger, Some(Trigger::Manual));
        assert_eq!(validated.origin.handled_restart.as_deref(), Some(value));
        assert_eq!(reasons(&killed), [EventReason::ManualRestart]);
        assert_eq!(
            killed.status.handled_restart_request.as_deref(),
            Some(value),
            "the request is recorded with the kill"
        );
        let created = plan.create_pod.as_ref().expect("created");
        assert_eq!(created.attempt, attempt + 1);
        assert_eq!(created.origin.trigger, Some(Trigger::Manual));
        assert_eq!(created.origin.handled_restart.as_deref(), Some(value));
        assert_eq!(reasons(&plan), [EventReason::Restarted]);
        let s = &plan.status;
        assert_eq!(s.handled_restart_request.as_deref(), Some(value));
        assert_eq!(s.restart_count, restarts + 1);
        assert_eq!(s.consecutive_failures, 1, "not a failure");
        assert_eq!(s.recent_restarts, recent, "not counted toward the limit");
        let record = &s.restart_history[0];
        assert_eq!(record.trigger, Trigger::Manual);
        assert_eq!(record.attempt, attempt);
        assert_eq!(record.restarted_at, Some(time(now)));
        assert_eq!(record.reason, None);

        // The same value again: nothing.
        sim.runs(now + 5);
        let again = sim.at(now + 10).step();
        assert_eq!(again.create_pod, None, "{value} is handled once");
        assert_eq!(again.delete_pod, None);
        assert!(again.events.is_empty());
    }

    // The one crash-restart used the limit of one per hour: the next crash gives up.
    let plan = sim.crash(300, 310);
    assert_eq!(
        plan.status.phase,
        Some(Phase::Stopped),
        "one counted restart is the limit"
    );
    assert!(reasons(&plan).contains(&EventReason::RestartLimitExceeded));
    // Manual restarts alone never reach the limit: after three, a crash still restarts.
    let mut sim = Sim::running(limited(1, 3600));
    for i in 0..3 {
        sim.input.agent.restart_requested = Some(format!("r{i}"));
        sim.at(20 + i).restart_at_once();
    }
    sim.runs(30);
    let plan = sim.crash(30, 40);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
}

#[test]
fn a_restart_request_while_backing_off_restarts_now() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 50);
    sim.input.agent.restart_requested = Some("now".to_string());
    let plan = sim.at(51).step();
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(2));
    assert!(reasons(&plan).contains(&EventReason::ManualRestart));
    assert_eq!(plan.status.restart_history[0].restarted_at, Some(time(51)));
}

#[test]
fn a_reset_request_closes_the_breaker_and_restarts_now() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    assert_eq!(sim.status().phase, Some(Phase::CircuitOpen));
    sim.input.agent.reset_requested = Some("1".to_string());
    let plan = sim.at(210).step();
    let s = &plan.status;
    assert_eq!(breaker(s), CircuitBreakerStatus::default());
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(4));
    assert_eq!(s.handled_reset_request.as_deref(), Some("1"));
    assert_eq!(reasons(&plan)[0], EventReason::Reset);
    let open = condition(s, CIRCUIT_BREAKER_OPEN);
    assert_eq!(
        (open.status.as_str(), open.last_transition_time.clone()),
        ("False", time(210))
    );

    // Handled once.
    sim.runs(215);
    let again = sim.at(220).step();
    assert!(again.events.is_empty());
    assert_eq!(again.create_pod, None);
}

#[test]
fn a_reset_request_resumes_a_stopped_agent() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    sim.restart_when_due();
    let stopped = sim.crash(60, 70);
    assert_eq!(stopped.status.phase, Some(Phase::Stopped));
    assert_eq!(sim.at(1000).step().create_pod, None);

    sim.input.agent.reset_requested = Some("please".to_string());
    let plan = sim.at(1010).step();
    let s = &plan.status;
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(3));
    assert_eq!(s.consecutive_failures, 0);
    assert_eq!(s.phase, Some(Phase::Pending));
    assert!(reasons(&plan).contains(&EventReason::Reset));
    assert_eq!(condition(s, READY).reason, "PodPending");
    // The limit starts afresh: the next crash restarts again.
    let plan = sim.crash(1020, 1030);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
}

#[test]
fn a_reset_request_on_a_healthy_agent_clears_the_count_and_starts_nothing() {
    let mut sim = Sim::running(named(fast()));
    sim.crash(5, 40);
    sim.restart_when_due();
    sim.runs(60);
    sim.input.agent.reset_requested = Some("x".to_string());
    let plan = sim.at(70).step();
    assert_eq!(plan.status.consecutive_failures, 0);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.delete_pod, None);
    assert_eq!(reasons(&plan), [EventReason::Reset]);
}

// --- Rollout ---------------------------------------------------------------------------------

#[test]
fn a_template_change_rolls_the_pod_out_without_counting() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    sim.restart_when_due();
    sim.runs(60);
    sim.at(70).step();
    let before = sim.status().clone();

    sim.input.agent.generation = 2;
    sim.input.agent.template_hash = "h2".to_string();
    let (killed, plan) = sim.at(100).restart_at_once();
    assert_eq!(killed.delete_pod.as_deref(), Some("researcher-2"));
    assert_eq!(
        killed.validate_pod.as_ref().map(|p| p.attempt),
        Some(3),
        "the new template is validated before the old pod goes"
    );
    assert_eq!(reasons(&killed), [EventReason::RolledOut]);
    assert_eq!(plan.create_pod.as_ref().map(|p| p.attempt), Some(3));
    let s = &plan.status;
    assert_eq!(s.restart_history[0].trigger, Trigger::Rollout);
    assert_eq!(s.consecutive_failures, before.consecutive_failures);
    assert_eq!(s.recent_restarts, before.recent_restarts);
    assert_eq!(s.last_failure, before.last_failure);
    assert_eq!(s.observed_generation, Some(2));
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(2))
    );

    // The new pod has the new template: no second rollout.
    sim.runs(105);
    let again = sim.at(110).step();
    assert_eq!(again.create_pod, None);
    assert_eq!(again.delete_pod, None);
    assert!(again.events.is_empty());
}

// --- Policy resolution -----------------------------------------------------------------------

#[test]
fn a_missing_policy_starts_nothing_and_says_so_once() {
    let mut sim = Sim::new(PolicyResolution::Missing("strict".to_string()));
    let plan = sim.step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(reasons(&plan), [EventReason::PolicyNotFound]);
    assert!(plan.events[0].warning());
    let resolved = condition(&plan.status, POLICY_RESOLVED);
    assert_eq!(
        (resolved.status.as_str(), resolved.reason.as_str()),
        ("False", "PolicyNotFound")
    );
    assert!(resolved.message.contains("strict"), "{resolved:?}");
    assert_eq!(condition(&plan.status, READY).status, "False");

    let again = sim.at(100).step();
    assert_eq!(again.create_pod, None);
    assert!(again.events.is_empty());
    assert_eq!(
        condition(&again.status, POLICY_RESOLVED).last_transition_time,
        time(0)
    );

    // The policy appears: the first start is a first start, not a restart after a failure.
    sim.input.policy = PolicyResolution::Named("strict".to_string(), fast());
    let plan = sim.at(200).step();
    assert_eq!(
        plan.create_pod,
        Some(NewPod {
            name: "researcher-1".to_string(),
            attempt: 1,
            restart_count: 0,
            last_failure_reason: None,
            origin: PodOrigin::default(),
        })
    );
    assert_eq!(plan.status.last_failure, None);
    assert!(plan.status.restart_history.is_empty());
    assert_eq!(reasons(&plan), [EventReason::PodCreated]);
    let resolved = condition(&plan.status, POLICY_RESOLVED);
    assert_eq!(
        (
            resolved.status.as_str(),
            resolved.last_transition_time.clone()
        ),
        ("True", time(200))
    );

    // Deleted again: said again, once.
    sim.input.policy = PolicyResolution::Missing("strict".to_string());
    assert_eq!(reasons(&sim.at(300).step()), [EventReason::PolicyNotFound]);
    assert!(sim.at(400).step().events.is_empty());
}

#[test]
fn the_namespace_default_policy_governs_when_none_is_named() {
    let policy = RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Linear,
            initial_delay: secs(7),
            jitter: 0.0,
            ..Backoff::default()
        },
        ..RestartPolicySpec::default()
    };
    let mut sim = Sim::running(PolicyResolution::NamespaceDefault(policy));
    let plan = sim.crash(5, 100);
    assert_eq!(plan.status.next_restart_at, Some(time(107)));
    assert_eq!(
        condition(&plan.status, POLICY_RESOLVED).reason,
        "NamespaceDefault"
    );
}

// --- Conditions and steady state -------------------------------------------------------------

#[test]
fn conditions_keep_their_transition_time_unless_the_status_flips() {
    let mut sim = Sim::new(named(fast()));
    sim.step();
    assert_eq!(condition(sim.status(), READY).last_transition_time, time(0));
    sim.runs(10);
    sim.at(20).step();
    let ready = condition(sim.status(), READY).clone();
    assert_eq!(
        (ready.status.as_str(), ready.last_transition_time),
        ("True", time(20))
    );
    sim.at(500).step();
    assert_eq!(
        condition(sim.status(), READY).last_transition_time,
        time(20)
    );
    // The reason changes, the status does not: the time stays.
    sim.crash(10, 600);
    let ready = condition(sim.status(), READY).clone();
    assert_eq!(ready.last_transition_time, time(600));
    assert_eq!(ready.reason, "BackingOff");
    sim.restart_when_due();
    let ready = condition(sim.status(), READY).clone();
    assert_eq!(ready.reason, "PodPending");
    assert_eq!(ready.last_transition_time, time(600), "still False");
    // PolicyResolved has been True since the start.
    assert_eq!(
        condition(sim.status(), POLICY_RESOLVED).last_transition_time,
        time(0)
    );
    assert_eq!(
        condition(sim.status(), CIRCUIT_BREAKER_OPEN).last_transition_time,
        time(0)
    );
}

#[test]
fn steady_state_is_silent() {
    let mut hb = Sim::new(named(fast()));
    hb.input.agent.heartbeat = Some(Heartbeat {
        timeout: secs(60),
        grace_period: None,
    });
    hb.step();
    hb.runs(5);
    hb.input.lease = Some(LeaseFacts {
        holder: Some("researcher-1".to_string()),
        renew_time: Some(t(100)),
    });
    let cases = [
        ("running", Sim::running(named(fast()))),
        ("running with a heartbeat", hb),
        ("pending", {
            let mut sim = Sim::new(named(fast()));
            sim.step();
            sim
        }),
        ("backing off", {
            let mut sim = Sim::running(named(fast()));
            sim.crash(5, 100);
            sim
        }),
        ("circuit open", {
            let mut sim = Sim::running(breaker_policy());
            fail_times(&mut sim, 3, 100);
            sim
        }),
        ("shut down", {
            let mut sim = Sim::running(named(fast()));
            sim.runs(5).exits(0, None, 100);
            sim.at(100).step();
            sim
        }),
    ];
    for (name, mut sim) in cases {
        let first = sim.at(102).step();
        let second = sim.at(103).decide();
        assert_eq!(second.status, first.status, "{name}: nothing to write");
        assert_eq!(second.create_pod, None, "{name}");
        assert_eq!(second.delete_pod, None, "{name}");
        assert_eq!(second.record_shutdown, None, "{name}");
        assert!(second.events.is_empty(), "{name}: {:?}", second.events);
    }
}

// --- Surviving lost writes -------------------------------------------------------------------

#[test]
fn a_lost_status_write_after_a_restart_adopts_the_pod() {
    let mut sim = Sim::running(limited(1, 3600));
    sim.crash(5, 40);
    let due = sim.status().next_restart_at.clone().unwrap().0;
    sim.input.now = due;
    let plan = sim.decide();
    // The pod was created; the status write that followed was lost.
    let created = new_pod(plan.create_pod.as_ref().unwrap(), "h1", due);
    sim.input.pod = Some(created);
    let plan = sim.at(60).step();
    assert_eq!(plan.create_pod, None, "never a second pod for the attempt");
    let s = &plan.status;
    assert_eq!(s.attempt, 2);
    assert_eq!(s.restart_count, 1);
    assert_eq!(s.restart_history[0].restarted_at, Some(Time(due)));
    // The restart counts toward the limit as if nothing had been lost.
    let plan = sim.crash(65, 80);
    assert_eq!(plan.status.phase, Some(Phase::Stopped));
    assert!(reasons(&plan).contains(&EventReason::RestartLimitExceeded));
}

#[test]
fn a_lost_status_write_after_a_probe_keeps_the_breaker_half_open() {
    let mut sim = Sim::running(breaker_policy());
    fail_times(&mut sim, 3, 200);
    sim.input.now = t(260);
    let plan = sim.decide();
    sim.input.pod = Some(new_pod(plan.create_pod.as_ref().unwrap(), "h1", t(260)));
    let plan = sim.at(270).step();
    assert_eq!(plan.create_pod, None);
    assert_eq!(breaker(&plan.status).state, BreakerState::HalfOpen);
    assert_eq!(
        condition(&plan.status, CIRCUIT_BREAKER_OPEN).status,
        "False"
    );
    // The probe proves itself: the breaker closes.
    sim.runs(270);
    let plan = sim.at(870).step();
    assert_eq!(breaker(&plan.status).state, BreakerState::Closed);
    assert!(reasons(&plan).contains(&EventReason::CircuitClosed));
}

#[test]
fn resuming_never_bypasses_an_open_breaker() {
    for resume in ["suspend", "shutdown"] {
        let mut sim = Sim::running(breaker_policy());
        fail_times(&mut sim, 3, 200);
        assert_eq!(breaker(sim.status()).half_open_at, Some(time(260)));
        match resume {
            "suspend" => sim.input.agent.suspend = true,
            _ => sim.input.status.shutdown = Some(economy_shutdown()),
        }
        sim.at(210).step();
        match resume {
            "suspend" => sim.input.agent.suspend = false,
            _ => sim.input.status.shutdown = None,
        }
        let plan = sim.at(220).step();
        assert_eq!(plan.create_pod, None, "{resume}: the breaker is still open");
        assert_eq!(plan.status.phase, Some(Phase::CircuitOpen), "{resume}");
        assert_eq!(breaker(&plan.status).state, BreakerState::Open, "{resume}");
        assert_eq!(plan.requeue_at, Some(t(260)), "{resume}");
        let probe = sim.at(260).step();
        assert_eq!(
            probe.create_pod.as_ref().map(|p| p.attempt),
            Some(4),
            "{resume}"
        );
        assert_eq!(
            breaker(&probe.status).state,
            BreakerState::HalfOpen,
            "{resume}"
        );
    }
}

#[test]
fn a_disrupted_pod_that_is_still_live_is_deleted_as_it_is_replaced() {
    let mut sim = Sim::running(named(fast()));
    // The eviction is approved (DisruptionTarget=True) but the pod has no deletionTimestamp yet.
    sim.pod().disruption = Some("EvictionByEvictionAPI".to_string());
    let (killed, plan) = sim.at(50).restart_at_once();
    assert_eq!(killed.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        killed.validate_pod, None,
        "a disrupted pod goes whatever its replacement"
    );
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
    assert_eq!(
        plan.status.last_failure.as_ref().map(|f| f.reason),
        Some(FailureReason::Evicted)
    );
    assert_eq!(plan.status.consecutive_failures, 0);
}

#[test]
fn the_history_keeps_the_newest_entries_up_to_the_limit() {
    let policy = RestartPolicySpec {
        history_limit: 3,
        circuit_breaker: CircuitBreakerPolicy {
            failure_threshold: 0,
            ..CircuitBreakerPolicy::default()
        },
        ..fast()
    };
    let mut sim = Sim::running(named(policy));
    let mut now = 100;
    for _ in 0..5 {
        sim.crash(now - 10, now);
        sim.restart_when_due();
        now = sim.input.now.as_second() - t(0).as_second() + 30;
    }
    let attempts: Vec<u32> = sim
        .status()
        .restart_history
        .iter()
        .map(|r| r.attempt)
        .collect();
    assert_eq!(attempts, [5, 4, 3], "newest first");
    assert_eq!(sim.status().restart_count, 5, "restartCount is not bounded");

    // A lowered limit applies at the next decision, not only at the next restart.
    if let PolicyResolution::Named(_, p) = &mut sim.input.policy {
        p.history_limit = 1;
    }
    let plan = sim.at(now).step();
    assert_eq!(plan.create_pod, None);
    let attempts: Vec<u32> = plan
        .status
        .restart_history
        .iter()
        .map(|r| r.attempt)
        .collect();
    assert_eq!(attempts, [5]);
}

#[test]
fn a_restart_never_leaves_the_replaced_pod_live() {
    // A hung pod was to be deleted, but only the status write landed: the agent is backing off
    // while the old pod still runs. The restart deletes it as it creates the next one.
    let mut sim = Sim::new(named(fast()));
    sim.input.agent.heartbeat = Some(Heartbeat {
        timeout: secs(30),
        grace_period: None,
    });
    sim.step();
    sim.runs(5);
    let hung = sim.at(100).decide();
    assert_eq!(hung.delete_pod.as_deref(), Some("researcher-1"));
    sim.input.status = hung.status.clone();
    assert!(sim.pod().is_live(), "the delete was lost");

    let plan = sim.restart_when_due();
    assert_eq!(plan.delete_pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        plan.create_pod.as_ref().map(|p| p.name.as_str()),
        Some("researcher-2")
    );
}

#[test]
fn an_own_shutdown_whose_second_write_was_lost_records_the_attempt_then() {
    let mut sim = Sim::running(named(fast()));
    sim.runs(5)
        .exits(1, Some(r#"{"shutdown":"economic","reason":"budget"}"#), 40);
    let decided = sim.at(40).decide();
    let recorded = decided
        .record_shutdown
        .clone()
        .expect("a shutdown recorded");
    // Only the first write (the shutdown field) landed.
    sim.input.status.shutdown = Some(recorded);
    let plan = sim.at(45).step();
    let failure = plan
        .status
        .last_failure
        .clone()
        .expect("the ending is recorded");
    assert_eq!(Some(&failure), decided.status.last_failure.as_ref());
    assert_eq!(failure.class, FailureClass::Shutdown);
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert_eq!(reasons(&plan), [EventReason::ShutdownRespected]);
    assert_eq!(plan.create_pod, None);
    // Once recorded, nothing more.
    let again = sim.at(50).step();
    assert!(again.events.is_empty());
    assert_eq!(again.status.last_failure, Some(failure));
}

#[path = "core_decide/outage.rs"]
mod outage;
#[path = "core_decide/retry_after.rs"]
mod retry_after;

// --- A restart due at once, made with its failure --------------------------------------------

fn immediate() -> PolicyResolution {
    named(RestartPolicySpec {
        backoff: Backoff {
            kind: BackoffType::Immediate,
            ..fast().backoff
        },
        ..fast()
    })
}

#[test]
fn a_restart_due_at_once_is_made_with_the_failure_in_one_decision() {
    let mut sim = Sim::running(immediate()).at_once();
    let plan = sim.crash(40, 100);
    let new = plan
        .create_pod
        .as_ref()
        .expect("restarted in the same decision");
    assert_eq!((new.name.as_str(), new.attempt), ("researcher-2", 2));
    assert_eq!(new.origin.trigger, Some(Trigger::Failure));
    assert_eq!(plan.delete_pod, None, "the pod has ended");
    let s = &plan.status;
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!((s.attempt, s.restart_count), (2, 1));
    assert_eq!(s.pod_name.as_deref(), Some("researcher-2"));
    assert_eq!(s.next_restart_at, None);
    assert_eq!(
        s.last_failure.as_ref().map(|f| f.reason),
        Some(FailureReason::Error)
    );
    let record = &s.restart_history[0];
    assert_eq!(record.attempt, 1);
    assert_eq!(record.failed_at, Some(time(100)));
    assert_eq!(record.backoff, Some(secs(0)));
    assert_eq!(record.restarted_at, Some(time(100)));
    assert_eq!(
        s.recent_restarts,
        vec![time(100)],
        "counted toward the limit"
    );
    // One Event tells of both, about the pod that ended.
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert!(plan.events[0].warning());
    assert_eq!(plan.events[0].pod.as_deref(), Some("researcher-1"));
    assert_eq!(
        plan.events[0].note,
        "Pod researcher-1 failed: Error (exit code 1): boom; restarted as pod researcher-2 (attempt 2, restart 1; failure 1 in a row)"
    );
    assert_eq!(plan.requeue_at, Some(t(100 + 600)), "the startup timeout");
}

#[test]
fn made_at_once_or_in_two_decisions_a_restart_leaves_the_same_status() {
    for policy in [immediate(), breaker_policy(), limited(2, 3600)] {
        let mut once = Sim::running(policy.clone()).at_once();
        let mut twice = Sim::running(policy.clone());
        let mut now = 100;
        for failure in 1..=4 {
            let at_once = once.crash(now - 20, now);
            let recorded = twice.crash(now - 20, now);
            if recorded.status.next_restart_at == Some(time(now)) {
                assert!(at_once.create_pod.is_some(), "failure {failure}");
                let created = twice.step();
                assert_eq!(created.create_pod, at_once.create_pod, "failure {failure}");
            } else {
                assert_eq!(
                    at_once.create_pod, None,
                    "failure {failure}: not due at once"
                );
                assert_eq!(reasons(&at_once), reasons(&recorded));
            }
            assert_eq!(once.status(), twice.status(), "failure {failure}");
            if once.status().phase != Some(Phase::Pending) {
                break;
            }
            now += 60;
        }
    }
}

#[test]
fn a_restart_that_waits_is_not_made_with_the_failure() {
    // A backoff: recorded, restarted when due.
    let mut sim = Sim::running(named(fast())).at_once();
    let plan = sim.crash(40, 100);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.next_restart_at, Some(time(110)));
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
    assert!(
        plan.events[0]
            .note
            .ends_with("restarting in 10s at 2025-06-01T12:01:50Z (failure 1 in a row)"),
        "{}",
        plan.events[0].note
    );

    // A member of a group: its group restarts it (and its siblings) together.
    let mut sim = Sim::running(immediate()).at_once();
    sim.input.group = Some(agent_supervisor::supervise::group::Directive {
        group: "crew".to_string(),
        listed: true,
        ..Default::default()
    });
    let plan = sim.crash(40, 100);
    assert_eq!(plan.create_pod, None, "{:?}", plan.events);
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));

    // The budget has no token for it: the failure is recorded, the restart stays due.
    let mut sim = Sim::running(immediate());
    let plan = sim.crash(40, 100);
    assert_eq!(plan.create_pod, None);
    assert_eq!(plan.status.next_restart_at, Some(time(100)));
    assert_eq!(reasons(&plan), [EventReason::Crashed]);
}

#[test]
fn a_pod_adopted_after_a_lost_write_that_fails_is_restarted_at_once_as_its_own_attempt() {
    // Found by the property test: the status still names attempt 1 (the write that recorded
    // researcher-2 was lost), and researcher-2 has failed too.
    let mut sim = Sim::running(immediate()).at_once();
    let recorded = sim.status().clone();
    let ended = sim.input.pod.clone();
    let first = sim.crash(40, 100);
    assert_eq!(first.create_pod.as_ref().map(|p| p.attempt), Some(2));
    sim.input.status = recorded;
    sim.input.previous = ended;
    let plan = sim.crash(110, 130);
    let new = plan.create_pod.as_ref().expect("restarted at once");
    assert_eq!((new.name.as_str(), new.attempt), ("researcher-3", 3));
    let s = &plan.status;
    assert_eq!((s.attempt, s.restart_count), (3, 2));
    let attempts: Vec<_> = s.restart_history.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [2, 1], "each record is the attempt that ended");
    assert_eq!(s.restart_history[0].failed_at, Some(time(130)));
    assert_eq!(s.restart_history[0].restarted_at, Some(time(130)));
    assert_eq!(
        s.last_failure.as_ref().and_then(|f| f.pod_name.as_deref()),
        Some("researcher-2")
    );
}
