//! Starting pods: first starts, restarts, the breaker's probe, and the restart history.

use jiff::Timestamp;

use super::{Decider, excerpt, span, whole_second};
use crate::api::{
    BreakerState, CircuitBreakerStatus, FailureClass, FailureReason, Phase, RestartRecord, Time,
    Trigger,
};
use crate::supervise::classify::add;
use crate::supervise::input::{PodFacts, PodOrigin};
use crate::supervise::plan::{EventReason, LastFailure, NewPod, pod_name};
use crate::supervise::progress;

impl Decider<'_> {
    /// The breaker's single probe: HalfOpen, and one restart.
    pub(super) fn probe(&mut self) {
        if self.creates_blocked || self.group_holds() {
            return;
        }
        self.breaker().state = BreakerState::HalfOpen;
        let note = format!(
            "Circuit breaker half-open: starting one probe (attempt {})",
            self.s.attempt.saturating_add(1)
        );
        self.event(EventReason::CircuitHalfOpen, note);
        self.start_next_attempt();
    }

    /// A restart due now, recorded before anything is done: `record` becomes the pending
    /// restart, a live pod is killed, and the next decision creates the replacement. So a status
    /// write lost after the kill, or an operator stopped between the two, can never turn the
    /// operator's own kill into a lost pod, or forget why it restarted. A manual restart or a
    /// rollout kills nothing until its replacement is known to be creatable.
    pub(super) fn restart_now(&mut self, record: RestartRecord) {
        if let Some(live) = self.current_pod().filter(|p| p.is_live()) {
            self.plan.delete_pod = Some(live.name.clone());
            if matches!(record.trigger, Trigger::Manual | Trigger::Rollout) {
                let restart_count = self.s.restart_count.saturating_add(1);
                self.plan.validate_pod = Some(self.new_pod(Some(record.trigger), restart_count));
            }
        }
        self.push_history(record);
        self.s.phase = Some(Phase::BackingOff);
        self.s.next_restart_at = Some(Time(self.now));
        self.plan.requeue_at = Some(self.now);
    }

    /// Creates the next attempt's pod, completing the pending restart in the history if there
    /// is one. With the named policy missing, nothing is created.
    pub(super) fn start_next_attempt(&mut self) {
        // No pod once the budget is spent, however the decision got here.
        if self.budget_spent() {
            self.enforce_budget();
            return;
        }
        if self.creates_blocked || self.group_holds() {
            // Held until the policy exists (or the group lets it start): a first start as
            // Pending, any other as a restart due now (the attempt's pod is gone, and must not be
            // taken for lost again).
            if !matches!(
                self.s.phase,
                Some(Phase::BackingOff | Phase::CircuitOpen | Phase::Stopped)
            ) {
                if self.s.attempt == 0 {
                    self.s.phase = Some(Phase::Pending);
                } else {
                    self.s.phase = Some(Phase::BackingOff);
                    self.s.next_restart_at = Some(Time(self.now));
                }
            }
            return;
        }
        // Whatever led here, the attempt being replaced never stays live beside the new one.
        if let Some(live) = self.current_pod().filter(|p| p.is_live()) {
            self.plan.delete_pod = Some(live.name.clone());
        }
        let pending = self
            .s
            .restart_history
            .first_mut()
            .filter(|r| r.restarted_at.is_none());
        let restarted = pending.map(|pending| {
            pending.restarted_at = Some(Time(self.now));
            (counts(pending), pending.trigger)
        });
        if let Some((counted, _)) = restarted {
            self.count_restart(counted, self.now);
        }
        let new = self.new_pod(restarted.map(|(_, t)| t), self.s.restart_count);
        let (name, attempt) = (new.name.clone(), new.attempt);
        self.s.resumed_from = new.origin.checkpoint.clone();
        self.s.attempt = attempt;
        self.s.pod_name = Some(name.clone());
        self.s.phase = Some(Phase::Pending);
        self.s.next_restart_at = None;
        if restarted.is_some() {
            // A restart's one Event names the pod it created.
            let why = self
                .s
                .restart_history
                .first()
                .map(restart_cause)
                .unwrap_or_default();
            let note = format!(
                "Restarted as pod {name} (attempt {attempt}, restart {}){why}",
                self.s.restart_count
            );
            self.event(EventReason::Restarted, note);
        } else {
            self.event(
                EventReason::PodCreated,
                format!("Created pod {name} (attempt {attempt}, start)"),
            );
        }
        self.plan.create_pod = Some(new);
        self.requeue(add(self.now, self.policy.startup_timeout.as_std()));
    }

    /// The next attempt's pod, made for `trigger` (`None`: a first start or a resume).
    fn new_pod(&self, trigger: Option<Trigger>, restart_count: u32) -> NewPod {
        let attempt = self.s.attempt.saturating_add(1);
        NewPod {
            // A Sandbox's pods are all named after it.
            name: (self.input.agent.sandbox.clone())
                .unwrap_or_else(|| pod_name(&self.input.agent.name, attempt)),
            attempt,
            restart_count,
            last_failure_reason: self.s.last_failure.as_ref().map(|f| f.reason),
            last_failure: self.s.last_failure.as_ref().map(|f| LastFailure {
                // The attempt whose record is this failure's (the history may have dropped it).
                attempt: self
                    .s
                    .restart_history
                    .iter()
                    .find(|r| r.failed_at.as_ref() == Some(&f.time) && r.reason == Some(f.reason))
                    .map(|r| r.attempt),
                reason: f.reason,
                class: f.class,
                exit_code: f.exit_code,
                message: f.message.clone(),
            }),
            progress: self.s.progress.as_ref().map(|p| p.value),
            origin: PodOrigin {
                trigger,
                handled_restart: self.s.handled_restart_request.clone(),
                handled_reset: self.s.handled_reset_request.clone(),
                handled_group_reset: self.s.group.as_ref().and_then(|g| g.handled_reset.clone()),
                checkpoint: progress::resume_point(&self.s.checkpoints)
                    .map(|c| c.reference.clone()),
            },
        }
    }

    /// A pod of a newer attempt exists that the status does not know: a status write was lost
    /// after the pod was created. Take it as created, with what it says it was created for: the
    /// requests it handled are not handled again, and its restart is recorded.
    pub(super) fn adopt(&mut self, pod: &PodFacts) {
        let created = whole_second(pod.created_at);
        let origin = &pod.origin;
        if let Some(value) = &origin.handled_reset
            && self.s.handled_reset_request.as_ref() != Some(value)
        {
            // A reset was decided with this pod's creation: its counters are cleared (the pod
            // itself is the restart it asked for).
            self.s.handled_reset_request = Some(value.clone());
            self.s.consecutive_failures = 0;
            self.s.recent_restarts.clear();
            *self.breaker() = CircuitBreakerStatus::default();
        }
        if let Some(value) = &origin.handled_group_reset
            && let Some(group) = self.s.group.as_mut()
            && group.handled_reset.as_ref() != Some(value)
        {
            // Likewise for a reset the agent's group ordered.
            group.handled_reset = Some(value.clone());
            self.s.consecutive_failures = 0;
            self.s.recent_restarts.clear();
            *self.breaker() = CircuitBreakerStatus::default();
        }
        if let Some(value) = &origin.handled_restart {
            self.s.handled_restart_request = Some(value.clone());
        }
        if let Some(pending) = self
            .s
            .restart_history
            .first_mut()
            .filter(|r| r.restarted_at.is_none())
        {
            pending.restarted_at = Some(Time(created));
            if pending.trigger == Trigger::Outage && pending.backoff.is_none() {
                // Held by an outage: it waited from its failure until the pod was created.
                pending.backoff = pending.failed_at.as_ref().map(|t| span(t.0, created));
            }
            let counted = counts(pending);
            self.count_restart(counted, created);
        } else if self.s.attempt > 0 {
            // The restart's own record was lost with the status write: the pod remembers it.
            self.count_unrecorded(self.s.attempt, pod, created);
        }
        // The attempts between it and this pod ended unrecorded, and their pods are gone
        // (removed by someone else while their records waited): each was restarted all the
        // same, by the pod made after it.
        // (Only the newest are kept in the history; all are counted.)
        let gone = self.s.attempt.saturating_add(1)..pod.attempt;
        let kept = gone.len().min(self.history_limit());
        let skipped = u32::try_from(gone.len() - kept).unwrap_or(u32::MAX);
        self.s.restart_count = self.s.restart_count.saturating_add(skipped);
        for attempt in gone.skip(skipped as usize) {
            self.count_unrecorded(attempt, pod, created);
        }
        // A pod created while the breaker was open is its probe.
        if self.breaker().state == BreakerState::Open {
            self.breaker().state = BreakerState::HalfOpen;
        }
        self.s.attempt = pod.attempt;
        self.s.pod_name = Some(pod.name.clone());
        self.s.resumed_from = origin.checkpoint.clone();
        self.s.phase = Some(Phase::Pending);
        self.s.next_restart_at = None;
    }

    /// `attempt`, before `pod`'s, ended and was restarted with no record of its end, and its pod
    /// is gone: the restart is counted, as reason `Unknown`, at `created` (when `pod` was, at the
    /// latest). Why the attempt after it was made is what `pod` says of its own, if it is the
    /// next; a pod made with no trigger (a resume) was no restart.
    fn count_unrecorded(&mut self, attempt: u32, pod: &PodFacts, created: Timestamp) {
        let trigger = match pod.origin.trigger {
            _ if attempt.saturating_add(1) < pod.attempt => Trigger::Failure,
            Some(trigger) => trigger,
            None => return,
        };
        let mut record = self.record(trigger);
        record.attempt = attempt;
        match trigger {
            Trigger::HeartbeatLost => record.reason = Some(FailureReason::HeartbeatLost),
            Trigger::Failure => {
                record.reason = Some(FailureReason::Unknown);
                record.message = Some(std::sync::Arc::from(GONE_UNRECORDED));
            }
            _ => {}
        }
        record.restarted_at = Some(Time(created));
        self.push_history(record);
        self.count_restart(false, created);
    }

    /// A restart performed at `at`; `counted` ones count toward the restart limit.
    pub(super) fn count_restart(&mut self, counted: bool, at: Timestamp) {
        self.s.restart_count = self.s.restart_count.saturating_add(1);
        if counted {
            self.s.recent_restarts.insert(0, Time(at));
            self.s
                .recent_restarts
                .truncate(self.policy.limits.max_restarts.max(1) as usize);
        }
    }

    /// A restart record for the current attempt with `trigger`, and no failure.
    pub(super) fn record(&self, trigger: Trigger) -> RestartRecord {
        RestartRecord {
            attempt: self.s.attempt,
            trigger,
            failed_at: None,
            reason: None,
            class: None,
            exit_code: None,
            signal: None,
            message: None,
            ran_for: None,
            fingerprint: None,
            backoff: None,
            restarted_at: None,
            checkpoint: None,
            progress: None,
            // What it spent, if it reported any (its last report is counted by now).
            spend: self
                .s
                .spend
                .as_ref()
                .map(|s| &s.current)
                .filter(|c| c.attempt == self.s.attempt)
                .map(|c| crate::api::Spend {
                    cost: c.cost.clone(),
                    tokens: c.tokens,
                }),
        }
    }

    pub(super) fn push_history(&mut self, record: RestartRecord) {
        self.s.restart_history.insert(0, record);
        self.s.restart_history.truncate(self.history_limit());
    }

    pub(super) fn history_limit(&self) -> usize {
        self.policy.history_limit.clamp(1, 50) as usize
    }

    pub(super) fn manual_event(&mut self, manual: bool) {
        if manual {
            let value = self.s.handled_restart_request.clone().unwrap_or_default();
            let note = format!(
                "Restart requested ({}={value})",
                crate::api::RESTART_REQUESTED_ANNOTATION
            );
            self.event(EventReason::ManualRestart, note);
        }
    }

    pub(super) fn rollout_event(&mut self) {
        let note = format!(
            "Template changed (generation {}): replacing pod {}",
            self.input.agent.generation,
            self.s.pod_name.as_deref().unwrap_or("")
        );
        self.event(EventReason::RolledOut, note);
    }
}

/// What the history says of an attempt whose pod was gone before its end was recorded.
pub const GONE_UNRECORDED: &str = "pod gone before its end was recorded";

/// Whether a restart counts toward the restart limit: a failure's, restarted with backoff. A
/// restart the agent asked to wait for, or one held by an outage, does not.
fn counts(record: &RestartRecord) -> bool {
    record.class == Some(FailureClass::Transient)
        && matches!(record.trigger, Trigger::Failure | Trigger::HeartbeatLost)
}

/// Why a restart happened, for its Event: " after Evicted: the node ran out of memory".
fn restart_cause(record: &RestartRecord) -> String {
    let what = match (record.trigger, record.reason) {
        (Trigger::Manual, _) => "on request".to_string(),
        (Trigger::Rollout, _) => "for a new template".to_string(),
        (Trigger::RetryAfter, _) => "after the wait it asked for".to_string(),
        (Trigger::Outage, _) => "after an outage".to_string(),
        (_, Some(reason)) => format!("after {reason}"),
        (_, None) => return String::new(),
    };
    match record
        .message
        .as_deref()
        .filter(|m| !m.is_empty() && record.trigger != Trigger::Manual)
    {
        Some(message) => format!(" {what}: {}", excerpt(message)),
        None => format!(" {what}"),
    }
}
