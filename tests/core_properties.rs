//! Property tests for the pure core's invariants: the backoff curve and its jitter, determinism,
//! shutdowns, the one-live-pod rule, bounded history, the breaker's state machine, and no panics —
//! on arbitrary inputs, and along random walks through an agent's life.

use std::collections::BTreeMap;

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, BreakerState, CircuitBreakerPolicy, CircuitBreakerStatus,
    Condition, Duration, ExitCodeOperator, ExitCodeSelector, Failure, FailureClass, FailureReason,
    Heartbeat, Limits, Phase, RestartPolicySpec, RestartRecord, Rule, RuleAction, Shutdown,
    ShutdownType, Time, Trigger,
};
use agent_supervisor::supervise::backoff;
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{
    AgentFacts, EventReason, Input, LeaseFacts, Options, Plan, PodFacts, PodOrigin,
    PolicyResolution, decide, decide_with, pod_name,
};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

const CASES: u32 = 256;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        // Failures are reported with their minimal input; nothing is written next to the tests.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[path = "common/clock.rs"]
mod clock;
use clock::t;

// --- Strategies ------------------------------------------------------------------------------

/// `at` cut to its second, as status times are.
fn t_whole(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).expect("in range")
}

/// Any timestamp, weighted toward the present, with the extremes.
fn arb_time() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        6 => (-200_000i64..200_000, 0..1_000_000_000i32)
            .prop_map(|(s, n)| t(s) + SignedDuration::from_nanos(i64::from(n))),
        2 => (Timestamp::MIN.as_second()..=Timestamp::MAX.as_second(), 0..1_000_000_000i32)
            .prop_map(|(s, n)| Timestamp::new(s, n).unwrap_or(Timestamp::MAX)),
        1 => Just(Timestamp::MIN),
        1 => Just(Timestamp::MAX),
        1 => Just(Timestamp::UNIX_EPOCH),
    ]
}

fn arb_stored_time() -> impl Strategy<Value = Time> {
    arb_time().prop_map(Time)
}

/// Any duration, weighted toward the ones people write.
fn arb_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        4 => (0u64..7_200_000).prop_map(Duration::from_millis),
        1 => any::<u64>().prop_map(Duration::from_millis),
        1 => Just(Duration::ZERO),
        1 => Just(Duration::from_millis(u64::MAX)),
    ]
}

fn arb_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0f64..4.0,
        1 => any::<f64>(),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(-1.0),
    ]
}

fn arb_backoff_type() -> impl Strategy<Value = BackoffType> {
    prop_oneof![
        Just(BackoffType::Never),
        Just(BackoffType::Immediate),
        Just(BackoffType::Linear),
        Just(BackoffType::Exponential),
    ]
}

fn arb_reason() -> impl Strategy<Value = FailureReason> {
    prop_oneof![
        Just(FailureReason::Error),
        Just(FailureReason::OomKilled),
        Just(FailureReason::Signal),
        Just(FailureReason::HeartbeatLost),
        Just(FailureReason::StartupTimeout),
        Just(FailureReason::Evicted),
        Just(FailureReason::Preempted),
        Just(FailureReason::NodeLost),
        Just(FailureReason::Completed),
        Just(FailureReason::Unknown),
    ]
}

fn arb_class() -> impl Strategy<Value = FailureClass> {
    prop_oneof![
        Just(FailureClass::Transient),
        Just(FailureClass::Disruption),
        Just(FailureClass::Shutdown),
        Just(FailureClass::Permanent),
    ]
}

fn arb_action() -> impl Strategy<Value = RuleAction> {
    prop_oneof![
        Just(RuleAction::Restart),
        Just(RuleAction::Stop),
        Just(RuleAction::VoluntaryShutdown),
        Just(RuleAction::EconomicShutdown),
        Just(RuleAction::Ignore),
    ]
}

fn arb_rule() -> impl Strategy<Value = Rule> {
    let codes = prop_oneof![-1i32..260, any::<i32>()];
    (
        proptest::option::of((
            prop_oneof![Just(ExitCodeOperator::In), Just(ExitCodeOperator::NotIn)],
            proptest::collection::vec(codes, 0..4),
        )),
        proptest::collection::vec(arb_reason(), 0..3),
        arb_action(),
    )
        .prop_map(|(codes, reasons, action)| Rule {
            exit_codes: codes.map(|(operator, values)| ExitCodeSelector { operator, values }),
            reasons,
            action,
        })
}

/// Any policy, valid or not: admission rejects some of these, the core must still not fail.
fn arb_policy() -> BoxedStrategy<RestartPolicySpec> {
    (
        (
            arb_backoff_type(),
            arb_duration(),
            arb_duration(),
            arb_f64(),
            arb_f64(),
        ),
        arb_duration(),
        (any::<u32>(), arb_duration()),
        (0u32..8, arb_duration(), arb_f64(), arb_duration()),
        arb_duration(),
        prop_oneof![0u32..60, any::<u32>()],
        proptest::collection::vec(arb_rule(), 0..4),
        arb_duration(),
    )
        .prop_map(
            |(
                (kind, initial_delay, max_delay, multiplier, jitter),
                reset_after,
                (max_restarts, window),
                (failure_threshold, open_duration, open_duration_multiplier, max_open_duration),
                startup_timeout,
                history_limit,
                rules,
                max_retry_after,
            )| RestartPolicySpec {
                backoff: Backoff {
                    kind,
                    initial_delay,
                    max_delay,
                    multiplier,
                    jitter,
                },
                reset_after,
                limits: Limits {
                    max_restarts: max_restarts % 2000,
                    window,
                },
                circuit_breaker: CircuitBreakerPolicy {
                    failure_threshold,
                    open_duration,
                    open_duration_multiplier,
                    max_open_duration,
                },
                startup_timeout,
                history_limit,
                rules,
                max_retry_after,
                outage: None,
            },
        )
        .boxed()
}

fn arb_resolution() -> BoxedStrategy<PolicyResolution> {
    prop_oneof![
        3 => arb_policy().prop_map(|p| PolicyResolution::Named("p".to_string(), p)),
        1 => arb_policy().prop_map(PolicyResolution::NamespaceDefault),
        1 => Just(PolicyResolution::BuiltIn),
        1 => Just(PolicyResolution::Missing("gone".to_string())),
    ]
    .boxed()
}

fn arb_phase() -> impl Strategy<Value = Option<Phase>> {
    proptest::option::of(prop_oneof![
        Just(Phase::Pending),
        Just(Phase::Running),
        Just(Phase::BackingOff),
        Just(Phase::CircuitOpen),
        Just(Phase::Stopped),
        Just(Phase::Shutdown),
        Just(Phase::Suspended),
    ])
}

fn arb_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        4 => ".{0,40}",
        1 => Just(r#"{"shutdown":"economic","reason":"budget exhausted"}"#.to_string()),
        1 => Just(r#"{"shutdown":"voluntary"}"#.to_string()),
        1 => Just(r#"{"shutdown":42}"#.to_string()),
        1 => Just("é".repeat(3000)),
    ])
}

fn arb_record() -> BoxedStrategy<RestartRecord> {
    (
        any::<u32>(),
        prop_oneof![
            Just(Trigger::Failure),
            Just(Trigger::HeartbeatLost),
            Just(Trigger::Manual),
            Just(Trigger::Rollout),
            Just(Trigger::Disruption),
        ],
        proptest::option::of(arb_stored_time()),
        proptest::option::of(arb_reason()),
        proptest::option::of(arb_class()),
        proptest::option::of(any::<i32>()),
        arb_text(),
        proptest::option::of(arb_duration()),
        proptest::option::of(arb_stored_time()),
    )
        .prop_map(
            |(
                attempt,
                trigger,
                failed_at,
                reason,
                class,
                exit_code,
                message,
                ran_for,
                restarted_at,
            )| {
                RestartRecord {
                    attempt,
                    trigger,
                    failed_at,
                    reason,
                    class,
                    exit_code,
                    signal: None,
                    message: message.map(Into::into),
                    ran_for,
                    fingerprint: None,
                    backoff: ran_for,
                    restarted_at,
                }
            },
        )
        .boxed()
}

fn arb_breaker() -> impl Strategy<Value = Option<CircuitBreakerStatus>> {
    proptest::option::of(
        (
            prop_oneof![
                Just(BreakerState::Closed),
                Just(BreakerState::Open),
                Just(BreakerState::HalfOpen)
            ],
            prop_oneof![0u32..5, any::<u32>()],
            proptest::option::of(arb_stored_time()),
            proptest::option::of(arb_stored_time()),
        )
            .prop_map(
                |(state, trips, opened_at, half_open_at)| CircuitBreakerStatus {
                    state,
                    trips,
                    opened_at,
                    half_open_at,
                },
            ),
    )
}

fn arb_shutdown() -> BoxedStrategy<Shutdown> {
    (
        prop_oneof![Just(ShutdownType::Economic), Just(ShutdownType::Voluntary)],
        arb_text(),
        arb_text(),
        proptest::option::of(arb_stored_time()),
        arb_text(),
    )
        .prop_map(|(kind, reason, message, at, source)| Shutdown {
            kind,
            reason,
            message,
            at,
            source,
        })
        .boxed()
}

fn arb_conditions() -> impl Strategy<Value = Vec<Condition>> {
    proptest::collection::vec(
        (
            prop_oneof![
                Just("Ready"),
                Just("CircuitBreakerOpen"),
                Just("PolicyResolved"),
                Just("Other")
            ],
            any::<bool>(),
            arb_stored_time(),
        ),
        0..4,
    )
    .prop_map(|cs| {
        // A list-map keyed by type: one of each.
        let by_type: BTreeMap<_, _> = cs.into_iter().map(|(k, s, at)| (k, (s, at))).collect();
        by_type
            .into_iter()
            .map(|(type_, (status, at))| Condition {
                type_: type_.to_string(),
                status: if status { "True" } else { "False" }.to_string(),
                reason: "Earlier".to_string(),
                message: String::new(),
                observed_generation: Some(1),
                last_transition_time: at,
            })
            .collect()
    })
}

fn arb_status() -> BoxedStrategy<AgentStatus> {
    (
        (
            arb_phase(),
            prop_oneof![0u32..6, any::<u32>(), Just(u32::MAX)],
            prop_oneof![0u32..6, any::<u32>()],
            prop_oneof![0u32..8, any::<u32>()],
            proptest::option::of(arb_stored_time()),
        ),
        proptest::option::of(
            (
                arb_stored_time(),
                arb_reason(),
                arb_class(),
                arb_text(),
                proptest::option::of(arb_duration()),
            )
                .prop_map(|(time, reason, class, message, ran_for)| Failure {
                    time,
                    reason,
                    class,
                    exit_code: Some(1),
                    signal: None,
                    message: message.map(Into::into),
                    container: Some("agent".to_string()),
                    pod_name: Some("agent-1".to_string()),
                    ran_for,
                    fingerprint: None,
                }),
        ),
        proptest::collection::vec(arb_record(), 0..60),
        arb_breaker(),
        proptest::option::of(arb_shutdown()),
        arb_conditions(),
        proptest::collection::vec(arb_stored_time(), 0..6),
        (
            proptest::option::of("r[0-2]"),
            proptest::option::of("r[0-2]"),
        ),
    )
        .prop_map(
            |(
                (phase, attempt, restart_count, consecutive_failures, next_restart_at),
                last_failure,
                restart_history,
                circuit_breaker,
                shutdown,
                conditions,
                recent_restarts,
                (handled_restart_request, handled_reset_request),
            )| AgentStatus {
                phase,
                pod_name: Some(pod_name("agent", attempt)),
                attempt,
                restart_count,
                consecutive_failures,
                next_restart_at,
                last_failure,
                restart_history,
                circuit_breaker,
                shutdown,
                conditions,
                observed_generation: Some(1),
                recent_restarts,
                handled_restart_request,
                handled_reset_request,
                group: None,
            },
        )
        .boxed()
}

fn arb_container_phase() -> BoxedStrategy<ContainerPhase> {
    prop_oneof![
        (arb_text(), arb_text())
            .prop_map(|(reason, message)| ContainerPhase::Waiting { reason, message }),
        proptest::option::of(arb_time())
            .prop_map(|started_at| ContainerPhase::Running { started_at }),
        (
            prop_oneof![0i32..256, any::<i32>()],
            proptest::option::of(prop_oneof![0i32..64, any::<i32>()]),
            proptest::option::of(prop_oneof![
                Just("OOMKilled".to_string()),
                Just("Error".to_string()),
                Just("Completed".to_string()),
            ]),
            arb_text(),
            proptest::option::of(arb_time()),
            proptest::option::of(arb_time()),
        )
            .prop_map(
                |(exit_code, signal, reason, message, started_at, finished_at)| {
                    ContainerPhase::Terminated(Termination {
                        exit_code,
                        signal,
                        reason,
                        message,
                        started_at,
                        finished_at,
                    })
                }
            ),
    ]
    .boxed()
}

/// A pod, and which attempt it is relative to the status's: the one before, the same, the
/// next one, or any.
/// A pod as `arb_pod_shape` makes it, naming (or not) its agent container, and carrying what it
/// was created for.
fn arb_pod() -> BoxedStrategy<(i64, PodFacts)> {
    (
        arb_pod_shape(),
        proptest::option::of(prop_oneof![Just("c0"), Just("c1"), Just("missing")]),
        proptest::option::of(proptest::sample::select(Trigger::ALL.to_vec())),
        proptest::option::of("r[0-2]"),
        proptest::option::of("r[0-2]"),
    )
        .prop_map(|((relative, mut pod), agent, trigger, restart, reset)| {
            pod.agent_container = agent.map(str::to_string);
            pod.origin = PodOrigin {
                trigger,
                handled_restart: restart,
                handled_reset: reset,
                handled_group_reset: None,
            };
            (relative, pod)
        })
        .boxed()
}

fn arb_pod_shape() -> BoxedStrategy<(i64, PodFacts)> {
    (
        prop_oneof![Just(-1i64), Just(0), Just(0), Just(1), Just(i64::MIN)],
        any::<u32>(),
        arb_time(),
        any::<bool>(),
        prop_oneof![
            Just(PodPhase::Pending),
            Just(PodPhase::Running),
            Just(PodPhase::Succeeded),
            Just(PodPhase::Failed),
            Just(PodPhase::Unknown),
        ],
        proptest::option::of(prop_oneof![
            Just("Evicted".to_string()),
            Just("NodeLost".to_string()),
            Just("Preempting".to_string()),
            ".{0,10}",
        ]),
        arb_text(),
        proptest::option::of(prop_oneof![
            Just("EvictionByEvictionAPI".to_string()),
            Just("PreemptionByScheduler".to_string()),
            Just("DeletionByTaintManager".to_string()),
            ".{0,10}",
        ]),
        (
            proptest::option::of(Just("Unschedulable".to_string())),
            any::<bool>(),
            proptest::collection::vec(arb_container_phase(), 0..3),
            proptest::option::of(prop_oneof![Just("h1".to_string()), Just("h2".to_string())]),
        ),
    )
        .prop_map(
            |(
                relative,
                any_attempt,
                created_at,
                deleting,
                phase,
                reason,
                message,
                disruption,
                (unschedulable, ready, states, template_hash),
            )| {
                let pod = PodFacts {
                    name: String::new(),
                    attempt: any_attempt,
                    template_hash,
                    created_at,
                    deleting,
                    phase,
                    reason,
                    message,
                    disruption,
                    unschedulable,
                    ready,
                    containers: states
                        .into_iter()
                        .enumerate()
                        .map(|(i, state)| ContainerFacts {
                            name: format!("c{i}"),
                            state,
                        })
                        .collect(),
                    agent_container: None,
                    origin: Default::default(),
                };
                (relative, pod)
            },
        )
        .boxed()
}

fn arb_heartbeat() -> impl Strategy<Value = Option<Heartbeat>> {
    proptest::option::of(
        (arb_duration(), proptest::option::of(arb_duration())).prop_map(
            |(timeout, grace_period)| Heartbeat {
                timeout,
                grace_period,
            },
        ),
    )
}

fn arb_lease() -> impl Strategy<Value = Option<LeaseFacts>> {
    proptest::option::of(
        (
            proptest::option::of(prop_oneof![
                Just("current".to_string()),
                Just("agent-0".to_string()),
                ".{0,12}",
            ]),
            proptest::option::of(arb_time()),
        )
            .prop_map(|(holder, renew_time)| LeaseFacts { holder, renew_time }),
    )
}

/// Kubernetes object names: the API server admits nothing else.
fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?",
        1 => "[a-z0-9][a-z0-9.-]{240,251}[a-z0-9]",
    ]
}

fn arb_input() -> BoxedStrategy<Input> {
    (
        arb_time(),
        (
            arb_name(),
            ".{0,40}",
            any::<i64>(),
            any::<bool>(),
            arb_heartbeat(),
            prop_oneof![Just("h1".to_string()), Just("h2".to_string())],
            proptest::option::of("r[0-2]"),
            proptest::option::of("r[0-2]"),
        ),
        arb_status(),
        arb_resolution(),
        proptest::option::of(arb_pod()),
        arb_lease(),
    )
        .prop_map(
            |(
                now,
                (
                    name,
                    uid,
                    generation,
                    suspend,
                    heartbeat,
                    template_hash,
                    restart_requested,
                    reset_requested,
                ),
                mut status,
                policy,
                pod,
                mut lease,
            )| {
                status.pod_name = Some(pod_name(&name, status.attempt));
                let pod = pod.map(|(relative, mut pod)| {
                    if relative != i64::MIN {
                        pod.attempt =
                            (i64::from(status.attempt) + relative).clamp(0, u32::MAX.into()) as u32;
                    }
                    pod.name = pod_name(&name, pod.attempt);
                    pod
                });
                if let (Some(lease), Some(pod)) = (lease.as_mut(), pod.as_ref())
                    && lease.holder.as_deref() == Some("current")
                {
                    lease.holder = Some(pod.name.clone());
                }
                Input {
                    now,
                    agent: AgentFacts {
                        name,
                        uid,
                        generation,
                        suspend,
                        heartbeat,
                        template_hash,
                        restart_requested,
                        reset_requested,
                    },
                    status,
                    policy,
                    pod,
                    previous: None,
                    lease,
                    group: None,
                    outages: Vec::new(),
                }
            },
        )
        .boxed()
}

/// An agent alone whose running pod has just failed, under an `Immediate` policy (its rules,
/// limits, breaker and history arbitrary): the shape in which a restart is made at once.
fn arb_failed_alone() -> BoxedStrategy<Input> {
    (
        arb_input(),
        arb_policy(),
        1..=255i32,
        arb_text(),
        0..7200i64,
    )
        .prop_map(|(mut input, mut policy, code, message, ran)| {
            policy.backoff.kind = BackoffType::Immediate;
            // (A new pod given no time at all to start would be taken as hung at once.)
            policy.startup_timeout = policy.startup_timeout.max(Duration::from_secs(1));
            input.policy = PolicyResolution::Named("p".to_string(), policy);
            input.group = None;
            input.agent.suspend = false;
            input.status.shutdown = None;
            input.agent.restart_requested = input.status.handled_restart_request.clone();
            input.agent.reset_requested = input.status.handled_reset_request.clone();
            let attempt = input.status.attempt.clamp(1, u32::MAX - 1);
            input.status.attempt = attempt;
            input.status.phase = Some(Phase::Running);
            // A pod runs with the breaker closed, or as its half-open probe.
            if let Some(breaker) = input.status.circuit_breaker.as_mut()
                && breaker.state == BreakerState::Open
            {
                breaker.state = BreakerState::HalfOpen;
            }
            let name = pod_name(&input.agent.name, attempt);
            input.status.pod_name = Some(name.clone());
            let started = input
                .now
                .checked_sub(SignedDuration::from_secs(ran))
                .unwrap_or(input.now);
            input.pod = Some(PodFacts {
                name,
                attempt,
                template_hash: Some(input.agent.template_hash.clone()),
                created_at: started,
                deleting: false,
                phase: PodPhase::Failed,
                reason: None,
                message: None,
                disruption: None,
                unschedulable: None,
                ready: false,
                containers: vec![ContainerFacts {
                    name: "agent".to_string(),
                    state: ContainerPhase::Terminated(Termination {
                        exit_code: code,
                        signal: None,
                        reason: Some("Error".to_string()),
                        message,
                        started_at: Some(started),
                        finished_at: Some(input.now),
                    }),
                }],
                agent_container: None,
                origin: Default::default(),
            });
            input.previous = None;
            input
        })
        .boxed()
}

fn policy_of(input: &Input) -> RestartPolicySpec {
    match &input.policy {
        PolicyResolution::Named(_, p) | PolicyResolution::NamespaceDefault(p) => p.clone(),
        PolicyResolution::BuiltIn | PolicyResolution::Missing(_) => RestartPolicySpec::default(),
    }
}

fn history_limit(input: &Input) -> usize {
    policy_of(input).history_limit.clamp(1, 50) as usize
}

// --- Backoff ---------------------------------------------------------------------------------

/// A backoff admission accepts: initialDelay ≤ maxDelay, multiplier ≥ 1, 0 ≤ jitter < 1.
fn arb_valid_backoff() -> impl Strategy<Value = Backoff> {
    (
        arb_backoff_type(),
        0u64..3_600_000,
        0u64..7_200_000,
        1.0f64..10.0,
        0.0f64..1.0,
    )
        .prop_map(|(kind, a, b, multiplier, jitter)| Backoff {
            kind,
            initial_delay: Duration::from_millis(a.min(b)),
            max_delay: Duration::from_millis(a.max(b)),
            multiplier,
            jitter,
        })
}

/// SPEC.md's curve, computed directly: Immediate 0, Linear initialDelay × n, Exponential
/// initialDelay × multiplier^(n−1), capped at maxDelay.
fn spec_base_millis(b: &Backoff, n: u32) -> Option<f64> {
    let initial = b.initial_delay.as_millis() as f64;
    let raw = match b.kind {
        BackoffType::Never => return None,
        BackoffType::Immediate => 0.0,
        BackoffType::Linear => initial * f64::from(n),
        BackoffType::Exponential => initial * b.multiplier.powf(f64::from(n) - 1.0),
    };
    Some(raw.min(b.max_delay.as_millis() as f64))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_base_delay_follows_the_spec_curve_capped_at_max_delay(
        backoff in arb_valid_backoff(),
        n in prop_oneof![1u32..40, any::<u32>()],
    ) {
        let base = backoff::base_delay(&backoff, n);
        match spec_base_millis(&backoff, n) {
            None => prop_assert_eq!(base, None),
            Some(want) => {
                let got = base.expect("a delay").as_millis() as f64;
                prop_assert!(got <= backoff.max_delay.as_millis() as f64);
                // Whole milliseconds: at most one off the exact value.
                prop_assert!((got - want).abs() <= 1.0, "got {got}ms, want {want}ms");
            }
        }
    }

    #[test]
    fn a_jittered_delay_stays_within_the_jitter_of_the_base_delay(
        backoff in arb_valid_backoff(),
        n in prop_oneof![1u32..40, any::<u32>()],
        uid in ".{0,40}",
        attempt in any::<u32>(),
    ) {
        let delay = backoff::delay(&backoff, n, &uid, attempt);
        let Some(base) = backoff::base_delay(&backoff, n) else {
            prop_assert_eq!(backoff.kind, BackoffType::Never);
            prop_assert_eq!(delay, None);
            return Ok(());
        };
        let d = base.as_millis() as f64;
        let got = delay.expect("a delay").as_millis() as f64;
        let j = backoff.jitter;
        // Whole milliseconds, rounded down.
        prop_assert!(got >= ((1.0 - j) * d).floor(), "{got} < (1 - {j}) × {d}");
        prop_assert!(got <= (1.0 + j) * d, "{got} > (1 + {j}) × {d}");
        // Repeatable.
        prop_assert_eq!(backoff::delay(&backoff, n, &uid, attempt), delay);
    }

    #[test]
    fn base_delays_never_decrease_with_the_attempt(
        backoff in arb_valid_backoff(),
        n in prop_oneof![1u32..200, any::<u32>()],
    ) {
        let next = n.saturating_add(1);
        prop_assert!(backoff::base_delay(&backoff, n) <= backoff::base_delay(&backoff, next));
    }

    #[test]
    fn the_breaker_open_duration_grows_to_its_cap(
        open in 0u64..3_600_000,
        max in 0u64..7_200_000,
        multiplier in 1.0f64..5.0,
        trip in 1u32..100,
    ) {
        let policy = CircuitBreakerPolicy {
            failure_threshold: 5,
            open_duration: Duration::from_millis(open.min(max)),
            open_duration_multiplier: multiplier,
            max_open_duration: Duration::from_millis(open.max(max)),
        };
        let this = backoff::open_duration(&policy, trip);
        let next = backoff::open_duration(&policy, trip + 1);
        prop_assert!(this <= next);
        prop_assert!(this >= policy.open_duration);
        prop_assert!(next <= policy.max_open_duration);
    }
}

#[test]
fn jitter_spreads_delays_over_the_whole_range() {
    // Not a property of one draw: many agents failing together must not restart together.
    let backoff = Backoff {
        jitter: 0.5,
        ..Backoff::default()
    };
    let delays: Vec<u64> = (0..2000)
        .map(|i| {
            backoff::delay(&backoff, 1, &format!("uid-{i}"), 1)
                .unwrap()
                .as_millis()
        })
        .collect();
    let low = delays.iter().filter(|&&d| d < 7_500).count();
    let high = delays.iter().filter(|&&d| d >= 12_500).count();
    // Each quarter of [5s, 15s] holds about 500 of them.
    assert!((350..650).contains(&low), "{low} in the lowest quarter");
    assert!((350..650).contains(&high), "{high} in the highest quarter");
}

// --- Decisions on arbitrary inputs -----------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_same_input_gives_the_same_plan(input in arb_input()) {
        let first = decide(input.clone());
        let second = decide(input.clone());
        prop_assert_eq!(&first, &second);
        prop_assert_eq!(first, decide(input.clone()));
    }

    #[test]
    fn nothing_is_created_deleted_or_rewritten_while_a_shutdown_is_set(
        mut input in arb_input(),
        shutdown in arb_shutdown(),
    ) {
        input.status.shutdown = Some(shutdown.clone());
        let plan = decide(input.clone());
        prop_assert_eq!(plan.create_pod, None);
        prop_assert_eq!(plan.delete_pod, None);
        prop_assert_eq!(plan.record_shutdown, None);
        prop_assert_eq!(plan.status.shutdown, Some(shutdown.clone()));
        prop_assert_eq!(plan.status.phase, Some(Phase::Shutdown));
        prop_assert_eq!(plan.status.next_restart_at, None);
        // Nothing is counted either.
        prop_assert_eq!(plan.status.consecutive_failures, input.status.consecutive_failures);
        prop_assert_eq!(plan.status.restart_count, input.status.restart_count);
        // (But for the operator's own shutdown whose second write was lost: its ending is
        // recorded then, as the decision that found it did.)
        let own = matches!(shutdown.source.as_deref(), Some("TerminationMessage" | "Rule"));
        if !own || input.status.phase == Some(Phase::Shutdown) {
            prop_assert_eq!(&plan.status.last_failure, &input.status.last_failure);
        }
        prop_assert_eq!(&plan.status.restart_history, &input.status.restart_history);
        let respected = plan
            .events
            .iter()
            .filter(|e| e.reason == EventReason::ShutdownRespected)
            .count();
        let already = input.status.phase == Some(Phase::Shutdown);
        prop_assert_eq!(plan.events.len(), respected);
        prop_assert_eq!(respected, usize::from(!already));
    }

    #[test]
    fn a_live_pod_of_the_current_attempt_is_never_joined_by_another(input in arb_input()) {
        let plan = decide(input.clone());
        if let Some(create) = &plan.create_pod {
            prop_assert_eq!(&create.name, &pod_name(&input.agent.name, create.attempt));
            prop_assert_eq!(plan.status.attempt, create.attempt);
            prop_assert_eq!(plan.status.pod_name.as_ref(), Some(&create.name));
            prop_assert_eq!(create.restart_count, plan.status.restart_count);
            if let Some(pod) = &input.pod {
                // (Past attempt u32::MAX there is no new name to give; 4 billion restarts away.)
                if pod.attempt < u32::MAX {
                    prop_assert!(create.attempt > pod.attempt, "a new attempt, never a pod's name reused");
                }
                let current = pod.attempt > 0 && pod.attempt >= input.status.attempt;
                // (A create of the very same name, past attempt u32::MAX, makes no second pod.)
                if current && pod.is_live() && create.name != pod.name {
                    prop_assert_eq!(plan.delete_pod.as_ref(), Some(&pod.name));
                }
            }
            prop_assert!(input.status.shutdown.is_none());
            prop_assert!(!input.agent.suspend);
            prop_assert!(!matches!(input.policy, PolicyResolution::Missing(_)));
        }
    }

    #[test]
    fn a_failure_is_recorded_with_its_pod_only_for_a_restart_due_at_once(
        input in prop_oneof![arb_input(), arb_failed_alone()]
    ) {
        let plan = decide(input.clone());
        if let Some(create) = &plan.create_pod
            && plan.status.last_failure != input.status.last_failure
        {
            // The restart made at once after a failure, by an agent alone, whose pod ended.
            prop_assert!(input.group.is_none());
            prop_assert_eq!(&plan.delete_pod, &None);
            prop_assert!(plan.record_shutdown.is_none());
            prop_assert!(matches!(create.origin.trigger, Some(Trigger::Failure | Trigger::HeartbeatLost)));
            let ended = input.pod.as_ref().expect("a pod ended");
            prop_assert!(!ended.is_live());
            // The record is the ended pod's attempt: the status's own, or a later one adopted
            // from the pod when the write that recorded its creation was lost.
            let record = &plan.status.restart_history[0];
            prop_assert_eq!(record.attempt, ended.attempt);
            prop_assert!(record.attempt >= input.status.attempt);
            prop_assert_eq!(record.backoff, Some(Duration::ZERO));
            prop_assert_eq!(&record.restarted_at, &Some(Time(t_whole(input.now))));
        }
        // Otherwise a failure is written before any pod replaces it.
        let options = Options { restart_at_once: false };
        let plan = decide_with(input.clone(), options);
        if plan.create_pod.is_some() {
            prop_assert_eq!(&plan.status.last_failure, &input.status.last_failure);
            prop_assert!(plan.record_shutdown.is_none());
        }
    }

    #[test]
    fn a_status_write_lost_after_a_restart_made_at_once_is_recovered(input in arb_failed_alone()) {
        let plan = decide(input.clone());
        let Some(create) = &plan.create_pod else { return Ok(()) };
        if plan.status.last_failure == input.status.last_failure {
            return Ok(());
        }
        // The pod was created; the status write that recorded the failure and the restart was
        // lost. The pod that ended is still there.
        let mut lost = input.clone();
        lost.previous = input.pod.clone();
        let mut pod = lost.previous.clone().expect("a pod ended");
        pod.name = create.name.clone();
        pod.attempt = create.attempt;
        pod.origin = create.origin.clone();
        pod.created_at = input.now;
        pod.phase = PodPhase::Pending;
        pod.deleting = false;
        pod.ready = false;
        pod.reason = None;
        pod.message = None;
        pod.disruption = None;
        pod.containers = vec![ContainerFacts {
            name: "agent".to_string(),
            state: ContainerPhase::Waiting { reason: None, message: None },
        }];
        pod.agent_container = None;
        pod.template_hash = Some(input.agent.template_hash.clone());
        lost.pod = Some(pod);
        let again = decide(lost);
        prop_assert_eq!(&again.create_pod, &None);
        prop_assert_eq!(&again.delete_pod, &None);
        prop_assert_eq!(&again.status, &plan.status, "recorded as the lost write had it");
        let reasons: Vec<_> = again.events.iter().map(|e| e.reason).collect();
        let before: Vec<_> = plan.events.iter().map(|e| e.reason).collect();
        prop_assert_eq!(reasons, before, "its Events, lost with it, go out");
    }

    #[test]
    fn an_adopted_pod_is_never_restarted_for_a_request_it_already_served(input in arb_input()) {
        let plan = decide(input.clone());
        let Some(pod) = &input.pod else { return Ok(()) };
        let adopted = pod.attempt > input.status.attempt
            && input.status.shutdown.is_none()
            && pod.origin.handled_restart.is_some()
            && pod.origin.handled_restart == input.agent.restart_requested;
        if adopted {
            prop_assert_eq!(&plan.status.handled_restart_request, &pod.origin.handled_restart);
            prop_assert!(
                !plan.events.iter().any(|e| e.reason == EventReason::ManualRestart),
                "the request the pod was created for is not acted on again"
            );
        }
    }

    #[test]
    fn a_recorded_kill_is_carried_out_while_the_pod_lives(input in arb_input()) {
        let plan = decide(input.clone());
        let stopped = matches!(
            input.status.phase,
            Some(Phase::BackingOff | Phase::CircuitOpen | Phase::Stopped)
        );
        if let Some(pod) = &input.pod
            && stopped
            && input.status.shutdown.is_none()
            && input.status.attempt > 0
            && pod.attempt == input.status.attempt
            && pod.is_live()
        {
            prop_assert_eq!(plan.delete_pod.as_ref(), Some(&pod.name));
        }
    }

    #[test]
    fn history_never_exceeds_the_history_limit(input in arb_input()) {
        let plan = decide(input.clone());
        // A missing policy holds creates only: the history is kept under the built-in limit.
        let decided = input.status.shutdown.is_none();
        if decided {
            // Even when the limit was lowered since the history was written.
            let limit = history_limit(&input);
            prop_assert!(
                plan.status.restart_history.len() <= limit,
                "{} entries, limit {limit}",
                plan.status.restart_history.len()
            );
        } else {
            // While shut down, the history is left as it is.
            prop_assert_eq!(&plan.status.restart_history, &input.status.restart_history);
        }
    }

    #[test]
    fn counters_never_go_backwards_and_messages_stay_bounded(input in arb_input()) {
        let plan = decide(input.clone());
        let s = &plan.status;
        prop_assert!(s.restart_count >= input.status.restart_count);
        prop_assert!(s.attempt >= input.status.attempt);
        prop_assert_eq!(s.observed_generation, Some(input.agent.generation));
        if s.last_failure != input.status.last_failure
            && let Some(message) = s.last_failure.as_ref().and_then(|f| f.message.as_ref())
        {
            prop_assert!(message.len() <= 1024);
        }
        // One condition per type; those evaluated now are observed at this generation.
        // (While shut down the policy is not looked at, so PolicyResolved keeps its own.)
        let types: std::collections::BTreeSet<_> =
            s.conditions.iter().map(|c| c.type_.as_str()).collect();
        prop_assert_eq!(types.len(), s.conditions.len());
        let mut evaluated = vec!["Ready", "CircuitBreakerOpen"];
        if input.status.shutdown.is_none() {
            evaluated.push("PolicyResolved");
        }
        for type_ in evaluated {
            let c = s.conditions.iter().find(|c| c.type_ == type_);
            prop_assert_eq!(
                c.and_then(|c| c.observed_generation),
                Some(input.agent.generation),
                "{}",
                type_
            );
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn nothing_panics_on_arbitrary_input(
        input in arb_input(),
        (_, pod) in arb_pod(),
        startup in arb_duration(),
        text in prop_oneof![".{0,200}", "\\PC{1000,1100}"],
    ) {
        use agent_supervisor::supervise::classify::{self, Liveness, Verdict};
        let _ = decide(input.clone());
        let verdict = classify::classify(
            &pod,
            startup.as_std(),
            Liveness {
                heartbeat: input.agent.heartbeat.as_ref(),
                lease: input.lease.as_ref(),
            },
            input.now,
        );
        if let Verdict::Ended { ending, .. } = verdict
            && let Some(message) = ending.message
        {
            prop_assert!(message.len() <= classify::MESSAGE_LIMIT);
        }
        let _ = classify::shutdown_request(&text);
        let cut = classify::truncate(text.clone());
        prop_assert!(cut.len() <= classify::MESSAGE_LIMIT);
        prop_assert!(text.starts_with(&cut));
    }
}

// --- Random walks through an agent's life ----------------------------------------------------

/// Something that happens to an agent between two decisions.
#[derive(Clone, Debug)]
enum Step {
    /// Time passes.
    Wait(i64),
    /// The newest pod starts running.
    Runs,
    /// The newest pod's container exits.
    Exits {
        code: i32,
        oom: bool,
        message: u8,
    },
    /// The newest pod is evicted, preempted, or loses its node.
    Disrupted(u8),
    /// Someone else deletes the newest pod.
    DeletedBySomeone,
    /// The newest pod is gone from the API.
    Vanishes,
    /// Deleted and finished pods are garbage collected.
    Gc,
    /// The newest pod renews the heartbeat Lease, or a stale one does.
    Renews {
        stale: bool,
    },
    RequestRestart(u8),
    RequestReset(u8),
    Suspend(bool),
    /// Someone else sets or clears `status.shutdown`.
    ExternalShutdown(bool),
    /// `spec.template` changes.
    Template(u8),
    /// The named policy is deleted or comes back.
    PolicyMissing(bool),
    /// The status write of the next decision is lost (its pod actions are not).
    LoseNextWrite,
}

fn arb_step() -> BoxedStrategy<Step> {
    prop_oneof![
        6 => prop_oneof![0i64..5, 0i64..120, 0i64..4000].prop_map(Step::Wait),
        4 => Just(Step::Runs),
        5 => (
            prop_oneof![Just(0), Just(1), Just(2), Just(42), Just(137), Just(143)],
            any::<bool>(),
            0u8..4
        )
            .prop_map(|(code, oom, message)| Step::Exits { code, oom, message }),
        1 => (0u8..4).prop_map(Step::Disrupted),
        1 => Just(Step::DeletedBySomeone),
        1 => Just(Step::Vanishes),
        1 => Just(Step::Gc),
        2 => any::<bool>().prop_map(|stale| Step::Renews { stale }),
        1 => (0u8..3).prop_map(Step::RequestRestart),
        1 => (0u8..3).prop_map(Step::RequestReset),
        1 => any::<bool>().prop_map(Step::Suspend),
        1 => any::<bool>().prop_map(Step::ExternalShutdown),
        1 => (0u8..2).prop_map(Step::Template),
        1 => any::<bool>().prop_map(Step::PolicyMissing),
        1 => Just(Step::LoseNextWrite),
    ]
    .boxed()
}

/// A policy admission accepts, with small numbers so that walks reach every state.
fn arb_walk_policy() -> BoxedStrategy<RestartPolicySpec> {
    (
        (
            arb_backoff_type(),
            0u64..60,
            0u64..300,
            1.0f64..3.0,
            0.0f64..0.9,
        ),
        1u64..1200,
        (0u32..5, 60u64..7200),
        (0u32..5, 0u64..600, 1.0f64..3.0, 0u64..3600),
        1u64..900,
        1u32..12,
        proptest::collection::vec(arb_rule(), 0..3),
        0u64..7200,
    )
        .prop_map(
            |(
                (kind, a, b, multiplier, jitter),
                reset_after,
                (max_restarts, window),
                (failure_threshold, open, multiplier2, max_open),
                startup,
                history_limit,
                rules,
                max_retry_after,
            )| RestartPolicySpec {
                backoff: Backoff {
                    kind,
                    initial_delay: Duration::from_secs(a.min(b)),
                    max_delay: Duration::from_secs(a.max(b)),
                    multiplier,
                    jitter,
                },
                reset_after: Duration::from_secs(reset_after),
                limits: Limits {
                    max_restarts,
                    window: Duration::from_secs(window),
                },
                circuit_breaker: CircuitBreakerPolicy {
                    failure_threshold,
                    open_duration: Duration::from_secs(open.min(max_open)),
                    open_duration_multiplier: multiplier2,
                    max_open_duration: Duration::from_secs(open.max(max_open)),
                },
                startup_timeout: Duration::from_secs(startup),
                history_limit,
                rules,
                max_retry_after: Duration::from_secs(max_retry_after),
                outage: None,
            },
        )
        .boxed()
}

/// One agent's world: its pods (all of them, to count the live ones), the Agent, the policy.
struct World {
    input: Input,
    pods: Vec<PodFacts>,
    policy: RestartPolicySpec,
    lose_next_write: bool,
}

impl World {
    fn new(policy: RestartPolicySpec, heartbeat: Option<u64>) -> World {
        World {
            input: Input {
                now: t(0),
                agent: AgentFacts {
                    name: "walker".to_string(),
                    uid: "uid-walker".to_string(),
                    generation: 1,
                    suspend: false,
                    heartbeat: heartbeat.map(|s| Heartbeat {
                        timeout: Duration::from_secs(s),
                        grace_period: None,
                    }),
                    template_hash: "h0".to_string(),
                    restart_requested: None,
                    reset_requested: None,
                },
                status: AgentStatus::default(),
                policy: PolicyResolution::Named("walk".to_string(), policy.clone()),
                pod: None,
                previous: None,
                lease: None,
                group: None,
                outages: Vec::new(),
            },
            pods: Vec::new(),
            policy,
            lose_next_write: false,
        }
    }

    fn newest(&mut self) -> Option<&mut PodFacts> {
        self.pods.iter_mut().max_by_key(|p| p.attempt)
    }

    /// The newest pod, if it has not finished and nobody is deleting it.
    fn newest_live(&mut self) -> Option<&mut PodFacts> {
        self.newest().filter(|p| p.is_live())
    }

    fn happen(&mut self, step: &Step) {
        let now = self.input.now;
        match *step {
            Step::Wait(secs) => self.input.now = now + SignedDuration::from_secs(secs),
            Step::Runs => {
                if let Some(pod) = self.newest_live()
                    && pod.phase == PodPhase::Pending
                {
                    pod.phase = PodPhase::Running;
                    pod.ready = true;
                    pod.containers[0].state = ContainerPhase::Running {
                        started_at: Some(now),
                    };
                }
            }
            Step::Exits { code, oom, message } => {
                if let Some(pod) = self.newest_live() {
                    let started_at = pod.started_at();
                    pod.phase = if code == 0 {
                        PodPhase::Succeeded
                    } else {
                        PodPhase::Failed
                    };
                    pod.ready = false;
                    let message = match message {
                        0 => None,
                        1 => Some(r#"{"shutdown":"economic","reason":"budget exhausted"}"#),
                        2 => Some(r#"{"shutdown":"voluntary"}"#),
                        _ => Some("Traceback: boom"),
                    };
                    pod.containers[0].state = ContainerPhase::Terminated(Termination {
                        exit_code: code,
                        signal: None,
                        reason: Some(if oom { "OOMKilled" } else { "Error" }.to_string()),
                        message: message.map(str::to_string),
                        started_at,
                        finished_at: Some(now),
                    });
                }
            }
            Step::Disrupted(kind) => {
                if let Some(pod) = self.newest_live() {
                    match kind {
                        0 => {
                            pod.phase = PodPhase::Failed;
                            pod.reason = Some("Evicted".to_string());
                        }
                        1 => pod.disruption = Some("PreemptionByScheduler".to_string()),
                        2 => pod.disruption = Some("DeletionByTaintManager".to_string()),
                        _ => pod.phase = PodPhase::Unknown,
                    }
                }
            }
            Step::DeletedBySomeone => {
                if let Some(pod) = self.newest() {
                    pod.deleting = true;
                }
            }
            Step::Vanishes => {
                if let Some(i) = (0..self.pods.len()).max_by_key(|&i| self.pods[i].attempt) {
                    self.pods.remove(i);
                }
            }
            Step::Gc => self.pods.retain(|p| p.is_live()),
            Step::Renews { stale } => {
                if self.input.agent.heartbeat.is_some() {
                    let holder = match (stale, self.pods.iter().max_by_key(|p| p.attempt)) {
                        (false, Some(pod)) if pod.is_live() => pod.name.clone(),
                        _ => "walker-0".to_string(),
                    };
                    self.input.lease = Some(LeaseFacts {
                        holder: Some(holder),
                        renew_time: Some(now),
                    });
                }
            }
            Step::RequestRestart(k) => self.input.agent.restart_requested = Some(format!("r{k}")),
            Step::RequestReset(k) => self.input.agent.reset_requested = Some(format!("x{k}")),
            Step::Suspend(on) => self.input.agent.suspend = on,
            Step::ExternalShutdown(on) => {
                self.input.status.shutdown = on.then(|| Shutdown {
                    kind: ShutdownType::Economic,
                    reason: Some("budget exhausted".to_string()),
                    message: None,
                    at: None,
                    source: Some("economy".to_string()),
                });
            }
            Step::Template(k) => {
                let hash = format!("h{k}");
                if hash != self.input.agent.template_hash {
                    self.input.agent.template_hash = hash;
                    self.input.agent.generation += 1;
                }
            }
            Step::PolicyMissing(missing) => {
                self.input.policy = if missing {
                    PolicyResolution::Missing("walk".to_string())
                } else {
                    PolicyResolution::Named("walk".to_string(), self.policy.clone())
                };
            }
            Step::LoseNextWrite => self.lose_next_write = true,
        }
        self.input.pod = self.pods.iter().max_by_key(|p| p.attempt).cloned();
    }

    /// Decides, checks the plan, and carries it out.
    fn decide(&mut self, trace: &[Step]) -> Plan {
        self.input.pod = self.pods.iter().max_by_key(|p| p.attempt).cloned();
        // Gathered as the operator does: after a lost write, the pod the status knows too.
        let attempt = self.input.status.attempt;
        self.input.previous = self
            .input
            .pod
            .as_ref()
            .filter(|p| attempt > 0 && p.attempt > attempt)
            .and_then(|_| self.pods.iter().find(|p| p.attempt == attempt))
            .cloned();
        let plan = decide(self.input.clone());
        check(&self.input, &plan, &self.pods, trace);
        if let Some(name) = &plan.delete_pod {
            for pod in self.pods.iter_mut().filter(|p| &p.name == name) {
                pod.deleting = true;
            }
        }
        if let Some(new) = &plan.create_pod {
            self.pods.push(PodFacts {
                name: new.name.clone(),
                attempt: new.attempt,
                template_hash: Some(self.input.agent.template_hash.clone()),
                created_at: self.input.now,
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
                // What it was created for, as its annotations say.
                origin: new.origin.clone(),
            });
        }
        let live = self.pods.iter().filter(|p| p.is_live()).count();
        assert!(live <= 1, "{live} live pods after {plan:#?}\n{trace:#?}");
        // A lost write: the pod actions happened, then the operator died before writing the
        // status (and the shutdown it may have recorded).
        if !std::mem::take(&mut self.lose_next_write) {
            self.input.status = plan.status.clone();
        }
        self.input.pod = self.pods.iter().max_by_key(|p| p.attempt).cloned();
        plan
    }

    /// Decides again at the same time until nothing changes: steady state is silent.
    fn settle(&mut self, trace: &[Step]) {
        for _ in 0..4 {
            let before = self.input.status.clone();
            let plan = self.decide(trace);
            let quiet = plan.create_pod.is_none()
                && plan.delete_pod.is_none()
                && plan.record_shutdown.is_none()
                && plan.events.is_empty()
                && plan.status == before;
            if quiet {
                return;
            }
        }
        panic!(
            "no steady state at {}: {:#?}\n{trace:#?}",
            self.input.now, self.input.status
        );
    }
}

fn state(status: &AgentStatus) -> BreakerState {
    status
        .circuit_breaker
        .as_ref()
        .map_or(BreakerState::Closed, |b| b.state)
}

/// What every plan along a walk must satisfy.
fn check(input: &Input, plan: &Plan, pods: &[PodFacts], trace: &[Step]) {
    let s = &plan.status;
    let has = |reason: EventReason| plan.events.iter().any(|e| e.reason == reason);
    let context = || format!("{input:#?}\n{plan:#?}\n{trace:#?}");

    // The breaker moves only along its edges.
    let (from, to) = (state(&input.status), state(s));
    use BreakerState::*;
    let legal = match (from, to) {
        _ if from == to => true,
        (Closed, Open) | (HalfOpen, Open) => has(EventReason::CircuitOpened),
        (Open, HalfOpen) => true,
        (HalfOpen, Closed) => has(EventReason::CircuitClosed) || has(EventReason::Reset),
        (Open, Closed) => has(EventReason::Reset),
        (Closed, HalfOpen) => false,
        _ => unreachable!(),
    };
    assert!(legal, "breaker {from:?} → {to:?}\n{}", context());
    let trips = |st: &AgentStatus| st.circuit_breaker.as_ref().map_or(0, |b| b.trips);
    if to == Open && from != Open {
        // Closed in this same decision (a reset, or a probe that had run for resetAfter), the
        // count starts again.
        let closed = has(EventReason::Reset) || has(EventReason::CircuitClosed);
        let before = if closed { 0 } else { trips(&input.status) };
        assert_eq!(trips(s), before + 1, "{}", context());
    }

    // The breaker is open exactly while the agent waits for its probe (or is left alone).
    if to == Open {
        assert!(
            matches!(
                s.phase,
                Some(Phase::CircuitOpen | Phase::Suspended | Phase::Shutdown)
            ),
            "breaker open in phase {:?}\n{}",
            s.phase,
            context()
        );
    }
    if s.phase == Some(Phase::CircuitOpen) {
        assert_eq!(to, Open, "{}", context());
    }
    assert_eq!(
        s.next_restart_at.is_some(),
        s.phase == Some(Phase::BackingOff),
        "nextRestartAt only while backing off\n{}",
        context()
    );

    // Shutdowns.
    if let Some(shutdown) = &input.status.shutdown {
        assert_eq!(plan.create_pod, None, "{}", context());
        assert_eq!(plan.delete_pod, None, "{}", context());
        assert_eq!(s.shutdown.as_ref(), Some(shutdown), "{}", context());
    }
    if let Some(recorded) = &plan.record_shutdown {
        assert_eq!(s.shutdown.as_ref(), Some(recorded), "{}", context());
        assert_eq!(s.phase, Some(Phase::Shutdown));
    }

    // Pods: created with a fresh, derived name; never while suspended or without a policy.
    if let Some(create) = &plan.create_pod {
        assert_eq!(create.name, pod_name(&input.agent.name, create.attempt));
        assert!(
            pods.iter().all(|p| p.attempt < create.attempt),
            "attempt {} reused\n{}",
            create.attempt,
            context()
        );
        assert!(!input.agent.suspend, "{}", context());
        assert!(
            !matches!(input.policy, PolicyResolution::Missing(_)),
            "{}",
            context()
        );
    }
    if let Some(name) = &plan.delete_pod {
        assert!(
            pods.iter().any(|p| &p.name == name),
            "deletes only its own pods\n{}",
            context()
        );
    }

    // Bounded and monotonic. (While shut down, the history is left as it is, even if the
    // limit was lowered since.)
    assert!(
        input.status.shutdown.is_some() || s.restart_history.len() <= history_limit(input),
        "{}",
        context()
    );
    assert!(
        s.restart_count >= input.status.restart_count,
        "{}",
        context()
    );
    assert!(
        s.restart_history
            .iter()
            .skip(1)
            .all(|r| r.restarted_at.is_some()),
        "only the newest restart can be pending\n{}",
        context()
    );

    // Conditions keep their transition time unless their status flips.
    for before in &input.status.conditions {
        if let Some(after) = s.conditions.iter().find(|c| c.type_ == before.type_)
            && after.status == before.status
        {
            assert_eq!(
                after.last_transition_time,
                before.last_transition_time,
                "{}",
                context()
            );
        }
    }

    // The same input gives the same plan.
    assert_eq!(&decide(input.clone()), plan);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn walks_keep_every_invariant(
        policy in arb_walk_policy(),
        heartbeat in proptest::option::of(5u64..300),
        steps in proptest::collection::vec(arb_step(), 1..40),
    ) {
        let mut world = World::new(policy, heartbeat);
        let mut trace = Vec::new();
        world.settle(&trace);
        for step in steps {
            trace.push(step.clone());
            world.happen(&step);
            world.decide(&trace);
            world.settle(&trace);
        }
    }
}
