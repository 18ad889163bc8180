//! A member's crash: the group's restart orders for it (and its siblings), or giving up.

use jiff::Timestamp;

use super::{GroupDecider, GroupEventReason, list, sub};
use crate::api::{
    GiveUp, GroupRestartRecord, RESET_REQUESTED_ANNOTATION, RestartOrder, Strategy, Time,
};
use crate::supervise::group::view::{Crash, MemberState};

impl GroupDecider<'_> {
    /// Member `i`'s crash waiting for the group, if any.
    pub(super) fn crash_of(&self, i: usize) -> Option<Crash> {
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
    pub(super) fn covered(&self, i: usize, crash: &Crash) -> bool {
        self.entries[i]
            .restart
            .as_ref()
            .is_some_and(|r| r.attempt >= crash.attempt)
    }

    /// Takes `crash` in without acting on it: an order for member `i` alone, at its own time.
    pub(super) fn take_in(&mut self, i: usize, crash: &Crash) {
        self.entries[i].restart = Some(RestartOrder {
            attempt: crash.attempt,
            due: Time(crash.due.unwrap_or(self.now)),
        });
    }

    /// Member `i` crashed: count it, then restart what the strategy says, or give up.
    pub(super) fn crashed(&mut self, i: usize, crash: Crash) {
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
    pub(super) fn order_restart(
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

    pub(super) fn give_up(&mut self, i: usize, crash: &Crash) {
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
}
