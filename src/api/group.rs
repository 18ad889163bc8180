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

use super::AgentGroupStatus;
use super::duration::{Duration, positive_when};

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

    /// How much its members may spend together, as they report it (members that are groups
    /// count with all of theirs). When it is used up every member is stopped and shut down
    /// (`Economic`, source `GroupBudget`) until the budget is raised or its window moves on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::Budget>,
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
