//! Strategies for the scalars and the policy: times, durations, backoff types, failure reasons
//! and classes, rules, and any policy and its resolution, valid or not.

use agent_supervisor::api::{
    Backoff, BackoffType, CircuitBreakerPolicy, Duration, ExitCodeOperator, ExitCodeSelector,
    FailureClass, FailureReason, Limits, RestartPolicySpec, Rule, RuleAction, Time,
};
use agent_supervisor::supervise::PolicyResolution;
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use crate::clock::t;

/// `at` cut to its second, as status times are.
pub(crate) fn t_whole(at: Timestamp) -> Timestamp {
    Timestamp::from_second(at.as_second()).expect("in range")
}

/// Any timestamp, weighted toward the present, with the extremes.
pub(crate) fn arb_time() -> impl Strategy<Value = Timestamp> {
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

pub(crate) fn arb_stored_time() -> impl Strategy<Value = Time> {
    arb_time().prop_map(Time)
}

/// Any duration, weighted toward the ones people write.
pub(crate) fn arb_duration() -> impl Strategy<Value = Duration> {
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

pub(crate) fn arb_backoff_type() -> impl Strategy<Value = BackoffType> {
    prop_oneof![
        Just(BackoffType::Never),
        Just(BackoffType::Immediate),
        Just(BackoffType::Linear),
        Just(BackoffType::Exponential),
    ]
}

pub(crate) fn arb_reason() -> impl Strategy<Value = FailureReason> {
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

pub(crate) fn arb_class() -> impl Strategy<Value = FailureClass> {
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

pub(crate) fn arb_rule() -> impl Strategy<Value = Rule> {
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
pub(crate) fn arb_policy() -> BoxedStrategy<RestartPolicySpec> {
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
                checkpoints: Default::default(),
                progress: None,
                budget: None,
            },
        )
        .boxed()
}

pub(crate) fn arb_resolution() -> BoxedStrategy<PolicyResolution> {
    prop_oneof![
        3 => arb_policy().prop_map(|p| PolicyResolution::Named("p".to_string(), p)),
        1 => arb_policy().prop_map(PolicyResolution::NamespaceDefault),
        1 => Just(PolicyResolution::BuiltIn),
        1 => Just(PolicyResolution::Missing("gone".to_string())),
    ]
    .boxed()
}
