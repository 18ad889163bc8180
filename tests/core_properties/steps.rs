//! What can happen to an agent between two decisions along a random walk, and the policies
//! walks run under.

use agent_supervisor::api::{Backoff, CircuitBreakerPolicy, Duration, Limits, RestartPolicySpec};
use proptest::prelude::*;

use crate::arb::{arb_backoff_type, arb_rule};

/// Something that happens to an agent between two decisions.
#[derive(Clone, Debug)]
pub(crate) enum Step {
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

pub(crate) fn arb_step() -> BoxedStrategy<Step> {
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
pub(crate) fn arb_walk_policy() -> BoxedStrategy<RestartPolicySpec> {
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
                checkpoints: Default::default(),
                progress: None,
                budget: None,
            },
        )
        .boxed()
}
