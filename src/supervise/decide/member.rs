//! An agent that belongs to an AgentGroup: it obeys its entry in the group's status. The group
//! decides who else restarts; the agent's own policy still decides what each of its failures is
//! and when it restarts.

use super::{Decider, shutdown_note, span};
use crate::api::{Phase, Shutdown, ShutdownType, Time, Trigger};
use crate::api::{StopOrder, StopReason};
use crate::supervise::conditions::READY;
use crate::supervise::input::PodFacts;
use crate::supervise::plan::EventReason;
use crate::supervise::{classify, conditions};

impl<'a> Decider<'a> {
    /// A reset the group ordered (its own reset, or one above it) is applied once.
    pub(super) fn group_reset(&mut self) {
        let Some(d) = &self.input.group else {
            return;
        };
        let handled = self.s.group.as_ref().and_then(|g| g.handled_reset.as_ref());
        let Some(key) = d.reset.as_ref().filter(|k| Some(*k) != handled) else {
            return;
        };
        if let Some(g) = self.s.group.as_mut() {
            g.handled_reset = Some(key.clone());
        }
        self.reset();
    }

    /// Carries out the group's stop and restart orders. True when the decision is complete.
    pub(super) fn group_orders(&mut self, pod: Option<&'a PodFacts>) -> bool {
        let Some(d) = &self.input.group else {
            return false;
        };
        let live = pod.filter(|p| p.is_live());
        if let Some(stop) = &d.stop {
            self.group_stop(stop, live);
            return true;
        }
        let Some(due) = d.restart_of(self.s.attempt) else {
            return self.first_start_ordered(live.is_some());
        };
        match self.s.phase {
            Some(Phase::Pending | Phase::Running) if live.is_some() => {
                // Stopped for a group restart: recorded first, and counted toward nothing.
                let pod = live.expect("matched");
                let mut record = self.record(Trigger::Group);
                record.backoff = Some(span(self.now, due.max(self.now)));
                self.push_history(record);
                self.s.phase = Some(Phase::BackingOff);
                self.s.next_restart_at = Some(Time(due.max(self.now)));
                self.plan.delete_pod = Some(pod.name.clone());
                let note = format!(
                    "Group {} restarts it: stopping pod {}; starting again{}",
                    d.group,
                    pod.name,
                    if due > self.now {
                        format!(" at {due}")
                    } else {
                        " now".to_string()
                    }
                );
                self.event(EventReason::RestartScheduled, note);
                self.requeue(due);
                true
            }
            Some(Phase::Stopped) if live.is_none() => {
                // Given up on (by its own policy or its group), and restarted by the group.
                if self
                    .s
                    .restart_history
                    .first()
                    .is_none_or(|r| r.restarted_at.is_some())
                {
                    self.push_history(self.record(Trigger::Group));
                }
                self.s.phase = Some(Phase::BackingOff);
                self.s.next_restart_at = Some(Time(due.max(self.now)));
                false
            }
            Some(Phase::BackingOff) => {
                let own = self.s.next_restart_at.as_ref().map_or(self.now, |t| t.0);
                self.s.next_restart_at = Some(Time(own.max(due)));
                false
            }
            _ => false,
        }
    }

    /// An order for attempt 0: the group restarts a member that never started (stopped by its
    /// group before its first pod, or still held by the start order). No attempt ends, so
    /// nothing is recorded: it is a first start, once the order is due. True when the decision
    /// is complete.
    fn first_start_ordered(&mut self, live: bool) -> bool {
        let Some(d) = &self.input.group else {
            return false;
        };
        let Some((0, due)) = d.restart else {
            return false;
        };
        let never_started = self.s.attempt == 0
            && !live
            && matches!(self.s.phase, Some(Phase::Stopped | Phase::Pending) | None);
        if !never_started {
            return false;
        }
        self.s.phase = Some(Phase::Pending);
        if due > self.now {
            self.requeue(due);
            self.held = Some(format!("group {} restarts it at {due}", d.group));
            return true;
        }
        false
    }

    /// The group gave up (stop) or shut down (stop, then record the shutdown).
    fn group_stop(&mut self, stop: &StopOrder, live: Option<&PodFacts>) {
        let group = self
            .input
            .group
            .as_ref()
            .map(|d| d.group.clone())
            .unwrap_or_default();
        let why = stop
            .message
            .clone()
            .unwrap_or_else(|| format!("group {group} stopped it"));
        if let Some(pod) = live {
            self.plan.delete_pod = Some(pod.name.clone());
        }
        match (stop.reason, live) {
            (StopReason::Shutdown | StopReason::Budget, None) => {
                // A budget's shutdown is lifted when the group's budget allows (`budget`).
                let source = match stop.reason {
                    StopReason::Budget => super::budget::GROUP_BUDGET_SOURCE,
                    _ => "Group",
                };
                let shutdown = Shutdown {
                    kind: stop.kind.unwrap_or(ShutdownType::Voluntary),
                    reason: Some(classify::truncate_to(why, classify::REASON_LIMIT)),
                    message: None,
                    at: Some(Time(self.now)),
                    source: Some(source.to_string()),
                };
                self.event(EventReason::GroupShutdown, shutdown_note(&shutdown));
                self.s.shutdown = Some(shutdown.clone());
                self.plan.record_shutdown = Some(shutdown);
                self.s.phase = Some(Phase::Shutdown);
                self.s.next_restart_at = None;
            }
            (reason, _) => {
                let (event, stop_reason) = match reason {
                    StopReason::GaveUp => (EventReason::GroupGaveUp, "GroupGaveUp"),
                    StopReason::Shutdown | StopReason::Budget => {
                        (EventReason::GroupShutdown, "GroupShutdown")
                    }
                };
                if self.s.phase != Some(Phase::Stopped) || self.stopped_for() != Some(stop_reason) {
                    let note = match live {
                        Some(pod) => format!("{why}: stopping pod {}", pod.name),
                        None => format!("{why}: no pod is started"),
                    };
                    self.event(event, note);
                }
                self.stop(stop_reason);
            }
        }
    }

    /// Why a Stopped agent was stopped, as its Ready condition says.
    fn stopped_for(&self) -> Option<&str> {
        conditions::get(&self.s.conditions, READY).map(|c| c.reason.as_str())
    }

    /// Whether the agent's group holds back its next pod; if so, why (for the Ready condition)
    /// and, when the hold ends at a known time, a requeue for it.
    pub(super) fn group_holds(&mut self) -> bool {
        let Some(d) = &self.input.group else {
            return false;
        };
        let order = d.restart_of(self.s.attempt);
        let crash_pending = self.s.attempt > 0
            && (self.s.phase == Some(Phase::CircuitOpen)
                || self.s.restart_history.first().is_some_and(|r| {
                    r.restarted_at.is_none()
                        && r.attempt == self.s.attempt
                        && matches!(
                            r.trigger,
                            Trigger::Failure
                                | Trigger::HeartbeatLost
                                | Trigger::Disruption
                                | Trigger::RetryAfter
                                | Trigger::Outage
                        )
                }));
        let why = if !d.listed {
            format!("waiting for group {} to take it in", d.group)
        } else if crash_pending && order.is_none() {
            format!("waiting for group {} to act on the failure", d.group)
        } else if let Some(due) = order.filter(|due| *due > self.now) {
            self.requeue(due);
            format!("group {} restarts it at {due}", d.group)
        } else if let Some(member) = &d.waiting_for {
            format!(
                "waiting for {member} to be running (group {} starts its members in order)",
                d.group
            )
        } else {
            return false;
        };
        self.held = Some(why);
        true
    }
}
