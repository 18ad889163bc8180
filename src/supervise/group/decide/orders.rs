//! Orders from above (a parent's restart, a reset) and stops: shutting down and giving up.

use jiff::Timestamp;

use super::{GroupDecider, GroupEventReason, list};
use crate::api::{
    AutoShutdown, GroupRestartRecord, GroupTrigger, Shutdown, ShutdownType, StopOrder, StopReason,
    Time,
};
use crate::supervise::group::view::{MemberFacts, MemberState};

impl GroupDecider<'_> {
    /// The parent restarted this group: a new incarnation, with a fresh count, restarting all
    /// its members.
    pub(super) fn restarted_by_parent(&mut self, parent: &str, due: Timestamp) {
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
    pub(super) fn reset(&mut self, key: String, why: &str) {
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
    pub(super) fn shut_down(&mut self) -> bool {
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
    pub(super) fn auto_shutdown(&self) -> Option<(String, ShutdownType)> {
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
    pub(super) fn halted(&mut self) -> bool {
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
}
