//! The result: the group's phase, conditions and Events from what was decided.

use super::{GroupDecider, GroupPlan};
use crate::api::{GroupPhase, StopReason};
use crate::supervise::conditions::{self, Desired, READY};
use crate::supervise::group::ESCALATED;
use crate::supervise::group::membership::Refusal;
use crate::supervise::group::view::MemberState;

impl GroupDecider<'_> {
    pub(super) fn finish(mut self) -> GroupPlan {
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
            wake: self.wake_at.map(|at| {
                let left = at.duration_since(self.now);
                left.max(jiff::SignedDuration::ZERO).unsigned_abs()
            }),
        }
    }
}
