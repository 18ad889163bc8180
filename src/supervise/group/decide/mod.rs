//! A group's decision: from its members' states and its parent's orders to its own status, which
//! carries its orders to its members.

mod budget;
mod crashes;
mod members;
mod orders;
mod result;

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};

use super::view::GroupInput;
use crate::api::{
    AgentGroupStatus, GroupMembership, GroupRestartRecord, MemberKey, MemberKind, MemberStatus,
    RESET_REQUESTED_ANNOTATION,
};
use crate::supervise::pod_name;

/// For this long after a group is created, membership changes make no Event (members applied
/// with the group appear one by one); the condition says it all along.
const SETTLE_SECS: i64 = 10;

/// How many restarts a group's history keeps.
pub const HISTORY_LIMIT: usize = 20;

/// The outcome of a group's decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupPlan {
    /// The group's status: its members' summary and its orders to them.
    pub status: AgentGroupStatus,
    pub events: Vec<GroupEvent>,
    /// Decide again within this, whatever changes before: its budget's window ends then
    /// (counted from the decision's time, which is never later than the clock's).
    pub wake: Option<std::time::Duration>,
}

/// An Event to record on the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEvent {
    pub reason: GroupEventReason,
    pub note: String,
    pub warning: bool,
    /// What it concerns besides the group: the crashed attempt's pod, or the child group that
    /// gave up. (Events about different objects are told apart, not counted as one.)
    pub related: Option<Related>,
}

/// An object an Event on a group concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Related {
    Pod(String),
    Group(String),
}

/// The group's Event reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupEventReason {
    GroupRestart,
    GroupEscalated,
    GroupShutdown,
    MembersResolved,
    Reset,
    /// The group's spend budget is used up: its members shut down until it is not.
    BudgetExhausted,
}

impl GroupEventReason {
    /// Every reason, in declaration order.
    pub const ALL: [GroupEventReason; 6] = [
        GroupEventReason::GroupRestart,
        GroupEventReason::GroupEscalated,
        GroupEventReason::GroupShutdown,
        GroupEventReason::MembersResolved,
        GroupEventReason::Reset,
        GroupEventReason::BudgetExhausted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GroupEventReason::GroupRestart => "GroupRestart",
            GroupEventReason::GroupEscalated => "GroupEscalated",
            GroupEventReason::GroupShutdown => "GroupShutdown",
            GroupEventReason::MembersResolved => "MembersResolved",
            GroupEventReason::Reset => "Reset",
            GroupEventReason::BudgetExhausted => "BudgetExhausted",
        }
    }
}

/// Decides what the group does next. The same input always gives the same plan.
pub fn decide_group(mut input: GroupInput) -> GroupPlan {
    let status = std::mem::take(&mut input.status);
    let now = Timestamp::from_second(input.now.as_second()).unwrap_or(input.now);
    let budget_ordered = status.members.iter().any(|m| {
        m.stop
            .as_ref()
            .is_some_and(|s| s.reason == crate::api::StopReason::Budget)
    });
    let mut d = GroupDecider {
        input: &input,
        now,
        s: status,
        entries: Vec::new(),
        events: Vec::new(),
        budget_ordered,
        wake_at: None,
    };
    d.run();
    d.finish()
}

struct GroupDecider<'a> {
    input: &'a GroupInput,
    now: Timestamp,
    s: AgentGroupStatus,
    /// The new `status.members`, one per spec member, in order.
    entries: Vec<MemberStatus>,
    events: Vec<GroupEvent>,
    /// The members were told to shut down for the budget before this decision (said once).
    budget_ordered: bool,
    /// When to decide again, whatever changes before.
    wake_at: Option<Timestamp>,
}

impl GroupDecider<'_> {
    fn run(&mut self) {
        let input = self.input;
        self.s.observed_generation = Some(input.group.generation);
        self.s.incarnation = self.s.incarnation.max(1);
        self.s.group = input.parent.as_ref().map(|p| GroupMembership {
            name: p.group.clone(),
            handled_reset: self
                .s
                .group
                .as_ref()
                .filter(|g| g.name == p.group)
                .and_then(|g| g.handled_reset.clone()),
        });
        // Orders already given are carried over; the rest is decided anew.
        let mut previous: HashMap<MemberKey, MemberStatus> = std::mem::take(&mut self.s.members)
            .into_iter()
            .map(|m| {
                (
                    MemberKey {
                        kind: m.kind,
                        name: m.name.clone(),
                    },
                    m,
                )
            })
            .collect();
        let mut joined = vec![false; input.members.len()];
        for (i, member) in input.members.iter().enumerate() {
            let carried = previous.remove(&member.key);
            joined[i] = carried.is_none();
            let carried = carried.unwrap_or_else(|| MemberStatus {
                name: member.key.name.clone(),
                kind: member.key.kind,
                phase: None,
                restart_count: 0,
                restart: None,
                waiting_for: None,
                stop: None,
                reset: None,
            });
            self.entries.push(MemberStatus {
                waiting_for: None,
                stop: None,
                ..carried
            });
        }
        self.resolve_members();

        if let Some(parent) = &input.parent {
            let handled = self.s.group.as_ref().and_then(|g| g.handled_reset.clone());
            if let Some(key) = parent.reset.clone().filter(|k| Some(k) != handled.as_ref()) {
                if let Some(g) = self.s.group.as_mut() {
                    g.handled_reset = Some(key.clone());
                }
                self.reset(key, &format!("group {} was reset", parent.group));
            }
            // A stop order wins over a restart order, as it does for an Agent: a parent that
            // took this group's give-up in and gave up itself restarts nothing.
            if let Some(due) = parent
                .restart_of(self.s.incarnation)
                .filter(|_| parent.stop.is_none())
            {
                self.restarted_by_parent(&parent.group, due);
            }
        }
        let request = input
            .group
            .reset_requested
            .clone()
            .filter(|v| Some(v) != self.s.handled_reset_request.as_ref());
        if let Some(value) = request {
            self.s.handled_reset_request = Some(value.clone());
            // Unique per reset handled (a value used again is a new reset): members compare keys.
            let key = format!("{}/{value}/{}", input.group.uid, self.now.as_second());
            self.reset(key, &format!("{RESET_REQUESTED_ANNOTATION}={value}"));
        }

        if self.shut_down() {
            return;
        }
        if self.budget_stop() {
            return;
        }
        if self.halted() {
            return;
        }
        for (i, &joined) in joined.iter().enumerate() {
            let Some(crash) = self.crash_of(i) else {
                continue;
            };
            if self.covered(i, &crash) {
                continue;
            }
            if joined {
                // It crashed before it joined: the strategy applies from its next crash on.
                self.take_in(i, &crash);
                continue;
            }
            self.crashed(i, crash);
            if self.halted() {
                return;
            }
        }
        self.gate();
    }

    // --- Helpers ------------------------------------------------------------------------

    fn push_history(&mut self, record: GroupRestartRecord) {
        self.s.restart_history.insert(0, record);
        self.s.restart_history.truncate(HISTORY_LIMIT);
    }

    fn event(&mut self, reason: GroupEventReason, note: String, warning: bool) {
        self.events.push(GroupEvent {
            reason,
            note,
            warning,
            related: None,
        });
    }

    /// The object a crash of member `i` at `attempt` concerns: its pod, or the child group.
    fn crashed_object(&self, i: usize, attempt: u32) -> Related {
        let key = &self.input.members[i].key;
        match key.kind {
            MemberKind::Agent => Related::Pod(pod_name(&key.name, attempt)),
            MemberKind::AgentGroup => Related::Group(key.name.clone()),
        }
    }

    fn when(&self, due: Timestamp) -> String {
        if due <= self.now {
            " now".to_string()
        } else {
            format!(" at {due}")
        }
    }
}

fn list(names: &[String]) -> String {
    names.join(", ")
}

fn sub(t: Timestamp, d: std::time::Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    t.checked_sub(d).unwrap_or(Timestamp::MIN)
}
