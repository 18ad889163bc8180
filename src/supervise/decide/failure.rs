//! A failure's consequences: rules, limits, the breaker, the backoff, or a shutdown.

use std::sync::Arc;

use jiff::Timestamp;

use super::{Decider, ceil_second, quoted, span, sub, whole_second};
use crate::api::{
    BreakerState, CircuitBreakerStatus, Duration, Failure, FailureClass, FailureReason, Phase,
    RestartRecord, RuleAction, ShutdownType, Time, Trigger,
};
use crate::supervise::classify::{Ending, Liveness, Verdict, add};
use crate::supervise::input::PodFacts;
use crate::supervise::plan::{Event, EventReason};
use crate::supervise::{backoff, classify, rules};

impl Decider<'_> {
    /// Records how the current attempt ended and decides what follows. `kill`: the pod is still
    /// live and must be deleted.
    pub(super) fn fail(&mut self, ending: Ending, kill: Option<&PodFacts>) {
        if let Some(pod) = kill {
            self.plan.delete_pod = Some(pod.name.clone());
        }
        // Where it got to (on its Lease, and in its last words) counts before its end is judged.
        self.take_lease_reports();
        self.take_reports(&ending.reported);
        let (class, shutdown) = match &ending.shutdown {
            Some(request) => (
                FailureClass::Shutdown,
                Some((request.kind, "TerminationMessage")),
            ),
            // The agent knows no restart can help (a missing key, a task that cannot be done).
            None if ending.permanent => (FailureClass::Permanent, None),
            // The agent asked to be restarted later: it is fine, the world is not.
            None if ending.retry_after.is_some() => (FailureClass::Transient, None),
            None => match rules::action_for(&self.policy.rules, ending.reason, ending.exit_code) {
                RuleAction::Restart => (FailureClass::Transient, None),
                RuleAction::Ignore => (FailureClass::Disruption, None),
                RuleAction::Stop => (FailureClass::Permanent, None),
                RuleAction::VoluntaryShutdown => (
                    FailureClass::Shutdown,
                    Some((ShutdownType::Voluntary, "Rule")),
                ),
                RuleAction::EconomicShutdown => (
                    FailureClass::Shutdown,
                    Some((ShutdownType::Economic, "Rule")),
                ),
            },
        };
        let (failure, ended_at) = self.failure_of(&ending, class);
        let (ran_for, message) = (failure.ran_for, failure.message.clone());
        let fingerprint = failure.fingerprint.clone();
        self.s.last_failure = Some(failure);
        let trigger = match (ending.reason, class) {
            (FailureReason::HeartbeatLost, _) => Trigger::HeartbeatLost,
            (_, FailureClass::Disruption) => Trigger::Disruption,
            _ => Trigger::Failure,
        };
        let mut record = self.record(trigger);
        record.failed_at = Some(Time(ended_at));
        record.reason = Some(ending.reason);
        record.class = Some(class);
        record.exit_code = ending.exit_code;
        record.signal = ending.signal;
        record.message = message;
        record.ran_for = ran_for;
        record.fingerprint = fingerprint;
        record.checkpoint = self.s.resumed_from.clone();
        record.progress = self.s.progress.as_ref().map(|p| p.value);

        match (class, shutdown) {
            (_, Some((kind, source))) => self.record_shutdown(kind, source, &ending),
            // What it reported spending used the budget up: no restart, whatever else holds.
            (_, None) if self.budget_spent() => {
                self.crashed(&ending, "its spend budget is used up: not restarting");
                self.push_history(record);
                self.enforce_budget();
            }
            (FailureClass::Permanent, _) if ending.permanent => {
                self.crashed(
                    &ending,
                    "the agent said its failure is permanent: not restarting",
                );
                self.stop("PermanentFailure");
            }
            (_, None) if ending.retry_after.is_some() => {
                let retry = ending.retry_after.expect("matched");
                self.retry_later(&ending, record, retry, ended_at);
            }
            (FailureClass::Permanent, _) => {
                self.crashed(&ending, "a Stop rule matched: not restarting");
                self.stop("StoppedByRule");
            }
            (FailureClass::Disruption, _) => {
                record.backoff = Some(Duration::ZERO);
                self.restart_now(record);
            }
            _ if trigger != Trigger::Disruption && self.hold_failure(&ending, &mut record) => {}
            _ => self.counted_failure(&ending, record, ran_for),
        }
    }

    /// The attempt's failure record for `ending` classed `class`, and when it ended.
    pub(super) fn failure_of(&self, ending: &Ending, class: FailureClass) -> (Failure, Timestamp) {
        let ended_at = ending
            .finished_at
            .map_or(self.now, whole_second)
            .min(self.now);
        let failure = Failure {
            time: Time(ended_at),
            reason: ending.reason,
            class,
            exit_code: ending.exit_code,
            signal: ending.signal,
            // Shared by lastFailure and the history record: one copy of up to 1 KiB.
            message: ending.message.as_deref().map(Arc::from),
            container: ending.container.clone(),
            pod_name: self.s.pod_name.clone(),
            ran_for: ending.started_at.map(|started| span(started, ended_at)),
            fingerprint: Some(self.fingerprint_of(ending)),
        };
        (failure, ended_at)
    }

    /// The fingerprint of `ending`, with this agent's own names taken out of its message.
    pub(super) fn fingerprint_of(&self, ending: &Ending) -> String {
        let pod = self.s.pod_name.as_deref().unwrap_or_default();
        crate::supervise::fingerprint::fingerprint(
            ending.reason,
            ending.exit_code,
            ending.message.as_deref(),
            &[pod, &self.input.agent.name],
        )
    }

    /// A failure that counts: toward the restart limit, the breaker and the backoff.
    pub(super) fn counted_failure(
        &mut self,
        ending: &Ending,
        mut record: RestartRecord,
        ran_for: Option<Duration>,
    ) {
        // Healthy for resetAfter, and (when the policy requires it) getting somewhere.
        let healthy = ran_for.is_some_and(|r| r >= self.policy.reset_after)
            && ending.started_at.is_some_and(|s| self.reset_earned(s));
        self.failed_resume(record.checkpoint.as_deref(), healthy);
        if healthy {
            // It had been healthy for resetAfter: this failure starts a new count.
            self.s.consecutive_failures = 0;
            if self.breaker().state == BreakerState::HalfOpen {
                self.close_breaker();
            }
        }
        self.s.consecutive_failures = self.s.consecutive_failures.saturating_add(1);
        let n = self.s.consecutive_failures;

        if self.policy.backoff.kind == crate::api::BackoffType::Never {
            self.crashed(ending, "the policy's backoff is Never: not restarting");
            return self.stop("RestartPolicyNever");
        }
        let limits = &self.policy.limits;
        let window_start = sub(self.now, limits.window.as_std());
        self.s.recent_restarts.retain(|t| t.0 > window_start);
        if limits.max_restarts > 0 && self.s.recent_restarts.len() >= limits.max_restarts as usize {
            self.crashed(ending, "restart limit reached");
            let note = format!(
                "{} restarts within {}: giving up. Annotate {}=<new value> to resume",
                self.s.recent_restarts.len(),
                limits.window,
                crate::api::RESET_REQUESTED_ANNOTATION
            );
            self.event(EventReason::RestartLimitExceeded, note);
            return self.stop("RestartLimitExceeded");
        }

        let threshold = self.policy.circuit_breaker.failure_threshold;
        let state = self.breaker().state;
        if threshold > 0 && (state == BreakerState::HalfOpen || n >= threshold) {
            let trips = self.breaker().trips.saturating_add(1);
            let open_for = backoff::open_duration(&self.policy.circuit_breaker, trips);
            let half_open_at = ceil_second(add(self.now, open_for.as_std()));
            *self.breaker() = CircuitBreakerStatus {
                state: BreakerState::Open,
                trips,
                opened_at: Some(Time(self.now)),
                half_open_at: Some(Time(half_open_at)),
            };
            let why = if state == BreakerState::HalfOpen {
                "the probe failed".to_string()
            } else {
                format!("{n} failures in a row")
            };
            self.crashed(ending, "circuit breaker opened");
            let note = format!(
                "Circuit breaker opened ({why}): no restart for {open_for}, until {half_open_at}"
            );
            self.event(EventReason::CircuitOpened, note);
            record.backoff = Some(open_for);
            self.push_history(record);
            self.s.phase = Some(Phase::CircuitOpen);
            self.s.next_restart_at = None;
            return self.requeue(half_open_at);
        }

        let delay = backoff::delay(
            &self.policy.backoff,
            n,
            &self.input.agent.uid,
            self.s.attempt,
        )
        .expect("Never was handled above");
        // From when the attempt ended, not from when this is decided: a successor deciding it
        // again (the write waited, and the process died) gives the same instant.
        let ended_at = record.failed_at.as_ref().map_or(self.now, |t| t.0);
        let at = ceil_second(add(ended_at, delay.as_std()));
        record.backoff = Some(delay);
        self.push_history(record);
        self.s.phase = Some(Phase::BackingOff);
        self.s.next_restart_at = Some(Time(at));
        if at <= self.now && self.restart_at_once(ending, n) {
            return;
        }
        // One Event says both what happened and what happens next.
        self.crashed(
            ending,
            &format!("restarting in {delay} at {at} (failure {n} in a row)"),
        );
        self.requeue(at);
    }

    /// A restart due as soon as the failure is recorded, made in the same decision: the pod
    /// of the next attempt is created, and one Event tells of the crash and the restart. Only
    /// for an agent on its own whose pod has ended and is still there (a group restarts its
    /// members together, a live pod's replacement is validated before it is killed, and a pod
    /// gone could not tell the failure again), and when the options allow it. Returns whether
    /// it was made.
    fn restart_at_once(&mut self, ending: &Ending, n: u32) -> bool {
        // The pod that ended stays (it is kept for `kubectl logs`): should the status write
        // after the create be lost, the failure is read from it again (`recover_failure`).
        let attempt = self.s.attempt;
        let kept = self
            .input
            .pod
            .as_ref()
            .is_some_and(|p| p.attempt == attempt && !p.deleting && !p.is_live());
        if !self.options.restart_at_once
            || !kept
            || self.input.group.is_some()
            || self.plan.delete_pod.is_some()
            || self.creates_blocked
        {
            return false;
        }
        let ended = self.s.pod_name.clone();
        let events = self.plan.events.len();
        self.start_next_attempt();
        let Some(new) = self.plan.create_pod.as_ref() else {
            return false;
        };
        let outcome = restarted_as(&new.name, new.attempt, self.s.restart_count, n);
        // The restart's own Event is folded into the crash's, which names the pod that ended.
        self.plan.events.truncate(events);
        self.crashed_pod(ended, ending, &outcome);
        true
    }

    /// The pod `next` was created for a failure the status does not record: the failure and
    /// its restart were decided together (see `restart_at_once`) and the status write after the
    /// create was lost. The failure is decided again from the pod that ended, which is kept (for
    /// `kubectl logs`): the adoption that follows completes its restart, as that decision did.
    pub(super) fn recover_failure(&mut self, next: &PodFacts) {
        let made_for_a_failure = matches!(
            next.origin.trigger,
            Some(Trigger::Failure | Trigger::HeartbeatLost)
        );
        let unrecorded = matches!(self.s.phase, Some(Phase::Pending | Phase::Running))
            && self.s.attempt > 0
            && next.attempt > self.s.attempt
            && self
                .s
                .restart_history
                .first()
                .is_none_or(|r| r.attempt != self.s.attempt);
        if !made_for_a_failure || !unrecorded {
            return;
        }
        let Some(ended) = self
            .input
            .previous
            .as_ref()
            .filter(|p| p.attempt == self.s.attempt)
        else {
            return;
        };
        let liveness = Liveness {
            heartbeat: None,
            lease: None,
        };
        let Verdict::Ended {
            ending,
            kill: false,
        } = classify::classify(ended, std::time::Duration::MAX, liveness, self.now)
        else {
            return;
        };
        let at_once = std::mem::replace(&mut self.options.restart_at_once, false);
        let events = self.plan.events.len();
        self.fail(ending.clone(), None);
        self.options.restart_at_once = at_once;
        // Its Event was lost with the write: it goes out now, telling what was done.
        let told = self.plan.events[events..].iter().rposition(|e| {
            matches!(
                e.reason,
                EventReason::Crashed | EventReason::HeartbeatLost | EventReason::NoProgress
            )
        });
        if let Some(i) = told
            && self
                .s
                .next_restart_at
                .as_ref()
                .is_some_and(|t| t.0 <= self.now)
            && self.s.phase == Some(Phase::BackingOff)
        {
            self.plan.events.remove(events + i);
            let outcome = restarted_as(
                &next.name,
                next.attempt,
                self.s.restart_count.saturating_add(1),
                self.s.consecutive_failures,
            );
            self.crashed(&ending, &outcome);
        }
    }

    pub(super) fn crashed(&mut self, ending: &Ending, outcome: &str) {
        self.crashed_pod(self.s.pod_name.clone(), ending, outcome);
    }

    /// The Event of `pod`'s failure, about that pod, saying what comes of it.
    fn crashed_pod(&mut self, pod: Option<String>, ending: &Ending, outcome: &str) {
        let (reason, what) = if ending.reason == FailureReason::HeartbeatLost {
            (EventReason::HeartbeatLost, "lost its heartbeat".to_string())
        } else if ending.reason == FailureReason::NoProgress {
            (EventReason::NoProgress, "made no progress".to_string())
        } else {
            let code = ending
                .exit_code
                .map(|c| format!(" (exit code {c})"))
                .unwrap_or_default();
            (
                EventReason::Crashed,
                format!("failed: {}{code}", ending.reason),
            )
        };
        let message = quoted(ending.message.as_deref());
        let note = format!(
            "Pod {} {what}{message}; {outcome}",
            pod.as_deref().unwrap_or_default()
        );
        self.plan.events.push(Event { reason, note, pod });
    }

    pub(super) fn stop(&mut self, reason: &'static str) {
        self.s.phase = Some(Phase::Stopped);
        self.s.next_restart_at = None;
        self.stop_reason = Some(reason);
    }
}

/// What a failure's Event says of the restart made with it.
fn restarted_as(pod: &str, attempt: u32, restart: u32, failures: u32) -> String {
    format!(
        "restarted as pod {pod} (attempt {attempt}, restart {restart}; failure {failures} in a row)"
    )
}
