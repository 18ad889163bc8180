//! The facts a group's decision is made from, and what a member reads of its group's orders.

use jiff::Timestamp;

use super::membership::Refusal;
use crate::api::{
    AgentGroupSpec, AgentGroupStatus, AgentStatus, GroupPhase, GroupTrigger, MemberKey, Phase,
    Shutdown, StopOrder, Trigger,
};
use crate::supervise::conditions::{self, READY};

/// Everything `decide_group` looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupInput {
    pub now: Timestamp,
    pub group: GroupFacts,
    /// The group's status as read.
    pub status: AgentGroupStatus,
    /// This group's orders from the group it is a member of, if it is one.
    pub parent: Option<Directive>,
    /// One per member of the spec, in order.
    pub members: Vec<MemberFacts>,
}

/// What the decision needs of the AgentGroup object itself.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupFacts {
    pub name: String,
    pub uid: String,
    pub generation: i64,
    /// When the group was created: members created with it are not reported missing at first.
    pub created: Timestamp,
    pub spec: AgentGroupSpec,
    /// The `supervisor.dev/reset-requested-at` annotation.
    pub reset_requested: Option<String>,
}

/// A member of the spec and what is known of it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberFacts {
    pub key: MemberKey,
    pub significant: bool,
    pub state: MemberState,
}

/// A member as found.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberState {
    /// No such object (yet).
    NotFound,
    /// It exists, and this group does not supervise it.
    Refused(Refusal),
    Agent(AgentView),
    Group(ChildView),
}

/// What a group needs of a member Agent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentView {
    pub phase: Option<Phase>,
    pub attempt: u32,
    pub restart_count: u32,
    /// Its `Ready` condition is True: its pod runs and is ready.
    pub ready: bool,
    pub suspended: bool,
    pub shutdown: Option<Shutdown>,
    /// What it reports it spent (`status.spend`).
    pub spend: Option<SpendSeen>,
    /// Its own policy gave up on it (phase Stopped, not by its group): it stays stopped until
    /// it is reset, whatever its group does.
    pub given_up: bool,
    /// A crash its policy will restart, waiting for the group.
    pub crash: Option<Crash>,
}

/// A member's crash, waiting for its group.
#[derive(Clone, Debug, PartialEq)]
pub struct Crash {
    /// The attempt (a group's incarnation) that crashed.
    pub attempt: u32,
    /// Said to people: `Error`, `OOMKilled`, `GroupGaveUp`…
    pub reason: String,
    pub trigger: GroupTrigger,
    /// When the member's own policy restarts it; `None`: now.
    pub due: Option<Timestamp>,
    /// Counts toward the group's intensity (disruptions do not).
    pub counted: bool,
}

/// What a group needs of a member group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChildView {
    pub phase: Option<GroupPhase>,
    pub incarnation: u32,
    pub restart_count: u32,
    /// The incarnation that gave up, if it did.
    pub gave_up: Option<u32>,
    pub shutdown: Option<Shutdown>,
    /// What its members spent, summed.
    pub spend: Option<SpendSeen>,
}

/// What a member reports it spent: its total, and since when that total counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpendSeen {
    pub cost: Option<String>,
    pub tokens: Option<u64>,
    /// Another value than before: the member's total began again (its own budget window).
    pub since: Option<crate::api::Time>,
}

impl AgentView {
    /// What a group reads of an Agent: its status, and whether it is suspended.
    pub fn of(s: &AgentStatus, suspended: bool) -> AgentView {
        let ready_condition = conditions::get(&s.conditions, READY);
        let ready = ready_condition.is_some_and(|c| c.status == "True");
        let given_up = s.phase == Some(Phase::Stopped)
            && !ready_condition
                .is_some_and(|c| matches!(c.reason.as_str(), "GroupGaveUp" | "GroupShutdown"));
        let pending = s
            .restart_history
            .first()
            .filter(|r| r.restarted_at.is_none() && r.attempt == s.attempt && s.attempt > 0);
        let trigger = |t: Trigger| match t {
            Trigger::Failure => Some(GroupTrigger::Failure),
            Trigger::HeartbeatLost => Some(GroupTrigger::HeartbeatLost),
            Trigger::Disruption => Some(GroupTrigger::Disruption),
            Trigger::RetryAfter => Some(GroupTrigger::RetryAfter),
            Trigger::Outage => Some(GroupTrigger::Outage),
            Trigger::Manual | Trigger::Rollout | Trigger::Group => None,
        };
        let crash =
            match s.phase {
                Some(Phase::BackingOff) => pending.and_then(|r| {
                    trigger(r.trigger).map(|t| (r, t, s.next_restart_at.as_ref().map(|t| t.0)))
                }),
                // Held by an outage: the group hears of the crash when the outage lets it go.
                Some(Phase::CircuitOpen) => pending
                    .filter(|r| r.trigger != Trigger::Outage)
                    .and_then(|r| {
                        let probe = s
                            .circuit_breaker
                            .as_ref()
                            .and_then(|b| b.half_open_at.as_ref())
                            .map(|t| t.0);
                        trigger(r.trigger).map(|t| (r, t, probe))
                    }),
                _ => None,
            };
        AgentView {
            phase: s.phase,
            attempt: s.attempt,
            restart_count: s.restart_count,
            ready,
            suspended,
            shutdown: s.shutdown.clone(),
            spend: s.spend.as_ref().map(|s| SpendSeen {
                cost: s.cost.clone(),
                tokens: s.tokens,
                since: Some(s.since.clone()),
            }),
            given_up,
            crash: crash.map(|(record, trigger, due)| Crash {
                attempt: record.attempt,
                reason: record
                    .reason
                    .map_or_else(|| "Unknown".to_string(), |r| r.to_string()),
                trigger,
                due,
                counted: matches!(trigger, GroupTrigger::Failure | GroupTrigger::HeartbeatLost),
            }),
        }
    }

    /// Running and ready.
    pub fn up(&self) -> bool {
        self.phase == Some(Phase::Running) && self.ready
    }
}

impl ChildView {
    /// What a parent reads of a child group: its status.
    pub fn of(s: &AgentGroupStatus) -> ChildView {
        ChildView {
            phase: s.phase,
            incarnation: s.incarnation.max(1),
            restart_count: s.restart_count,
            gave_up: s.gave_up.as_ref().map(|g| g.incarnation),
            shutdown: s.shutdown.clone(),
            spend: s.spend.as_ref().map(|s| SpendSeen {
                cost: s.cost.clone(),
                tokens: s.tokens,
                since: s.since.clone(),
            }),
        }
    }

    /// It gave up in its current incarnation: a crash, for its parent.
    pub fn crash(&self) -> Option<Crash> {
        self.gave_up
            .filter(|i| *i == self.incarnation)
            .map(|attempt| Crash {
                attempt,
                reason: "GroupGaveUp".to_string(),
                trigger: GroupTrigger::Escalation,
                due: None,
                counted: true,
            })
    }
}

/// A member's orders, as its group's status gives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Directive {
    /// The group.
    pub group: String,
    /// The group's status lists this member. Until it does, the member starts nothing: the
    /// group has not yet applied its start order to it.
    pub listed: bool,
    /// End this attempt (an Agent's attempt, a group's incarnation); start the next no earlier
    /// than the time given.
    pub restart: Option<(u32, Timestamp)>,
    /// Start nothing yet: this member (before it, under `Sequential`) is not running.
    pub waiting_for: Option<String>,
    pub stop: Option<StopOrder>,
    /// Reset once for each new value.
    pub reset: Option<String>,
}

impl Directive {
    /// `member`'s orders in the status of its group `group`.
    pub fn read(group: &str, status: Option<&AgentGroupStatus>, member: &MemberKey) -> Directive {
        let entry = status.and_then(|s| {
            s.members
                .iter()
                .find(|m| m.kind == member.kind && m.name == member.name)
        });
        match entry {
            None => Directive {
                group: group.to_string(),
                ..Directive::default()
            },
            Some(e) => Directive {
                group: group.to_string(),
                listed: true,
                restart: e.restart.as_ref().map(|r| (r.attempt, r.due.0)),
                waiting_for: e.waiting_for.clone(),
                stop: e.stop.clone(),
                reset: e.reset.clone(),
            },
        }
    }

    /// The restart order for `attempt`, if there is one: when it is due.
    pub fn restart_of(&self, attempt: u32) -> Option<Timestamp> {
        self.restart
            .filter(|(a, _)| *a == attempt && attempt > 0)
            .map(|(_, due)| due)
    }
}
