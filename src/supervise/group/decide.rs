//! A group's decision: from its members' states and its parent's orders to its own status, which
//! carries its orders to its members.

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};

use super::membership::Refusal;
use super::view::{Crash, GroupInput, MemberFacts, MemberState};
use super::{ESCALATED, MEMBERS_RESOLVED};
use crate::api::{
    AgentGroupStatus, AutoShutdown, GiveUp, GroupMembership, GroupPhase, GroupRestartRecord,
    GroupTrigger, MemberKey, MemberKind, MemberStatus, RESET_REQUESTED_ANNOTATION, RestartOrder,
    Shutdown, ShutdownType, StartOrder, StopOrder, StopReason, Strategy, Time,
};
use crate::supervise::conditions::{self, Desired, READY};
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
}

impl GroupEventReason {
    /// Every reason, in declaration order.
    pub const ALL: [GroupEventReason; 5] = [
        GroupEventReason::GroupRestart,
        GroupEventReason::GroupEscalated,
        GroupEventReason::GroupShutdown,
        GroupEventReason::MembersResolved,
        GroupEventReason::Reset,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GroupEventReason::GroupRestart => "GroupRestart",
            GroupEventReason::GroupEscalated => "GroupEscalated",
            GroupEventReason::GroupShutdown => "GroupShutdown",
            GroupEventReason::MembersResolved => "MembersResolved",
            GroupEventReason::Reset => "Reset",
        }
    }
}

/// Decides what the group does next. The same input always gives the same plan.
pub fn decide_group(mut input: GroupInput) -> GroupPlan {
    let status = std::mem::take(&mut input.status);
    let now = Timestamp::from_second(input.now.as_second()).unwrap_or(input.now);
    let mut d = GroupDecider {
        input: &input,
        now,
        s: status,
        entries: Vec::new(),
        events: Vec::new(),
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

    // --- Membership ---------------------------------------------------------------------

    fn resolve_members(&mut self) {
        let mut problems: Vec<String> = Vec::new();
        let mut reason = "AllMembersFound";
        for m in &self.input.members {
            let (why, text) = match &m.state {
                MemberState::NotFound => ("NotFound", format!("{} does not exist", m.key)),
                MemberState::Refused(Refusal::Conflict { owner }) => {
                    ("Conflict", format!("{} belongs to group {owner}", m.key))
                }
                MemberState::Refused(Refusal::Cycle) => (
                    "Cycle",
                    format!("{} would make the group contain itself", m.key),
                ),
                MemberState::Agent(_) | MemberState::Group(_) => continue,
            };
            if problems.is_empty() {
                reason = why;
            }
            problems.push(text);
        }
        let ok = problems.is_empty();
        let message = if ok {
            format!("supervising {} member(s)", self.input.members.len())
        } else {
            format!("{}; the other members are supervised", problems.join("; "))
        };
        let desired = Desired {
            type_: MEMBERS_RESOLVED,
            status: ok,
            reason,
            message: &message,
        };
        let before = conditions::get(&self.s.conditions, MEMBERS_RESOLVED)
            .map(|c| (c.status.clone(), c.message.clone()));
        conditions::set(
            &mut self.s.conditions,
            desired,
            self.input.group.generation,
            self.now,
        );
        let changed = before.as_ref().is_none_or(|(status, previous)| {
            (status == "True") != ok || (!ok && previous != &message)
        });
        // A group applied with its members sees them appear one by one: no Event for that.
        let settled = self.now >= self.input.group.created + SignedDuration::from_secs(SETTLE_SECS);
        if changed && settled && (!ok || before.is_some()) {
            self.event(GroupEventReason::MembersResolved, message, !ok);
        }
    }

    // --- Orders from above --------------------------------------------------------------

    /// The parent restarted this group: a new incarnation, with a fresh count, restarting all
    /// its members.
    fn restarted_by_parent(&mut self, parent: &str, due: Timestamp) {
        self.s.incarnation = self.s.incarnation.saturating_add(1);
        self.s.recent_restarts.clear();
        self.s.gave_up = None;
        let all: Vec<usize> = (0..self.input.members.len())
            .filter(|&i| self.eligible(i))
            .collect();
        let names = self.order_restart(&all, None, due);
        self.s.restart_count = self.s.restart_count.saturating_add(1);
        self.push_history(GroupRestartRecord {
            at: Time(self.now),
            member: None,
            reason: Some(format!("restarted by group {parent}")),
            restarted: names.clone(),
            trigger: GroupTrigger::Group,
        });
        let note = format!(
            "Restarted by group {parent}: restarting {}{}",
            list(&names),
            self.when(due)
        );
        self.event(GroupEventReason::GroupRestart, note, false);
    }

    /// A reset: the count and a give-up are cleared, and every member is reset once for `key`.
    fn reset(&mut self, key: String, why: &str) {
        self.s.recent_restarts.clear();
        let resumes = self.s.gave_up.take().is_some();
        for entry in &mut self.entries {
            entry.reset = Some(key.clone());
        }
        let note = if resumes {
            format!("Reset ({why}): the group no longer gives up; its members are reset and resume")
        } else {
            format!("Reset ({why}): restart count cleared; its members are reset")
        };
        self.event(GroupEventReason::Reset, note, false);
    }

    // --- Shutdown and giving up ---------------------------------------------------------

    /// Shut down (by autoShutdown or its parent): every member is told to shut down.
    fn shut_down(&mut self) -> bool {
        if self.s.shutdown.is_none() {
            let from_parent = self.input.parent.as_ref().and_then(|p| {
                p.stop
                    .as_ref()
                    .filter(|s| s.reason == StopReason::Shutdown)
                    .map(|s| (p.group.clone(), s.kind.unwrap_or(ShutdownType::Voluntary)))
            });
            let shutdown = match (from_parent, self.auto_shutdown()) {
                (Some((parent, kind)), _) => Shutdown {
                    kind,
                    reason: Some(format!("group {parent} shut down")),
                    message: None,
                    at: Some(Time(self.now)),
                    source: Some("Group".to_string()),
                },
                (None, Some((member, kind))) => Shutdown {
                    kind,
                    reason: Some(format!("significant member {member} shut down")),
                    message: None,
                    at: Some(Time(self.now)),
                    source: Some("AutoShutdown".to_string()),
                },
                (None, None) => return false,
            };
            let note = format!(
                "Group shut down ({}): shutting down its members",
                shutdown.reason.as_deref().unwrap_or_default()
            );
            self.event(GroupEventReason::GroupShutdown, note, false);
            self.s.shutdown = Some(shutdown);
        }
        let shutdown = self.s.shutdown.clone().expect("set above");
        let message = format!(
            "group {} shut down: {}",
            self.input.group.name,
            shutdown.reason.as_deref().unwrap_or_default()
        );
        for entry in &mut self.entries {
            entry.stop = Some(StopOrder {
                reason: StopReason::Shutdown,
                kind: Some(shutdown.kind),
                message: Some(message.clone()),
            });
        }
        true
    }

    /// The significant member whose own shutdown shuts the group down, and its type.
    fn auto_shutdown(&self) -> Option<(String, ShutdownType)> {
        let own = |m: &MemberFacts| {
            let shutdown = match &m.state {
                MemberState::Agent(a) => a.shutdown.as_ref(),
                MemberState::Group(g) => g.shutdown.as_ref(),
                _ => None,
            };
            shutdown
                .filter(|s| s.source.as_deref() != Some("Group"))
                .map(|s| (m.key.name.clone(), s.kind))
        };
        let significant: Vec<&MemberFacts> = self
            .input
            .members
            .iter()
            .filter(|m| m.significant)
            .collect();
        match self.input.group.spec.auto_shutdown {
            AutoShutdown::Never => None,
            AutoShutdown::AnySignificant => significant.iter().find_map(|m| own(m)),
            AutoShutdown::AllSignificant => {
                let down: Vec<_> = significant.iter().filter_map(|m| own(m)).collect();
                (!down.is_empty() && down.len() == significant.len())
                    .then(|| down.into_iter().last())
                    .flatten()
            }
        }
    }

    /// Given up (itself, or a group above it): every member is told to stop.
    fn halted(&mut self) -> bool {
        let parent_gave_up = self.input.parent.as_ref().and_then(|p| {
            p.stop
                .as_ref()
                .filter(|s| s.reason == StopReason::GaveUp)
                .map(|_| p.group.clone())
        });
        let message = match (&self.s.gave_up, parent_gave_up) {
            (Some(_), _) => format!("group {} gave up", self.input.group.name),
            (None, Some(parent)) => format!("group {parent} gave up"),
            (None, None) => return false,
        };
        for entry in &mut self.entries {
            entry.stop = Some(StopOrder {
                reason: StopReason::GaveUp,
                kind: None,
                message: Some(message.clone()),
            });
        }
        // Crashes not acted on are taken in with the give-up: the members are stopped, and what
        // starts them again (a reset, a restart from above) starts them afresh, without
        // counting those crashes again or restarting the others for them.
        for i in 0..self.input.members.len() {
            if let Some(crash) = self.crash_of(i).filter(|c| !self.covered(i, c)) {
                self.take_in(i, &crash);
            }
        }
        true
    }

    // --- Crashes ------------------------------------------------------------------------

    /// Member `i`'s crash waiting for the group, if any.
    fn crash_of(&self, i: usize) -> Option<Crash> {
        if !self.eligible(i) {
            return None;
        }
        match &self.input.members[i].state {
            MemberState::Agent(a) => a.crash.clone(),
            MemberState::Group(g) => g.crash(),
            _ => None,
        }
    }

    /// Member `i`'s order already covers `crash`: it was taken in.
    fn covered(&self, i: usize, crash: &Crash) -> bool {
        self.entries[i]
            .restart
            .as_ref()
            .is_some_and(|r| r.attempt >= crash.attempt)
    }

    /// Takes `crash` in without acting on it: an order for member `i` alone, at its own time.
    fn take_in(&mut self, i: usize, crash: &Crash) {
        self.entries[i].restart = Some(RestartOrder {
            attempt: crash.attempt,
            due: Time(crash.due.unwrap_or(self.now)),
        });
    }

    /// Member `i` crashed: count it, then restart what the strategy says, or give up.
    fn crashed(&mut self, i: usize, crash: Crash) {
        let spec = &self.input.group.spec;
        let name = self.input.members[i].key.name.clone();
        if crash.counted {
            let window_start = sub(self.now, spec.window.as_std());
            self.s.recent_restarts.retain(|t| t.0 > window_start);
            if self.s.recent_restarts.len() + 1 > spec.max_restarts as usize {
                return self.give_up(i, &crash);
            }
        }
        let affected: Vec<usize> = match spec.strategy {
            Strategy::OneForOne => vec![i],
            Strategy::OneForAll => (0..self.input.members.len())
                .filter(|&j| j == i || self.eligible(j))
                .collect(),
            Strategy::RestForOne => (i..self.input.members.len())
                .filter(|&j| j == i || self.eligible(j))
                .collect(),
        };
        let due = crash.due.unwrap_or(self.now).max(self.now);
        let names = self.order_restart(&affected, Some((i, crash.attempt)), due);
        if crash.counted {
            self.s.recent_restarts.insert(0, Time(self.now));
            self.s
                .recent_restarts
                .truncate(spec.max_restarts as usize + 1);
        }
        self.s.restart_count = self.s.restart_count.saturating_add(1);
        self.push_history(GroupRestartRecord {
            at: Time(self.now),
            member: Some(name.clone()),
            reason: Some(crash.reason.clone()),
            restarted: names.clone(),
            trigger: crash.trigger,
        });
        let others = if names.len() > 1 {
            format!("restarting {}", list(&names))
        } else {
            format!("restarting {name}")
        };
        let note = format!(
            "{} {name} crashed ({}): {others}{} ({} of {} restarts within {})",
            self.input.members[i].key.kind.as_str(),
            crash.reason,
            self.when(due),
            self.s.recent_restarts.len(),
            spec.max_restarts,
            spec.window,
        );
        self.event(GroupEventReason::GroupRestart, note, false);
        let related = self.crashed_object(i, crash.attempt);
        if let Some(event) = self.events.last_mut() {
            event.related = Some(related);
        }
    }

    /// Restart orders for members `which`, due at `due`; `crashed`: the member that crashed and
    /// the attempt its crash ended. Returns the names, in member order.
    fn order_restart(
        &mut self,
        which: &[usize],
        crashed: Option<(usize, u32)>,
        due: Timestamp,
    ) -> Vec<String> {
        let mut names = Vec::new();
        for &j in which {
            let attempt = match crashed {
                Some((i, attempt)) if i == j => attempt,
                _ => self.token(j),
            };
            let entry = &mut self.entries[j];
            // An order for the same attempt not yet carried out keeps the later due time.
            let due = match &entry.restart {
                Some(r) if r.attempt == attempt => r.due.0.max(due),
                _ => due,
            };
            entry.restart = Some(RestartOrder {
                attempt,
                due: Time(due),
            });
            names.push(entry.name.clone());
        }
        names
    }

    fn give_up(&mut self, i: usize, crash: &Crash) {
        let spec = &self.input.group.spec;
        let name = self.input.members[i].key.name.clone();
        // The crash is taken in: it made the group give up.
        self.take_in(i, crash);
        self.s.gave_up = Some(GiveUp {
            at: Time(self.now),
            incarnation: self.s.incarnation,
            member: Some(name.clone()),
        });
        let next = match &self.input.parent {
            Some(parent) => format!("escalating to group {}", parent.group),
            None => format!(
                "annotate the group with {RESET_REQUESTED_ANNOTATION}=<new value> to resume"
            ),
        };
        let note = format!(
            "{name} crashed ({}) with {} restarts within {} already (maxRestarts {}): giving up, stopping every member; {next}",
            crash.reason,
            self.s.recent_restarts.len(),
            spec.window,
            spec.max_restarts,
        );
        self.event(GroupEventReason::GroupEscalated, note, true);
        let related = self.crashed_object(i, crash.attempt);
        if let Some(event) = self.events.last_mut() {
            event.related = Some(related);
        }
    }

    // --- Start order --------------------------------------------------------------------

    /// Under `Sequential`, a member not running (or not yet created) holds back every member
    /// after it; the group's own start order from its parent holds back all of its members.
    fn gate(&mut self) {
        let mut blocker = self.input.parent.as_ref().and_then(|p| {
            if !p.listed {
                Some(p.group.clone())
            } else {
                p.waiting_for.clone()
            }
        });
        let sequential = self.input.group.spec.start_order == StartOrder::Sequential;
        for i in 0..self.input.members.len() {
            // A member yet to be created comes first all the same; one out of the group's
            // restarts (suspended, shut down, another group's) holds back no one.
            let missing = self.input.members[i].state == MemberState::NotFound;
            if !(self.eligible(i) || missing) || self.up(i) {
                continue;
            }
            self.entries[i].waiting_for = blocker.clone();
            if sequential && blocker.is_none() {
                blocker = Some(self.input.members[i].key.name.clone());
            }
        }
    }

    // --- Members ------------------------------------------------------------------------

    /// Supervised, and not out of the group's restarts: suspended, shut down, or given up on by
    /// its own policy (a `Stop` rule, a `Never` backoff, its restart limit) until it is reset.
    fn eligible(&self, i: usize) -> bool {
        match &self.input.members[i].state {
            MemberState::Agent(a) => !a.suspended && a.shutdown.is_none() && !a.given_up,
            MemberState::Group(g) => g.shutdown.is_none(),
            MemberState::NotFound | MemberState::Refused(_) => false,
        }
    }

    /// Member `i`'s current attempt (a group's incarnation).
    fn token(&self, i: usize) -> u32 {
        match &self.input.members[i].state {
            MemberState::Agent(a) => a.attempt,
            MemberState::Group(g) => g.incarnation,
            _ => 0,
        }
    }

    /// Running (and ready), with no restart order pending.
    fn up(&self, i: usize) -> bool {
        let pending = self.entries[i]
            .restart
            .as_ref()
            .is_some_and(|r| r.attempt >= self.token(i));
        !pending
            && match &self.input.members[i].state {
                MemberState::Agent(a) => a.up(),
                MemberState::Group(g) => g.phase == Some(GroupPhase::Running),
                _ => false,
            }
    }

    // --- The result ---------------------------------------------------------------------

    fn finish(mut self) -> GroupPlan {
        let input = self.input;
        let mut up = 0;
        let mut down: Vec<String> = Vec::new();
        let mut pending = false;
        for (i, m) in input.members.iter().enumerate() {
            let (phase, restarts) = match &m.state {
                MemberState::Agent(a) => (a.phase.map(|p| p.as_str()), a.restart_count),
                MemberState::Group(g) => (g.phase.map(|p| p.as_str()), g.restart_count),
                MemberState::NotFound => (Some("NotFound"), 0),
                MemberState::Refused(Refusal::Conflict { .. }) => (Some("Conflict"), 0),
                MemberState::Refused(Refusal::Cycle) => (Some("Cycle"), 0),
            };
            let entry = &mut self.entries[i];
            entry.phase = phase.map(str::to_string);
            entry.restart_count = restarts;
            let is_up = self.up(i);
            if is_up {
                up += 1;
            } else {
                down.push(format!(
                    "{} ({})",
                    m.key.name,
                    phase.unwrap_or("not started")
                ));
            }
            pending |= self.eligible(i)
                && self.entries[i]
                    .restart
                    .as_ref()
                    .is_some_and(|r| r.attempt >= self.token(i));
        }
        let total = input.members.len();
        self.s.ready = Some(format!("{up}/{total}"));
        let escalated_by_parent = input.parent.as_ref().and_then(|p| {
            p.stop
                .as_ref()
                .filter(|s| s.reason == StopReason::GaveUp)
                .map(|_| p.group.clone())
        });
        self.s.phase = Some(if self.s.shutdown.is_some() {
            GroupPhase::Shutdown
        } else if self.s.gave_up.is_some() || escalated_by_parent.is_some() {
            GroupPhase::Escalated
        } else if pending {
            GroupPhase::Restarting
        } else if up == total {
            GroupPhase::Running
        } else {
            GroupPhase::Starting
        });

        let generation = input.group.generation;
        let ready_message = if down.is_empty() {
            format!("all {total} member(s) running")
        } else {
            format!("not running: {}", down.join(", "))
        };
        let desired = Desired {
            type_: READY,
            status: down.is_empty(),
            reason: if down.is_empty() {
                "AllMembersRunning"
            } else {
                "MembersNotRunning"
            },
            message: &ready_message,
        };
        conditions::set(&mut self.s.conditions, desired, generation, self.now);

        let (escalated, reason, message) = match (&self.s.gave_up, &escalated_by_parent) {
            (Some(g), _) => (
                true,
                "GaveUp",
                format!(
                    "more than {} restarts within {}{}",
                    input.group.spec.max_restarts,
                    input.group.spec.window,
                    g.member
                        .as_deref()
                        .map(|m| format!(" ({m} crashed last)"))
                        .unwrap_or_default()
                ),
            ),
            (None, Some(parent)) => (
                true,
                "ParentGaveUp",
                format!("group {parent} gave up: this group's members are stopped"),
            ),
            (None, None) => (
                false,
                "WithinIntensity",
                format!(
                    "{} of at most {} restarts within {}",
                    self.s.recent_restarts.len(),
                    input.group.spec.max_restarts,
                    input.group.spec.window
                ),
            ),
        };
        let desired = Desired {
            type_: ESCALATED,
            status: escalated,
            reason,
            message: &message,
        };
        conditions::set(&mut self.s.conditions, desired, generation, self.now);

        self.s.members = self.entries;
        GroupPlan {
            status: self.s,
            events: self.events,
        }
    }

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
