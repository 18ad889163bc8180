//! What a decision asks the IO shell to do: pod actions, the new status, Events, and when to
//! look again.

use jiff::Timestamp;

use super::input::PodOrigin;
use crate::api::{AgentStatus, FailureClass, FailureReason, Shutdown};

/// The outcome of one decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Delete this pod (gracefully). A plan that deletes a live pod without creating one records
    /// the status first (a kill is recorded before it happens), and is carried out again by a
    /// later decision if the delete is lost.
    pub delete_pod: Option<String>,
    /// Create this pod.
    pub create_pod: Option<NewPod>,
    /// The pod that will replace the deleted one (a manual restart, a rollout): nothing running
    /// is deleted until the API server has accepted this pod in a dry run.
    pub validate_pod: Option<NewPod>,
    /// The Agent's status after the plan is carried out.
    pub status: AgentStatus,
    /// A shutdown the operator itself records. It is written apart from the rest of the status,
    /// so that the operator never takes ownership of — and so can never remove — a shutdown
    /// someone else wrote.
    pub record_shutdown: Option<Shutdown>,
    /// The operator's own budget shutdown is lifted: `status.shutdown` is removed, apart from
    /// the rest, and only on the status the decision saw (its resourceVersion).
    pub clear_shutdown: bool,
    pub events: Vec<Event>,
    /// Decide again at this time, even if nothing changes before.
    pub requeue_at: Option<Timestamp>,
}

/// A pod to create for an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewPod {
    pub name: String,
    pub attempt: u32,
    /// Becomes `AGENT_RESTART_COUNT`.
    pub restart_count: u32,
    /// Becomes `AGENT_LAST_FAILURE_REASON` (empty on first start).
    pub last_failure_reason: Option<FailureReason>,
    /// Becomes `AGENT_LAST_FAILURE`, as JSON (empty on first start).
    pub last_failure: Option<LastFailure>,
    /// Becomes `AGENT_PROGRESS` (empty before the agent reports any).
    pub progress: Option<u64>,
    /// Written on the pod: what it was created for.
    pub origin: PodOrigin,
}

/// How the last failure ended, as a new attempt is told it (`AGENT_LAST_FAILURE`): the failed
/// attempt, its reason and class, its exit code and message.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastFailure {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    pub reason: FailureReason,
    pub class: FailureClass,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<std::sync::Arc<str>>,
}

/// An Event to record on the Agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub reason: EventReason,
    /// A sentence, as `kubectl describe` shows it.
    pub note: String,
    /// The pod it concerns, if any: a "related" object, so that Events about different pods
    /// are told apart instead of counted as one.
    pub pod: Option<String>,
}

impl Event {
    pub fn warning(&self) -> bool {
        self.reason.is_warning()
    }
}

/// The Event reasons of SPEC.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventReason {
    PodCreated,
    Crashed,
    RestartScheduled,
    Restarted,
    HeartbeatLost,
    /// A running agent's reported progress stopped growing: its pod is stopped.
    NoProgress,
    CircuitOpened,
    CircuitHalfOpen,
    CircuitClosed,
    RestartLimitExceeded,
    ShutdownRespected,
    PolicyNotFound,
    Suspended,
    ManualRestart,
    Reset,
    RolledOut,
    /// The agent's group gave up: it is stopped.
    GroupGaveUp,
    /// The agent's group shut down: it is shut down.
    GroupShutdown,
    /// A checkpoint failed too many resumes in a row: the next attempt resumes from an older one.
    CheckpointPoisoned,
    /// A progress or checkpoint report was set aside (said once per report).
    ReportIgnored,
    /// The spend budget is used up: the pod is stopped, and it shuts down.
    BudgetExhausted,
    /// The spend crossed the budget's `warnAt`.
    BudgetLow,
    /// The API server refused the next attempt's pod (quota, admission, an invalid template):
    /// no restart until it takes it.
    ReplacementRefused,
    /// The Sandbox an Agent supervises does not exist.
    SandboxNotFound,
    /// The Sandbox's pod template lets the kubelet restart containers in place.
    SandboxRestartPolicy,
    /// Someone else suspended the Sandbox: left alone until it runs again.
    SandboxSuspended,
    /// The Sandbox reached its `shutdownTime` (its controller deleted the pod): not restarted
    /// unless that time moves later.
    SandboxExpired,
    /// Sandboxes are not watched (agent-sandbox is not installed, or `--sandboxes=false`).
    SandboxesUnavailable,
}

impl EventReason {
    /// Every reason, in declaration order.
    pub const ALL: [EventReason; 28] = [
        EventReason::PodCreated,
        EventReason::Crashed,
        EventReason::RestartScheduled,
        EventReason::Restarted,
        EventReason::HeartbeatLost,
        EventReason::NoProgress,
        EventReason::CircuitOpened,
        EventReason::CircuitHalfOpen,
        EventReason::CircuitClosed,
        EventReason::RestartLimitExceeded,
        EventReason::ShutdownRespected,
        EventReason::PolicyNotFound,
        EventReason::Suspended,
        EventReason::ManualRestart,
        EventReason::Reset,
        EventReason::RolledOut,
        EventReason::GroupGaveUp,
        EventReason::GroupShutdown,
        EventReason::CheckpointPoisoned,
        EventReason::ReportIgnored,
        EventReason::BudgetExhausted,
        EventReason::BudgetLow,
        EventReason::ReplacementRefused,
        EventReason::SandboxNotFound,
        EventReason::SandboxRestartPolicy,
        EventReason::SandboxSuspended,
        EventReason::SandboxExpired,
        EventReason::SandboxesUnavailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::PodCreated => "PodCreated",
            EventReason::Crashed => "Crashed",
            EventReason::RestartScheduled => "RestartScheduled",
            EventReason::Restarted => "Restarted",
            EventReason::HeartbeatLost => "HeartbeatLost",
            EventReason::NoProgress => "NoProgress",
            EventReason::CircuitOpened => "CircuitOpened",
            EventReason::CircuitHalfOpen => "CircuitHalfOpen",
            EventReason::CircuitClosed => "CircuitClosed",
            EventReason::RestartLimitExceeded => "RestartLimitExceeded",
            EventReason::ShutdownRespected => "ShutdownRespected",
            EventReason::PolicyNotFound => "PolicyNotFound",
            EventReason::Suspended => "Suspended",
            EventReason::ManualRestart => "ManualRestart",
            EventReason::Reset => "Reset",
            EventReason::RolledOut => "RolledOut",
            EventReason::GroupGaveUp => "GroupGaveUp",
            EventReason::GroupShutdown => "GroupShutdown",
            EventReason::CheckpointPoisoned => "CheckpointPoisoned",
            EventReason::ReportIgnored => "ReportIgnored",
            EventReason::BudgetExhausted => "BudgetExhausted",
            EventReason::BudgetLow => "BudgetLow",
            EventReason::ReplacementRefused => "ReplacementRefused",
            EventReason::SandboxNotFound => "SandboxNotFound",
            EventReason::SandboxRestartPolicy => "SandboxRestartPolicy",
            EventReason::SandboxSuspended => "SandboxSuspended",
            EventReason::SandboxExpired => "SandboxExpired",
            EventReason::SandboxesUnavailable => "SandboxesUnavailable",
        }
    }

    pub fn is_warning(self) -> bool {
        matches!(
            self,
            EventReason::Crashed
                | EventReason::HeartbeatLost
                | EventReason::NoProgress
                | EventReason::CircuitOpened
                | EventReason::RestartLimitExceeded
                | EventReason::PolicyNotFound
                | EventReason::GroupGaveUp
                | EventReason::CheckpointPoisoned
                | EventReason::ReportIgnored
                | EventReason::BudgetExhausted
                | EventReason::BudgetLow
                | EventReason::ReplacementRefused
                | EventReason::SandboxNotFound
                | EventReason::SandboxRestartPolicy
                | EventReason::SandboxesUnavailable
        )
    }
}

/// The pod name of an attempt: `<agent>-<attempt>`, the agent part shortened if the whole would
/// pass the 253-character limit. The same inputs always give the same name, so a retried create
/// can never make a second pod for one attempt.
pub fn pod_name(agent: &str, attempt: u32) -> String {
    let suffix = format!("-{attempt}");
    let room = 253 - suffix.len();
    let mut base = &agent[..agent.len().min(room)];
    while base.ends_with(['-', '.']) {
        base = &base[..base.len() - 1];
    }
    format!("{base}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_are_derived_and_bounded() {
        assert_eq!(pod_name("researcher", 1), "researcher-1");
        assert_eq!(pod_name("researcher", 12), "researcher-12");
        let long = "a".repeat(253);
        let name = pod_name(&long, 4_000_000_000);
        assert_eq!(name.len(), 253);
        assert!(name.ends_with("-4000000000"));
        let dashed = format!("{}-{}", "b".repeat(249), "c".repeat(3));
        assert!(!pod_name(&dashed, 123).contains("--"));
    }
}
