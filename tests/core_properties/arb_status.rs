//! Strategies for an agent's stored status: phase, restart records, breaker, shutdown,
//! conditions, and the whole `AgentStatus`.

use std::collections::BTreeMap;

use agent_supervisor::api::{
    AgentStatus, BreakerState, CircuitBreakerStatus, Condition, Failure, Phase, RestartRecord,
    Shutdown, ShutdownType, Trigger,
};
use agent_supervisor::supervise::pod_name;
use proptest::prelude::*;

use crate::arb::{arb_class, arb_duration, arb_reason, arb_stored_time};

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

pub(crate) fn arb_text() -> impl Strategy<Value = Option<String>> {
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
                    checkpoint: None,
                    progress: None,
                    spend: None,
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

pub(crate) fn arb_shutdown() -> BoxedStrategy<Shutdown> {
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

pub(crate) fn arb_status() -> BoxedStrategy<AgentStatus> {
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
                progress: None,
                checkpoints: Vec::new(),
                resumed_from: None,
                ignored_report: None,
                spend: None,
            },
        )
        .boxed()
}
