//! `AgentGroup` status: its members' summary, its orders to them, and its restart history.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, MemberKind, Shutdown, ShutdownType, Time, conditions_schema};

/// Where the group is: `Starting` (not every member is running yet), `Running`, `Restarting`,
/// `Escalated` (it gave up) or `Shutdown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum GroupPhase {
    /// Not every member is running yet.
    Starting,
    /// Every member is running.
    Running,
    /// A restart is under way: members are being stopped and started again.
    Restarting,
    /// The group gave up (or a group above it did): its members are stopped.
    Escalated,
    /// The group shut down: its members are shut down.
    Shutdown,
}

impl GroupPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupPhase::Starting => "Starting",
            GroupPhase::Running => "Running",
            GroupPhase::Restarting => "Restarting",
            GroupPhase::Escalated => "Escalated",
            GroupPhase::Shutdown => "Shutdown",
        }
    }
}

/// What the operator knows of a group, and its orders to its members.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentGroupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<GroupPhase>,

    /// Members running, of all members: `2/3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,

    /// Each member in order: what it is, where it is, and the group's orders to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub members: Vec<MemberStatus>,

    /// Restarts under this group, ever: a member's own restart (OneForOne), a group restart, a
    /// restart of the whole group by its parent.
    #[serde(default)]
    pub restart_count: u32,

    /// Restarts, newest first, at most 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub restart_history: Vec<GroupRestartRecord>,

    /// `Ready` (every member running), `Escalated` (the group gave up) and `MembersResolved`
    /// (every member exists and belongs to this group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,

    /// The generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The group this group is a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupMembership>,

    /// The group's incarnation, from 1: each restart of the whole group by its parent (or a
    /// reset) begins a new one, with a fresh restart count.
    #[serde(default)]
    pub incarnation: u32,

    /// When the restarts that count toward `maxRestarts` happened, newest first, kept while
    /// inside the window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1001))]
    pub recent_restarts: Vec<Time>,

    /// Set when the group gave up: its members are stopped until its parent restarts it or a
    /// reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<GiveUp>,

    /// Set when the group shut down (autoShutdown, or its parent shut down): its members are shut
    /// down. Clear it (and the significant members' shutdowns) to resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<Shutdown>,

    /// The last `supervisor.dev/reset-requested-at` value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_reset_request: Option<String>,

    /// What its members report they spent, summed (a member group's with all of its own), within
    /// its budget's window when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend: Option<super::GroupSpend>,
}

/// A member as the group sees it, and the group's orders to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// The member's name.
    pub name: String,
    /// `Agent` or `AgentGroup`.
    pub kind: MemberKind,
    /// The member's phase (an Agent's or a group's), or `NotFound`, `Conflict` or `Cycle` when it
    /// is not supervised by this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The member's own restart count (its `status.restartCount`).
    #[serde(default)]
    pub restart_count: u32,
    /// Order: end this attempt of the member (an Agent's attempt, a group's incarnation) and
    /// start the next no earlier than `due`. Kept once carried out: it then names a past attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartOrder>,
    /// Order: create no pod yet; the member named here (before this one, under `Sequential`)
    /// is not running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// Order: stop (the group gave up) or shut down (the group shut down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopOrder>,
    /// Order: reset (close the breaker, clear the failure counts, resume), once per value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<String>,
}

/// End attempt `attempt`; start the next no earlier than `due`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestartOrder {
    /// The member's attempt (an Agent's) or incarnation (a group's) to end.
    pub attempt: u32,
    /// The earliest time the next one may start.
    pub due: Time,
}

/// Why a group stops its members.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StopOrder {
    /// `GaveUp`: the group (or one above it) gave up. `Shutdown`: the group shut down. `Budget`:
    /// its spend budget (or one above it) is used up.
    pub reason: StopReason,
    /// For `Shutdown`: the type of the shutdown that triggered it.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ShutdownType>,
    /// Said to people: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a group stops its members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum StopReason {
    GaveUp,
    Shutdown,
    /// The group's spend budget (or one above it) is used up: shut down until it is not.
    Budget,
}

/// The group an Agent or group belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupMembership {
    /// The AgentGroup's name.
    pub name: String,
    /// The last reset ordered by that group that was acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_reset: Option<String>,
}

/// The group gave up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GiveUp {
    /// When the group gave up.
    pub at: Time,
    /// The incarnation that gave up.
    pub incarnation: u32,
    /// The member whose crash made it give up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
}

/// One restart under the group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupRestartRecord {
    /// When the restart was decided.
    pub at: Time,
    /// The member that crashed (absent when the group's parent restarted it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// Why: the member's failure reason (`Error`, `OOMKilled`, …), `GroupGaveUp` for a child
    /// group that gave up, or who restarted the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The members restarted, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarted: Vec<String>,
    pub trigger: GroupTrigger,
}

/// What caused a restart under a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum GroupTrigger {
    /// A member failed.
    Failure,
    /// A member lost its heartbeat.
    HeartbeatLost,
    /// A member was evicted, preempted or lost with its node (counts toward no intensity).
    Disruption,
    /// A child group gave up.
    Escalation,
    /// The group's parent restarted it.
    Group,
    /// A member asked to be restarted later (counts toward no intensity).
    RetryAfter,
    /// A member's restart was held by an outage, which ended (counts toward no intensity).
    Outage,
}

impl GroupTrigger {
    /// Every value, in declaration order.
    pub const ALL: [GroupTrigger; 7] = [
        GroupTrigger::Failure,
        GroupTrigger::HeartbeatLost,
        GroupTrigger::Disruption,
        GroupTrigger::Escalation,
        GroupTrigger::Group,
        GroupTrigger::RetryAfter,
        GroupTrigger::Outage,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GroupTrigger::Failure => "Failure",
            GroupTrigger::HeartbeatLost => "HeartbeatLost",
            GroupTrigger::Disruption => "Disruption",
            GroupTrigger::Escalation => "Escalation",
            GroupTrigger::Group => "Group",
            GroupTrigger::RetryAfter => "RetryAfter",
            GroupTrigger::Outage => "Outage",
        }
    }
}
