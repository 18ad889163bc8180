//! The shared builders: the agent's name and uid, time helpers, the policies the scenarios
//! run under, and lookups into a plan or status.

use agent_supervisor::api::{
    AgentStatus, Backoff, BackoffType, CircuitBreakerPolicy, CircuitBreakerStatus, Condition,
    Duration, Limits, RestartPolicySpec, Shutdown, ShutdownType, Time,
};
use agent_supervisor::supervise::conditions;
use agent_supervisor::supervise::{EventReason, PolicyResolution};

use crate::clock::t;

/// The agent the `Sim` plays.
pub(crate) use crate::sim::{AGENT, UID};

pub(crate) fn time(secs: i64) -> Time {
    Time(t(secs))
}

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A policy with round numbers: exponential from 10s, no jitter, no limit, a breaker at 5.
pub(crate) fn fast() -> RestartPolicySpec {
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
pub(crate) fn strict() -> RestartPolicySpec {
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

pub(crate) fn named(policy: RestartPolicySpec) -> PolicyResolution {
    PolicyResolution::Named("fast".to_string(), policy)
}

pub(crate) fn reasons(plan: &agent_supervisor::supervise::Plan) -> Vec<EventReason> {
    plan.events.iter().map(|e| e.reason).collect()
}

#[track_caller]
pub(crate) fn condition<'a>(status: &'a AgentStatus, type_: &str) -> &'a Condition {
    conditions::get(&status.conditions, type_)
        .unwrap_or_else(|| panic!("condition {type_} is set: {:?}", status.conditions))
}

pub(crate) fn breaker(status: &AgentStatus) -> CircuitBreakerStatus {
    status.circuit_breaker.clone().unwrap_or_default()
}

pub(crate) fn limited(max_restarts: u32, window: u64) -> PolicyResolution {
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

pub(crate) fn breaker_policy() -> PolicyResolution {
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

pub(crate) fn economy_shutdown() -> Shutdown {
    Shutdown {
        kind: ShutdownType::Economic,
        reason: Some("budget exhausted".to_string()),
        message: None,
        at: None,
        source: None,
    }
}
