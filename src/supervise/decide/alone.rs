//! Leaving the agent alone: a shutdown recorded and respected, a missing policy, a suspend;
//! and a reset.

use super::{Decider, shutdown_note};
use crate::api::{
    CircuitBreakerStatus, FailureClass, Phase, Shutdown, ShutdownType, Time, Trigger,
};
use crate::supervise::classify::{self, Ending, Liveness, Verdict};
use crate::supervise::conditions::{Desired, POLICY_RESOLVED};
use crate::supervise::input::PolicyResolution;
use crate::supervise::plan::EventReason;

impl Decider<'_> {
    /// A shutdown is set, by anyone: no pod is created or deleted, nothing is counted.
    pub(super) fn respect_shutdown(&mut self) {
        self.complete_own_shutdown();
        if self.s.phase != Some(Phase::Shutdown) {
            let note = shutdown_note(self.s.shutdown.as_ref().expect("checked by the caller"));
            self.event(EventReason::ShutdownRespected, note);
        }
        self.s.phase = Some(Phase::Shutdown);
        self.s.next_restart_at = None;
    }

    /// Sets `PolicyResolved`. False when the named policy is missing: then no pod is created.
    pub(super) fn resolve_policy(&mut self) -> bool {
        let (ok, reason, message) = match &self.input.policy {
            PolicyResolution::Named(name, policy) => {
                self.policy = policy;
                (true, "Found", format!("using RestartPolicy {name}"))
            }
            PolicyResolution::NamespaceDefault(policy) => {
                self.policy = policy;
                (
                    true,
                    "NamespaceDefault",
                    "using the namespace's RestartPolicy default".to_string(),
                )
            }
            PolicyResolution::BuiltIn => (
                true,
                "BuiltIn",
                "using the built-in restart policy".to_string(),
            ),
            PolicyResolution::Missing(name) => (
                false,
                "PolicyNotFound",
                format!(
                    "RestartPolicy {name} does not exist in this namespace; no pod is started until it does"
                ),
            ),
        };
        let desired = Desired {
            type_: POLICY_RESOLVED,
            status: ok,
            reason,
            message: &message,
        };
        if self.set_condition(desired) && !ok {
            self.event(EventReason::PolicyNotFound, message);
        }
        ok
    }

    pub(super) fn suspend(&mut self) {
        let live = self.current_pod().filter(|p| p.is_live());
        if let Some(pod) = live {
            self.plan.delete_pod = Some(pod.name.clone());
        }
        if self.s.phase != Some(Phase::Suspended) {
            let note = match live {
                Some(pod) => format!("Suspended: stopping pod {}", pod.name),
                None => "Suspended: no pod will be started until spec.suspend is false".to_string(),
            };
            self.event(EventReason::Suspended, note);
        }
        self.s.phase = Some(Phase::Suspended);
        self.s.next_restart_at = None;
    }

    pub(super) fn reset(&mut self) {
        self.s.consecutive_failures = 0;
        self.s.recent_restarts.clear();
        *self.breaker() = CircuitBreakerStatus::default();
        self.clear_poison();
        let resumes = matches!(self.s.phase, Some(Phase::Stopped | Phase::CircuitOpen));
        if resumes {
            // Restart now, through the BackingOff path.
            self.s.phase = Some(Phase::BackingOff);
            self.s.next_restart_at = Some(Time(self.now));
            if self
                .s
                .restart_history
                .first()
                .is_none_or(|r| r.restarted_at.is_some())
            {
                let record = self.record(Trigger::Manual);
                self.push_history(record);
            }
        }
        let note = if resumes {
            "Reset: circuit breaker closed, failure count cleared; restarting now"
        } else {
            "Reset: circuit breaker closed, failure count cleared"
        };
        self.event(EventReason::Reset, note.to_string());
    }

    pub(super) fn record_shutdown(&mut self, kind: ShutdownType, source: &str, ending: &Ending) {
        let from_message = ending.shutdown.as_ref();
        let shutdown = Shutdown {
            kind,
            reason: from_message
                .and_then(|r| r.reason.clone())
                .or_else(|| Some(ending.reason.to_string())),
            message: from_message
                .and_then(|r| r.message.clone())
                .or_else(|| ending.message.clone()),
            at: Some(Time(self.now)),
            source: Some(source.to_string()),
        };
        self.event(EventReason::ShutdownRespected, shutdown_note(&shutdown));
        self.s.shutdown = Some(shutdown.clone());
        self.plan.record_shutdown = Some(shutdown);
        self.s.phase = Some(Phase::Shutdown);
        self.s.next_restart_at = None;
    }

    /// A shutdown the operator recorded (from a termination message or a rule) is written in two
    /// steps: the field first, the rest of the status after. If the second was lost, the ended
    /// attempt is recorded now, as that decision did.
    pub(super) fn complete_own_shutdown(&mut self) {
        let own =
            self.s.shutdown.as_ref().is_some_and(|s| {
                matches!(s.source.as_deref(), Some("TerminationMessage" | "Rule"))
            });
        if !own || self.s.phase == Some(Phase::Shutdown) || self.s.attempt == 0 {
            return;
        }
        let Some(pod) = self.current_pod().filter(|p| p.attempt == self.s.attempt) else {
            return;
        };
        let liveness = Liveness {
            heartbeat: None,
            lease: None,
        };
        if let Verdict::Ended { ending, .. } =
            classify::classify(pod, std::time::Duration::MAX, liveness, self.now)
        {
            let (failure, _) = self.failure_of(&ending, FailureClass::Shutdown);
            self.s.last_failure = Some(failure);
        }
    }
}
