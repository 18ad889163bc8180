//! An agent under its policy's outage breaker: a failure an outage is open for holds its
//! restart (phase `CircuitOpen`, reason `Outage`) instead of backing off alone; the hold ends
//! when the outage does, or when the policy picks this agent as its probe. A held restart
//! counts toward no limit and not toward the breaker.

use super::{Decider, span};
use crate::api::{FailureClass, Phase, RestartRecord, Time, Trigger};
use crate::api::{Outage, OutageState};
use crate::supervise::classify::Ending;
use crate::supervise::input::PolicyResolution;
use crate::supervise::plan::EventReason;

impl<'a> Decider<'a> {
    /// The open outage of this agent's policy for `fingerprint`.
    fn outage(&self, fingerprint: Option<&str>) -> Option<&'a Outage> {
        let fingerprint = fingerprint?;
        self.input
            .outages
            .iter()
            .find(|o| o.fingerprint == fingerprint)
    }

    fn policy_name(&self) -> &str {
        match &self.input.policy {
            PolicyResolution::Named(name, _) | PolicyResolution::Missing(name) => name,
            PolicyResolution::NamespaceDefault(_) | PolicyResolution::BuiltIn => "default",
        }
    }

    /// A failure that would count, while an outage for it is open: its restart is held instead.
    /// True when it was.
    pub(super) fn hold_failure(&mut self, ending: &Ending, record: &mut RestartRecord) -> bool {
        let Some(outage) = self.outage(record.fingerprint.as_deref()) else {
            return false;
        };
        let outcome = format!(
            "restart held: RestartPolicy {} has an open outage for this failure (fingerprint {})",
            self.policy_name(),
            outage.fingerprint
        );
        self.crashed(ending, &outcome);
        record.trigger = Trigger::Outage;
        record.backoff = None;
        self.push_history(record.clone());
        self.enter_hold(outage);
        true
    }

    /// A restart scheduled for a failure that an outage has since opened for: held instead, and
    /// the failure no longer counts. True when it was.
    pub(super) fn hold_pending(&mut self) -> bool {
        let pending = self.s.restart_history.first().filter(|r| {
            r.restarted_at.is_none()
                && r.class == Some(FailureClass::Transient)
                && matches!(r.trigger, Trigger::Failure | Trigger::HeartbeatLost)
        });
        let Some(outage) = pending.and_then(|r| self.outage(r.fingerprint.as_deref())) else {
            return false;
        };
        let mut resumed = None;
        if let Some(record) = self.s.restart_history.first_mut() {
            record.trigger = Trigger::Outage;
            record.backoff = None;
            resumed = record.checkpoint.clone();
        }
        self.s.consecutive_failures = self.s.consecutive_failures.saturating_sub(1);
        self.undo_failed_resume(resumed.as_deref());
        let note = format!(
            "Restart held: RestartPolicy {} declared an outage for this failure (fingerprint {}); it restarts when the outage ends",
            self.policy_name(),
            outage.fingerprint
        );
        self.event(EventReason::RestartScheduled, note);
        self.enter_hold(outage);
        true
    }

    fn enter_hold(&mut self, outage: &Outage) {
        self.s.phase = Some(Phase::CircuitOpen);
        self.s.next_restart_at = None;
        self.outage_hold = Some(self.hold_message(outage));
    }

    /// The restart held for an outage, if this agent's is: its record's fingerprint.
    fn held_for(&self) -> Option<String> {
        self.s
            .restart_history
            .first()
            .filter(|r| r.restarted_at.is_none() && r.trigger == Trigger::Outage)
            .map(|r| r.fingerprint.clone().unwrap_or_default())
    }

    /// A held agent: it stays held (true), or is let go — the outage ended, it is the probe, or
    /// someone asked for a restart — and restarts now (false, with the restart decided).
    pub(super) fn held(&mut self, manual: bool) -> Option<bool> {
        let fingerprint = self.held_for()?;
        let outage = self.outage(Some(&fingerprint));
        let probe = outage.is_some_and(|o| {
            o.state == OutageState::Probing
                && o.probe_agent.as_deref() == Some(self.input.agent.name.as_str())
                && o.probe_attempt == Some(self.s.attempt)
        });
        if let Some(outage) = outage.filter(|_| !probe && !manual) {
            self.outage_hold = Some(self.hold_message(outage));
            return Some(true);
        }
        if let Some(record) = self.s.restart_history.first_mut() {
            let waited = record.failed_at.as_ref().map(|t| span(t.0, self.now));
            record.backoff = waited;
        }
        self.s.phase = Some(Phase::BackingOff);
        self.s.next_restart_at = Some(Time(self.now));
        self.manual_event(manual);
        self.start_next_attempt();
        if probe && self.plan.create_pod.is_some() {
            let note = format!(
                "Restarted as the probe of RestartPolicy {}'s outage {fingerprint}: if it runs, the outage ends",
                self.policy_name()
            );
            self.event(EventReason::RestartScheduled, note);
        }
        Some(false)
    }

    /// The breaker's probe is due, but its failure has an open outage: the probe waits for the
    /// outage's own. True when it does.
    pub(super) fn probe_held(&mut self) -> bool {
        let fingerprint = self
            .s
            .restart_history
            .first()
            .filter(|r| r.restarted_at.is_none())
            .and_then(|r| r.fingerprint.clone());
        match self.outage(fingerprint.as_deref()) {
            Some(outage) => {
                self.outage_hold = Some(self.hold_message(outage));
                true
            }
            None => false,
        }
    }

    fn hold_message(&self, outage: &Outage) -> String {
        let next = match (&outage.state, &outage.probe_agent, &outage.next_probe_at) {
            (OutageState::Probing, Some(agent), _) => format!("agent {agent} is probing"),
            (_, _, Some(at)) => format!("next probe at {}", at.0),
            _ => "a probe is being chosen".to_string(),
        };
        format!(
            "held by RestartPolicy {}'s outage {} ({}) since {}; {next}; it restarts when the outage ends",
            self.policy_name(),
            outage.fingerprint,
            outage.reason,
            outage.since.0
        )
    }
}
