//! The decision's last step: the Ready, breaker and other conditions set from the decided
//! state, and the plan.

use super::{Decider, shutdown_note};
use crate::api::{BreakerState, Phase};
use crate::supervise::conditions;
use crate::supervise::conditions::{CIRCUIT_BREAKER_OPEN, Desired, READY};
use crate::supervise::input::PolicyResolution;
use crate::supervise::plan::Plan;

impl Decider<'_> {
    pub(super) fn finish(mut self) -> Plan {
        let breaker = self.breaker().clone();
        let open = breaker.state == BreakerState::Open;
        let message = match (&breaker.half_open_at, open) {
            (Some(at), true) => format!(
                "opened after {} failures in a row; probe at {}",
                self.s.consecutive_failures, at.0
            ),
            _ => String::new(),
        };
        let outage = self
            .outage_hold
            .clone()
            .filter(|_| self.s.phase == Some(Phase::CircuitOpen));
        let desired = match &outage {
            Some(hold) => Desired {
                type_: CIRCUIT_BREAKER_OPEN,
                status: true,
                reason: "Outage",
                message: hold,
            },
            None => Desired {
                type_: CIRCUIT_BREAKER_OPEN,
                status: open,
                reason: if open {
                    "Tripped"
                } else {
                    breaker.state.as_str()
                },
                message: &message,
            },
        };
        self.set_condition(desired);

        let (ready, reason) = self.ready();
        let previous = conditions::get(&self.s.conditions, READY)
            .map(|c| (c.reason.clone(), c.message.clone()));
        let (reason, message) = match (reason, previous) {
            // A Stopped agent keeps the reason it was stopped for.
            (None, Some(previous)) => previous,
            (None, None) => ("Stopped".to_string(), String::new()),
            (Some(reason), _) => (reason.to_string(), self.ready_message()),
        };
        let desired = Desired {
            type_: READY,
            status: ready,
            reason: &reason,
            message: &message,
        };
        let changed = self.set_condition(desired);
        // What blocks every start is said once, when the agent comes to wait for it.
        if let Some(blocked) = &self.input.agent.blocked
            && changed
            && reason == blocked.reason.as_str()
        {
            self.event(blocked.reason, blocked.message.clone());
        }

        self.plan.status = self.s;
        self.plan
    }

    /// Ready's status and reason; `None` as reason keeps the one already recorded.
    pub(super) fn ready(&self) -> (bool, Option<&'static str>) {
        let pod_ready = self.plan.create_pod.is_none()
            && self.plan.delete_pod.is_none()
            && self
                .input
                .pod
                .as_ref()
                .is_some_and(|p| p.attempt == self.s.attempt && p.ready);
        if self.held.is_some()
            && matches!(
                self.s.phase,
                Some(Phase::Pending | Phase::BackingOff | Phase::CircuitOpen) | None
            )
        {
            return (false, Some("WaitingForGroup"));
        }
        if self.outage_hold.is_some() && self.s.phase == Some(Phase::CircuitOpen) {
            return (false, Some("Outage"));
        }
        match self.s.phase {
            Some(Phase::Running) if pod_ready => (true, Some("PodReady")),
            Some(Phase::Running) => (false, Some("PodNotReady")),
            Some(Phase::Pending | Phase::BackingOff) | None if self.waiting_for_policy() => {
                match &self.input.agent.blocked {
                    // A missing policy is said in its own condition (PolicyResolved).
                    Some(blocked) if self.policy_found() => (false, Some(blocked.reason.as_str())),
                    _ => (false, Some("PolicyNotFound")),
                }
            }
            Some(Phase::Pending) | None => (false, Some("PodPending")),
            Some(Phase::BackingOff) => (false, Some("BackingOff")),
            Some(Phase::CircuitOpen) => (false, Some("CircuitOpen")),
            Some(Phase::Stopped) => (false, self.stop_reason),
            Some(Phase::Shutdown) => (false, Some("Shutdown")),
            Some(Phase::Suspended) => (false, Some("Suspended")),
        }
    }

    fn policy_found(&self) -> bool {
        !matches!(self.input.policy, PolicyResolution::Missing(_))
    }

    /// No pod runs, and none may be created until the named policy exists (or, with
    /// `blocked`, until what blocks it is gone).
    fn waiting_for_policy(&self) -> bool {
        let live = self
            .input
            .pod
            .as_ref()
            .is_some_and(|p| p.attempt == self.s.attempt && p.is_live());
        self.creates_blocked && !live
    }

    pub(super) fn ready_message(&self) -> String {
        let pod = self.s.pod_name.as_deref().unwrap_or("");
        if let (Some(blocked), true) = (&self.input.agent.blocked, self.waiting_for_policy())
            && self.policy_found()
            && matches!(
                self.s.phase,
                Some(Phase::Pending | Phase::BackingOff) | None
            )
        {
            return blocked.message.clone();
        }
        if let (PolicyResolution::Missing(name), true) =
            (&self.input.policy, self.waiting_for_policy())
            && matches!(
                self.s.phase,
                Some(Phase::Pending | Phase::BackingOff) | None
            )
        {
            return format!(
                "RestartPolicy {name} does not exist in this namespace; no pod is started until it does"
            );
        }
        if let Some(hold) = &self.outage_hold
            && self.s.phase == Some(Phase::CircuitOpen)
        {
            return hold.clone();
        }
        if let Some(held) = &self.held
            && matches!(
                self.s.phase,
                Some(Phase::Pending | Phase::BackingOff | Phase::CircuitOpen) | None
            )
        {
            return held.clone();
        }
        match (self.s.phase, self.stop_reason) {
            (Some(Phase::Stopped), Some("GroupGaveUp" | "GroupShutdown")) => self
                .input
                .group
                .as_ref()
                .and_then(|d| d.stop.as_ref())
                .and_then(|s| s.message.clone())
                .unwrap_or_default(),
            (Some(Phase::Stopped), Some("RestartLimitExceeded")) => format!(
                "more than {} restarts within {}; annotate {} to resume",
                self.policy.limits.max_restarts,
                self.policy.limits.window,
                crate::api::RESET_REQUESTED_ANNOTATION
            ),
            (Some(Phase::Stopped), Some("StoppedByRule")) => {
                "a Stop rule matched the last failure".to_string()
            }
            (Some(Phase::Stopped), Some("PermanentFailure")) => format!(
                "the agent said its failure is permanent: {}; annotate {} to resume",
                self.s
                    .last_failure
                    .as_ref()
                    .and_then(|f| f.message.as_deref())
                    .unwrap_or("(no reason given)"),
                crate::api::RESET_REQUESTED_ANNOTATION
            ),
            (Some(Phase::Stopped), _) => "the policy's backoff is Never".to_string(),
            (Some(Phase::BackingOff), _) => match &self.s.next_restart_at {
                Some(at) => format!("restart scheduled at {}", at.0),
                None => String::new(),
            },
            (Some(Phase::CircuitOpen), _) => {
                let probe_at = self
                    .s
                    .circuit_breaker
                    .as_ref()
                    .and_then(|b| b.half_open_at.as_ref());
                match probe_at {
                    Some(at) => format!("circuit breaker open: one probe restart at {}", at.0),
                    None => String::new(),
                }
            }
            (Some(Phase::Shutdown), _) => match &self.s.shutdown {
                Some(shutdown) => shutdown_note(shutdown),
                None => String::new(),
            },
            (Some(Phase::Suspended), _) => "spec.suspend is true".to_string(),
            (Some(Phase::Running | Phase::Pending), _) => format!("pod {pod}"),
            _ => String::new(),
        }
    }
}
