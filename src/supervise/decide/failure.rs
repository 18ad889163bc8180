//! A failure's consequences: rules, limits, the breaker, the backoff, or a shutdown.

use super::*;
use crate::supervise::classify::RetryAfter;

impl Decider<'_> {
    /// Records how the current attempt ended and decides what follows. `kill`: the pod is still
    /// live and must be deleted.
    pub(super) fn fail(&mut self, ending: Ending, kill: Option<&PodFacts>) {
        if let Some(pod) = kill {
            self.plan.delete_pod = Some(pod.name.clone());
        }
        let (class, shutdown) = match &ending.shutdown {
            Some(request) => (
                FailureClass::Shutdown,
                Some((request.kind, "TerminationMessage")),
            ),
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

        match (class, shutdown) {
            (_, Some((kind, source))) => self.record_shutdown(kind, source, &ending),
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
        if ran_for.is_some_and(|r| r >= self.policy.reset_after) {
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
        let at = ceil_second(add(self.now, delay.as_std()));
        self.crashed(ending, &format!("restarting in {delay}"));
        let note = format!("Restarting in {delay} at {at} (failure {n} in a row)");
        self.event(EventReason::RestartScheduled, note);
        record.backoff = Some(delay);
        self.push_history(record);
        self.s.phase = Some(Phase::BackingOff);
        self.s.next_restart_at = Some(Time(at));
        self.requeue(at);
    }

    /// The agent asked to be restarted no earlier than `retry` (cut to the policy's
    /// `maxRetryAfter`): a restart counted toward no limit and not toward the breaker.
    fn retry_later(
        &mut self,
        ending: &Ending,
        mut record: RestartRecord,
        retry: RetryAfter,
        ended_at: Timestamp,
    ) {
        let cap = self.policy.max_retry_after.as_std();
        let latest = add(ended_at, cap);
        let at = match retry {
            RetryAfter::After(d) => add(ended_at, d.min(cap)),
            RetryAfter::At(t) => t.min(latest),
        };
        let at = ceil_second(at.max(self.now));
        let pod = self.s.pod_name.clone().unwrap_or_default();
        let code = ending
            .exit_code
            .map(|c| format!(", exit code {c}"))
            .unwrap_or_default();
        let message = ending
            .message
            .as_deref()
            .map(|m| format!(": {}", excerpt(m)))
            .unwrap_or_default();
        let note = format!(
            "Pod {pod} ended ({}{code}) asking to be restarted later{message}; restarting at {at} (not counted as a failure)",
            ending.reason
        );
        self.event(EventReason::RestartScheduled, note);
        record.trigger = Trigger::RetryAfter;
        record.backoff = Some(span(self.now, at));
        self.push_history(record);
        self.s.phase = Some(Phase::BackingOff);
        self.s.next_restart_at = Some(Time(at));
        self.requeue(at);
    }

    pub(super) fn crashed(&mut self, ending: &Ending, outcome: &str) {
        let pod = self.s.pod_name.clone().unwrap_or_default();
        let (reason, what) = if ending.reason == FailureReason::HeartbeatLost {
            (EventReason::HeartbeatLost, "lost its heartbeat".to_string())
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
        let message = ending
            .message
            .as_deref()
            .map(|m| format!(": {}", excerpt(m)))
            .unwrap_or_default();
        self.event(reason, format!("Pod {pod} {what}{message}; {outcome}"));
    }

    pub(super) fn stop(&mut self, reason: &'static str) {
        self.s.phase = Some(Phase::Stopped);
        self.s.next_restart_at = None;
        self.stop_reason = Some(reason);
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
