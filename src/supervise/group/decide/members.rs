//! Who the members are, which of them the group supervises, and the order they start in.

use jiff::SignedDuration;

use super::{GroupDecider, GroupEventReason, SETTLE_SECS};
use crate::api::{GroupPhase, StartOrder};
use crate::supervise::conditions::{self, Desired};
use crate::supervise::group::MEMBERS_RESOLVED;
use crate::supervise::group::membership::Refusal;
use crate::supervise::group::view::MemberState;

impl GroupDecider<'_> {
    pub(super) fn resolve_members(&mut self) {
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

    // --- Start order --------------------------------------------------------------------

    /// Under `Sequential`, a member not running (or not yet created) holds back every member
    /// after it; the group's own start order from its parent holds back all of its members.
    pub(super) fn gate(&mut self) {
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
    pub(super) fn eligible(&self, i: usize) -> bool {
        match &self.input.members[i].state {
            MemberState::Agent(a) => !a.suspended && a.shutdown.is_none() && !a.given_up,
            MemberState::Group(g) => g.shutdown.is_none(),
            MemberState::NotFound | MemberState::Refused(_) => false,
        }
    }

    /// Member `i`'s current attempt (a group's incarnation).
    pub(super) fn token(&self, i: usize) -> u32 {
        match &self.input.members[i].state {
            MemberState::Agent(a) => a.attempt,
            MemberState::Group(g) => g.incarnation,
            _ => 0,
        }
    }

    /// Running (and ready), with no restart order pending.
    pub(super) fn up(&self, i: usize) -> bool {
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
}
