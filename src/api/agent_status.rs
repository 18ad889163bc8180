//! `Agent` status: its phase, failures, restart history, circuit breaker and shutdown.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::duration::Duration;
use super::{Condition, FailureClass, FailureReason, Time, conditions_schema};

/// Where the agent is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// A pod was created and is not running yet (after a failure: not yet up for 5 s).
    Pending,
    /// The current pod is running.
    Running,
    /// A restart is scheduled for `nextRestartAt`.
    BackingOff,
    /// The circuit breaker is open: no restart until `circuitBreaker.halfOpenAt`.
    CircuitOpen,
    /// The supervisor gave up: restart limit exceeded, a `Never` policy, or a `Stop` rule.
    /// The reset annotation resumes it.
    Stopped,
    /// The agent shut down for economic or voluntary reasons: it is left alone.
    Shutdown,
    /// `spec.suspend` is true.
    Suspended,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::BackingOff => "BackingOff",
            Phase::CircuitOpen => "CircuitOpen",
            Phase::Stopped => "Stopped",
            Phase::Shutdown => "Shutdown",
            Phase::Suspended => "Suspended",
        }
    }
}

/// What the operator knows of an Agent. Everything it needs to carry on after a restart of the
/// operator lives here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,

    /// The current attempt's pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,

    /// The current attempt's number, from 1; 0 before the first pod.
    #[serde(default)]
    pub attempt: u32,

    /// Restarts performed, ever.
    #[serde(default)]
    pub restart_count: u32,

    /// Failures since the agent was last healthy for the policy's `resetAfter`.
    #[serde(default)]
    pub consecutive_failures: u32,

    /// When the scheduled restart happens (phase `BackingOff`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_restart_at: Option<Time>,

    /// The most recent failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<Failure>,

    /// Restarts, newest first, at most the policy's `historyLimit`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub restart_history: Vec<RestartRecord>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_breaker: Option<CircuitBreakerStatus>,

    /// Set (by the operator or anyone else) when the agent shut down for economic or voluntary
    /// reasons. While set, the operator creates no pod, deletes no pod and schedules no restart.
    /// Clear it to resume supervision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<Shutdown>,

    /// `Ready`, `CircuitBreakerOpen` and `PolicyResolved`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,

    /// The generation of the spec the status was decided from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// When the restarts that count toward `limits.maxRestarts` happened, newest first, kept
    /// while inside the limit's window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000))]
    pub recent_restarts: Vec<Time>,

    /// The last `supervisor.dev/restart-requested-at` value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_restart_request: Option<String>,

    /// The last `supervisor.dev/reset-requested-at` value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_reset_request: Option<String>,

    /// The AgentGroup this agent is a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<super::GroupMembership>,

    /// How far the agent has got, as it reports it (`supervisor.dev/progress` on its heartbeat
    /// Lease, or `progress` in its typed termination message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,

    /// The checkpoints the agent reported, newest first, at most the policy's
    /// `checkpoints.keep`. Each new attempt resumes from the newest that is not poisoned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub checkpoints: Vec<Checkpoint>,

    /// The checkpoint the current attempt resumed from (its `AGENT_CHECKPOINT`); absent when it
    /// started from scratch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub resumed_from: Option<String>,

    /// The last report the operator set aside (a progress that is no whole number or went
    /// backwards, a checkpoint over 1 KiB), and why: said once, as a `ReportIgnored` Event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_report: Option<String>,

    /// What the agent spent, as it reports it (`supervisor.dev/spend` on its heartbeat Lease, or
    /// `spend` in its typed termination message): every attempt's last report, counted once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<super::SpendStatus>,
}

/// How far the agent has got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// The highest progress reported: a whole number that only grows.
    pub value: u64,
    /// When it last grew.
    pub at: Time,
}

/// A point the agent can resume from, as it reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The agent's own reference to its saved state (an object-store key, a step id): opaque,
    /// at most 1 KiB.
    #[serde(rename = "ref")]
    #[schemars(length(max = 1024))]
    pub reference: String,
    /// When it was reported.
    pub at: Time,
    /// The attempt that reported it.
    pub attempt: u32,
    /// The progress recorded when it was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<u64>,
    /// Attempts in a row that resumed from it and failed before reporting a newer one.
    #[serde(default)]
    pub failures: u32,
    /// Given up on after the policy's `checkpoints.maxFailures` such failures: no attempt
    /// resumes from it until a reset.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub poisoned: bool,
}

/// One failed attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// When the attempt ended (or was found dead).
    pub time: Time,
    pub reason: FailureReason,
    pub class: FailureClass,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The agent container's exit code.
    pub exit_code: Option<i32>,
    /// The signal that killed the container (exit code − 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The termination message or other detail, at most 1 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Arc<str>>,
    /// The container that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The pod of the attempt that failed.
    pub pod_name: Option<String>,
    /// How long the attempt ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_for: Option<Duration>,
    /// 16 hex characters that are the same for the same failure on every agent and attempt: a
    /// hash of the reason, the exit code and the message with numbers, ids, addresses, times
    /// and the agent's own names taken out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 16, max = 16))]
    pub fingerprint: Option<String>,
}

/// One restart: the attempt that ended, why, and when the next one started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestartRecord {
    /// The attempt that ended.
    pub attempt: u32,
    /// What caused the restart.
    pub trigger: Trigger,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// When the attempt ended (absent for a restart nobody failed: manual, rollout, group).
    pub failed_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<FailureReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The agent container's exit code.
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The signal that killed the container (exit code − 128).
    pub signal: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The termination message or other detail, at most 1 KiB.
    pub message: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// How long the attempt ran.
    pub ran_for: Option<Duration>,
    /// The failure's fingerprint (see `lastFailure.fingerprint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 16, max = 16))]
    pub fingerprint: Option<String>,
    /// The delay chosen before the restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Duration>,
    /// When the next attempt's pod was created; absent while the restart is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<Time>,

    /// The checkpoint the attempt resumed from, if it was handed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub checkpoint: Option<String>,

    /// How far the attempt got: the progress recorded when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<u64>,

    /// What the attempt reported it spent, as its last report said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<super::Spend>,
}

/// What caused a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Trigger {
    /// The attempt failed.
    Failure,
    /// The agent stopped renewing its heartbeat.
    HeartbeatLost,
    /// Someone asked for it with the restart annotation.
    Manual,
    /// The template changed.
    Rollout,
    /// The pod was evicted, preempted, or lost with its node.
    Disruption,
    /// The agent's group restarted it with a member that crashed.
    Group,
    /// The agent asked to be restarted later (`retryAfter` in its termination message); counts
    /// toward no limit and not toward the breaker.
    RetryAfter,
    /// Restarted once the outage its failure was held for ended, or as the outage's probe;
    /// counts toward no limit and not toward the breaker.
    Outage,
}

impl Trigger {
    pub const ALL: [Trigger; 8] = [
        Trigger::Failure,
        Trigger::HeartbeatLost,
        Trigger::Manual,
        Trigger::Rollout,
        Trigger::Disruption,
        Trigger::Group,
        Trigger::RetryAfter,
        Trigger::Outage,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Failure => "Failure",
            Trigger::HeartbeatLost => "HeartbeatLost",
            Trigger::Manual => "Manual",
            Trigger::Rollout => "Rollout",
            Trigger::Disruption => "Disruption",
            Trigger::Group => "Group",
            Trigger::RetryAfter => "RetryAfter",
            Trigger::Outage => "Outage",
        }
    }

    /// The trigger named `s`, as `as_str` writes it.
    pub fn parse(s: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The circuit breaker's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CircuitBreakerStatus {
    pub state: BreakerState,
    /// How many times the breaker opened since it was last closed by a healthy probe or a reset.
    #[serde(default)]
    pub trips: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// When the breaker last opened.
    pub opened_at: Option<Time>,
    /// When the single probe restart happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_open_at: Option<Time>,
}

/// Closed: restarts flow. Open: none. HalfOpen: one probe is running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BreakerState {
    #[default]
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "Closed",
            BreakerState::Open => "Open",
            BreakerState::HalfOpen => "HalfOpen",
        }
    }
}

/// An economic or voluntary shutdown: the agent is left alone while this is set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Shutdown {
    #[serde(rename = "type")]
    pub kind: ShutdownType,
    /// A short reason, such as "budget exhausted" (at most 256 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub reason: Option<String>,
    /// More detail (at most 1024 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub message: Option<String>,
    /// When the shutdown was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
    /// Who decided: `TerminationMessage`, `Rule`, `Group`, or whoever else wrote it (at most 253
    /// characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub source: Option<String>,
}

/// Why the agent shut down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ShutdownType {
    /// It ran out of budget.
    Economic,
    /// It decided to stop.
    Voluntary,
}
