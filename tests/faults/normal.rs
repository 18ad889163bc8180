//! The normalized end state of a run: what must come out the same whether or not the operator
//! crashed on the way. Times and durations measured off the clock are left out; whatever a
//! decision produced (counters, history, breaker, shutdown, handled requests) is kept.

use agent_supervisor::api::{
    AgentStatus, BreakerState, FailureClass, FailureReason, Phase, ShutdownType, Trigger,
};
use serde::Serialize;
use serde_json::Value;

/// One restart history entry without its timestamps and run time. The chosen backoff stays:
/// the scenarios' policies have no jitter, so it is exact. `restartedAt` is kept as a flag —
/// whether the restart was carried out.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Record {
    pub attempt: u32,
    pub trigger: Trigger,
    pub reason: Option<FailureReason>,
    pub class: Option<FailureClass>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub backoff: Option<String>,
    pub restarted: bool,
}

/// The last failure without its time and message (a HeartbeatLost message says how long the
/// Lease was silent).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LastFailure {
    pub reason: FailureReason,
    pub class: FailureClass,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub pod_name: Option<String>,
}

/// The deterministic part of an Agent's status, and of its pods.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Normal {
    pub phase: Option<Phase>,
    pub pod_name: Option<String>,
    pub attempt: u32,
    pub restart_count: u32,
    pub consecutive_failures: u32,
    /// Whether a restart is scheduled (the time itself depends on when the failure was seen).
    pub restart_scheduled: bool,
    pub last_failure: Option<LastFailure>,
    pub history: Vec<Record>,
    /// State, trips, and how long it stays open (`halfOpenAt − openedAt`, whole seconds): the
    /// open duration is decided once per trip, so a repeated decision must not stretch it.
    pub breaker: Option<(BreakerState, u32, Option<i64>)>,
    /// Type, reason and source: who decided and why.
    pub shutdown: Option<(ShutdownType, Option<String>, Option<String>)>,
    /// Conditions as (type, status, reason), sorted by type.
    pub conditions: Vec<(String, String, String)>,
    pub observed_generation: Option<i64>,
    /// How many restarts count toward the restart limit (their times are clock-dependent).
    pub recent_restarts: usize,
    pub handled_restart_request: Option<String>,
    pub handled_reset_request: Option<String>,
    /// Every pod ever created for the run, sorted: an extra attempt is an action done twice.
    pub pods_created: Vec<String>,
}

impl Normal {
    pub fn of(status: &AgentStatus, pods_created: &[String]) -> Normal {
        let mut pods_created = pods_created.to_vec();
        pods_created.sort();
        let mut conditions: Vec<_> = status
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect();
        conditions.sort();
        Normal {
            phase: status.phase,
            pod_name: status.pod_name.clone(),
            attempt: status.attempt,
            restart_count: status.restart_count,
            consecutive_failures: status.consecutive_failures,
            restart_scheduled: status.next_restart_at.is_some(),
            last_failure: status.last_failure.as_ref().map(|f| LastFailure {
                reason: f.reason,
                class: f.class,
                exit_code: f.exit_code,
                signal: f.signal,
                pod_name: f.pod_name.clone(),
            }),
            history: status
                .restart_history
                .iter()
                .map(|r| Record {
                    attempt: r.attempt,
                    trigger: r.trigger,
                    reason: r.reason,
                    class: r.class,
                    exit_code: r.exit_code,
                    signal: r.signal,
                    backoff: r.backoff.map(|b| b.to_string()),
                    restarted: r.restarted_at.is_some(),
                })
                .collect(),
            breaker: status.circuit_breaker.as_ref().map(|b| {
                let open_for = match (&b.opened_at, &b.half_open_at) {
                    (Some(opened), Some(half)) => Some((half.0 - opened.0).get_seconds()),
                    _ => None,
                };
                (b.state, b.trips, open_for)
            }),
            shutdown: status
                .shutdown
                .as_ref()
                .map(|s| (s.kind, s.reason.clone(), s.source.clone())),
            conditions,
            observed_generation: status.observed_generation,
            recent_restarts: status.recent_restarts.len(),
            handled_restart_request: status.handled_restart_request.clone(),
            handled_reset_request: status.handled_reset_request.clone(),
            pods_created,
        }
    }

    /// The fields that differ, as `field: want … got …`.
    pub fn diff(&self, got: &Normal) -> Vec<String> {
        let want = serde_json::to_value(self).expect("serializes");
        let got = serde_json::to_value(got).expect("serializes");
        let (Value::Object(want), Value::Object(got)) = (want, got) else {
            unreachable!("a struct serializes to an object")
        };
        want.iter()
            .filter(|(key, value)| got.get(*key) != Some(value))
            .map(|(key, value)| {
                let other = got.get(key).cloned().unwrap_or(Value::Null);
                format!("{key}: want {value}, got {other}")
            })
            .collect()
    }
}
