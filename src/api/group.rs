//! `AgentGroup`: an Erlang/OTP supervisor as a Kubernetes object. It names its members (Agents
//! and other groups) in order and says what happens to the others when one of them crashes.
//!
//! A group talks to its members through its own status: `status.members[]` carries, for each
//! member, the group's orders (restart this attempt no earlier than then, wait for that member,
//! stop, reset). Members read their entry and obey it; the group reads its members' statuses.
//! Each object is written by its own reconcile only, so a group restart is one status write of
//! the group, and everything it knows lives in the API server.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::{Duration, positive_when};
use super::{Condition, Shutdown, ShutdownType, Time, conditions_schema};

/// An OTP supervisor for agents: when a member crashes, the strategy says which members restart
/// with it; more than `maxRestarts` restarts within `window` and the group gives up, stopping its
/// members and escalating to the group it belongs to.
// kube's `printcolumn(...)` repeats the same keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "supervisor.dev",
    version = "v1alpha1",
    kind = "AgentGroup",
    plural = "agentgroups",
    shortname = "agg",
    category = "supervisor",
    namespaced,
    status = "AgentGroupStatus",
    doc = "A supervision group (an Erlang/OTP supervisor): restarts the members a crash affects, gives up when restarts come too fast, and escalates to its parent group.",
    // At the root, where `self.metadata.name` is known; the error names `spec.members`.
    validation = Rule::new("!self.spec.members.exists(m, has(m.group) && m.group == self.metadata.name)")
        .message("a group cannot be a member of itself")
        .field_path(".spec.members"),
    printcolumn(name = "Strategy", type_ = "string", json_path = ".spec.strategy"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.ready"),
    printcolumn(
        name = "Restarts",
        type_ = "integer",
        json_path = ".status.restartCount"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = group_spec_rules)]
pub struct AgentGroupSpec {
    /// Which members restart when one crashes: `OneForOne` (only it), `OneForAll` (every member)
    /// or `RestForOne` (it and every member after it in `members`). Default OneForOne.
    #[serde(default)]
    pub strategy: Strategy,

    /// The members, in start order: each names an Agent (`agent`) or an AgentGroup (`group`) in
    /// this namespace, and may be marked `significant`. 1 to 64 members, each named once; a group
    /// cannot be a member of itself.
    #[schemars(length(min = 1, max = 64))]
    pub members: Vec<Member>,

    /// The group's intensity: more than this many restarts within `window` and the group gives
    /// up, stopping its members. 0: the first crash makes it give up (unlike a RestartPolicy's
    /// `limits.maxRestarts`, where 0 means unlimited). At most 1000. Default 3.
    #[serde(default = "defaults::max_restarts")]
    #[schemars(range(max = 1000))]
    pub max_restarts: u32,

    /// The period `maxRestarts` counts in: a duration such as 30s, 5m or 1h30m, longer than 0s.
    /// Default 5m.
    #[serde(default = "defaults::window")]
    pub window: Duration,

    /// `Parallel`: members' pods are created together. `Sequential`: a member's pod is created
    /// only once every member before it is Running (and Ready, if it has a readiness probe), on
    /// the first start and on every restart. Default Parallel.
    #[serde(default)]
    pub start_order: StartOrder,

    /// `Never`, `AnySignificant` (any significant member shutting down shuts the group down) or
    /// `AllSignificant` (all of them). A group shut down stops its other members gracefully and
    /// records a shutdown (source `Group`) on each. The last two need at least one member marked
    /// `significant: true`. Default Never.
    #[serde(default)]
    pub auto_shutdown: AutoShutdown,
}

fn group_spec_rules(schema: &mut schemars::Schema) {
    positive_when(schema, "window", "true", "window must be longer than 0s");
    super::duration::add_rule(
        schema,
        serde_json::json!({
            "rule": "self.members.all(m, !(has(m.agent) || has(m.group)) || self.members.exists_one(n, has(m.agent) ? (has(n.agent) && n.agent == m.agent) : (has(n.group) && has(m.group) && n.group == m.group)))",
            "message": "each member must be named once: an Agent or AgentGroup appears twice in members",
            "fieldPath": ".members",
        }),
    );
    super::duration::add_rule(
        schema,
        serde_json::json!({
            "rule": "!has(self.autoShutdown) || self.autoShutdown == 'Never' || self.members.exists(m, has(m.significant) && m.significant)",
            "message": "autoShutdown needs at least one member marked significant: true",
            "fieldPath": ".autoShutdown",
        }),
    );
}

/// A member of a group: exactly one of `agent` and `group`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = member_rules)]
pub struct Member {
    /// The name of an Agent in this namespace (at most 63 characters, as an Agent's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub agent: Option<String>,

    /// The name of an AgentGroup in this namespace (a child supervisor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub group: Option<String>,

    /// With `autoShutdown`: this member shutting down (economic or voluntary) counts toward
    /// shutting the whole group down. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub significant: bool,
}

fn member_rules(schema: &mut schemars::Schema) {
    super::duration::add_rule(
        schema,
        serde_json::json!({
            "rule": "has(self.agent) != has(self.group)",
            "message": "a member names exactly one of agent and group",
        }),
    );
}

impl Member {
    pub fn agent(name: &str) -> Member {
        Member {
            agent: Some(name.to_string()),
            ..Member::default()
        }
    }

    pub fn group(name: &str) -> Member {
        Member {
            group: Some(name.to_string()),
            ..Member::default()
        }
    }

    /// What the member is, and its name. A member naming both (which admission refuses) is an
    /// Agent.
    pub fn key(&self) -> MemberKey {
        match (&self.agent, &self.group) {
            (Some(name), _) => MemberKey::agent(name),
            (None, Some(name)) => MemberKey::group(name),
            (None, None) => MemberKey::agent(""),
        }
    }
}

/// A member's kind and name: what identifies it within a namespace.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemberKey {
    pub kind: MemberKind,
    pub name: String,
}

impl MemberKey {
    pub fn agent(name: &str) -> MemberKey {
        MemberKey {
            kind: MemberKind::Agent,
            name: name.to_string(),
        }
    }

    pub fn group(name: &str) -> MemberKey {
        MemberKey {
            kind: MemberKind::AgentGroup,
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for MemberKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.name)
    }
}

/// An Agent or a group.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub enum MemberKind {
    Agent,
    AgentGroup,
}

impl MemberKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemberKind::Agent => "Agent",
            MemberKind::AgentGroup => "AgentGroup",
        }
    }
}

/// Which members restart when one crashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Strategy {
    /// Only the crashed member.
    #[default]
    OneForOne,
    /// Every member.
    OneForAll,
    /// The crashed member and every member after it.
    RestForOne,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::OneForOne => "OneForOne",
            Strategy::OneForAll => "OneForAll",
            Strategy::RestForOne => "RestForOne",
        }
    }
}

/// How members' pods are started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum StartOrder {
    /// All at once.
    #[default]
    Parallel,
    /// Each once every member before it is Running (and Ready).
    Sequential,
}

/// When members shutting down shut the whole group down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum AutoShutdown {
    /// Never: members shut down on their own.
    #[default]
    Never,
    /// When any significant member shuts down.
    AnySignificant,
    /// When every significant member has shut down.
    AllSignificant,
}

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
    /// `GaveUp`: the group (or one above it) gave up. `Shutdown`: the group shut down.
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

/// The defaults of a group's spec.
mod defaults {
    use super::Duration;

    pub fn max_restarts() -> u32 {
        3
    }
    pub fn window() -> Duration {
        Duration::from_secs(300)
    }
}
