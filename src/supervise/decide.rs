//! The decision: given what happened to an agent, its history and its policy, at time `now` —
//! what next? A pure function of plain data: no client, no clock, no unseeded randomness.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use super::backoff;
use super::classify::{self, Ending, Liveness, Verdict, add};
use super::conditions::{self, CIRCUIT_BREAKER_OPEN, Desired, POLICY_RESOLVED, READY};
use super::observe::{Input, PodFacts, PolicyResolution};
use super::plan::{Event, EventReason, NewPod, Plan, pod_name};
use super::rules;
use crate::api::{
    AgentStatus, BreakerState, CircuitBreakerStatus, Duration, Failure, FailureClass,
    FailureReason, Phase, RestartPolicySpec, RestartRecord, RuleAction, Shutdown, ShutdownType,
    Time, Trigger,
};

/// Decides what to do next. The same input always gives the same plan.
///
/// The input is taken by value: its status becomes the plan's (changed where the decision
/// says), so no decision copies an agent's history. The caller compares against the status it
/// read, which it still has.
pub fn decide(mut input: Input) -> Plan {
    let builtin = RestartPolicySpec::default();
    let status = std::mem::take(&mut input.status);
    let mut d = Decider {
        input: &input,
        now: whole_second(input.now),
        policy: &builtin,
        s: status,
        plan: Plan::default(),
        stop_reason: None,
    };
    d.run();
    d.finish()
}

struct Decider<'a> {
    input: &'a Input,
    now: Timestamp,
    policy: &'a RestartPolicySpec,
    /// The status being built.
    s: AgentStatus,
    plan: Plan,
    /// Why the agent is being stopped by this decision (the Ready condition's reason).
    stop_reason: Option<&'static str>,
}

impl<'a> Decider<'a> {
    fn run(&mut self) {
        self.s.observed_generation = Some(self.input.agent.generation);
        self.s
            .circuit_breaker
            .get_or_insert_with(CircuitBreakerStatus::default);

        if self.s.shutdown.is_some() {
            return self.respect_shutdown();
        }
        if !self.resolve_policy() {
            return;
        }
        // A lowered historyLimit applies at once, not at the next restart.
        self.s.restart_history.truncate(self.history_limit());
        if let Some(value) = new_request(
            &self.input.agent.reset_requested,
            &self.s.handled_reset_request,
        ) {
            self.s.handled_reset_request = Some(value);
            self.reset();
        }
        let manual = new_request(
            &self.input.agent.restart_requested,
            &self.s.handled_restart_request,
        );
        if let Some(value) = &manual {
            self.s.handled_restart_request = Some(value.clone());
        }
        if self.input.agent.suspend {
            return self.suspend();
        }
        let pod = self.current_pod();
        if let Some(pod) = pod.filter(|p| p.attempt > self.s.attempt) {
            self.adopt(pod);
        }
        let pod = pod.filter(|p| p.attempt == self.s.attempt && self.s.attempt > 0);

        match self.s.phase {
            Some(Phase::Pending | Phase::Running) if self.s.attempt > 0 => {
                self.active(pod, manual.is_some())
            }
            Some(Phase::BackingOff) => {
                let due = self
                    .s
                    .next_restart_at
                    .as_ref()
                    .is_none_or(|t| t.0 <= self.now);
                if due || manual.is_some() {
                    self.manual_event(manual.is_some());
                    self.start_next_attempt(None);
                } else {
                    self.plan.requeue_at = self.s.next_restart_at.as_ref().map(|t| t.0);
                }
            }
            Some(Phase::CircuitOpen) => self.circuit_open(manual.is_some()),
            Some(Phase::Stopped) => {
                let rolled = pod.is_some_and(|p| !self.current_template(p));
                if manual.is_some() {
                    self.manual_event(true);
                    self.start_next_attempt(Some(self.record(Trigger::Manual)));
                } else if rolled {
                    self.rollout_event();
                    self.start_next_attempt(Some(self.record(Trigger::Rollout)));
                }
            }
            // First start (also once a missing policy appears), resume after suspend, or resume
            // after a cleared shutdown.
            None | Some(Phase::Pending | Phase::Running | Phase::Suspended | Phase::Shutdown) => {
                match pod.filter(|p| p.is_live()) {
                    Some(live) => self.active(Some(live), manual.is_some()),
                    // Resuming does not bypass an open breaker.
                    None if self.breaker().state == BreakerState::Open => {
                        self.s.phase = Some(Phase::CircuitOpen);
                        self.circuit_open(manual.is_some());
                    }
                    None => self.start_next_attempt(None),
                }
            }
        }
    }

    /// The breaker is open: one probe at `halfOpenAt` (or now, if asked), nothing before.
    fn circuit_open(&mut self, manual: bool) {
        let half_open_at = self.breaker().half_open_at.as_ref().map(|t| t.0);
        if half_open_at.is_none_or(|t| t <= self.now) || manual {
            self.manual_event(manual);
            self.probe();
        } else {
            self.plan.requeue_at = half_open_at;
        }
    }

    /// The pod of the newest attempt, if it is this agent's current or a newer one.
    fn current_pod(&self) -> Option<&'a PodFacts> {
        self.input
            .pod
            .as_ref()
            .filter(|p| p.attempt >= self.s.attempt && p.attempt > 0)
    }

    fn breaker(&mut self) -> &mut CircuitBreakerStatus {
        self.s
            .circuit_breaker
            .get_or_insert_with(CircuitBreakerStatus::default)
    }

    /// An Event about the current pod (the one just created, or the one that just ended).
    fn event(&mut self, reason: EventReason, note: String) {
        let pod = self.s.pod_name.clone();
        self.plan.events.push(Event { reason, note, pod });
    }

    fn requeue(&mut self, at: Timestamp) {
        if at > self.now {
            self.plan.requeue_at = Some(self.plan.requeue_at.map_or(at, |t| t.min(at)));
        }
    }

    // --- Leaving the agent alone -----------------------------------------------------------

    /// A shutdown is set, by anyone: no pod is created or deleted, nothing is counted.
    fn respect_shutdown(&mut self) {
        if self.s.phase != Some(Phase::Shutdown) {
            let note = shutdown_note(self.s.shutdown.as_ref().expect("checked by the caller"));
            self.event(EventReason::ShutdownRespected, note);
        }
        self.s.phase = Some(Phase::Shutdown);
        self.s.next_restart_at = None;
    }

    /// Sets `PolicyResolved`. False when the named policy is missing: then nothing is started.
    fn resolve_policy(&mut self) -> bool {
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
        let flipped = conditions::set(
            &mut self.s.conditions,
            desired,
            self.input.agent.generation,
            self.now,
        );
        if !ok && flipped {
            self.event(EventReason::PolicyNotFound, message);
        }
        if !ok && self.s.phase.is_none() {
            self.s.phase = Some(Phase::Pending);
        }
        ok
    }

    fn suspend(&mut self) {
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

    fn reset(&mut self) {
        self.s.consecutive_failures = 0;
        self.s.recent_restarts.clear();
        *self.breaker() = CircuitBreakerStatus::default();
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

    // --- An attempt in progress -----------------------------------------------------------

    fn active(&mut self, pod: Option<&'a PodFacts>, manual: bool) {
        let Some(pod) = pod else {
            let name = self.s.pod_name.clone().unwrap_or_default();
            let ending = Ending::bare(FailureReason::NodeLost, format!("pod {name} vanished"));
            return self.fail(ending, None);
        };
        if pod.is_live() && manual {
            self.plan.delete_pod = Some(pod.name.clone());
            self.manual_event(true);
            return self.start_next_attempt(Some(self.record(Trigger::Manual)));
        }
        if pod.is_live() && !self.current_template(pod) {
            self.plan.delete_pod = Some(pod.name.clone());
            self.rollout_event();
            return self.start_next_attempt(Some(self.record(Trigger::Rollout)));
        }
        let liveness = Liveness {
            heartbeat: self.input.agent.heartbeat.as_ref(),
            lease: self.input.lease.as_ref(),
        };
        match classify::classify(
            pod,
            self.policy.startup_timeout.as_std(),
            liveness,
            self.now,
        ) {
            Verdict::Starting { deadline } => {
                self.s.phase = Some(Phase::Pending);
                self.requeue(deadline);
            }
            Verdict::Running {
                since,
                ready: _,
                heartbeat_deadline,
            } => {
                self.s.phase = Some(Phase::Running);
                self.healthy_since(since);
                if let Some(deadline) = heartbeat_deadline {
                    self.requeue(deadline);
                }
            }
            Verdict::Ended { ending, kill } => self.fail(ending, kill.then_some(pod)),
        }
    }

    fn current_template(&self, pod: &PodFacts) -> bool {
        pod.template_hash.as_deref() == Some(self.input.agent.template_hash.as_str())
    }

    /// Running since `since`: after `resetAfter` the agent counts as healthy again.
    fn healthy_since(&mut self, since: Timestamp) {
        let half_open = self.breaker().state == BreakerState::HalfOpen;
        if self.s.consecutive_failures == 0 && !half_open {
            return;
        }
        let healthy_at = add(since, self.policy.reset_after.as_std());
        if self.now < healthy_at {
            return self.requeue(healthy_at);
        }
        self.s.consecutive_failures = 0;
        if half_open {
            self.close_breaker();
        }
    }

    /// The probe ran for `resetAfter`: the breaker closes.
    fn close_breaker(&mut self) {
        *self.breaker() = CircuitBreakerStatus::default();
        let note = format!(
            "Probe ran {} without failing: circuit breaker closed",
            self.policy.reset_after
        );
        self.event(EventReason::CircuitClosed, note);
    }

    // --- Failures ---------------------------------------------------------------------------

    /// Records how the current attempt ended and decides what follows. `kill`: the pod is still
    /// live and must be deleted.
    fn fail(&mut self, ending: Ending, kill: Option<&PodFacts>) {
        if let Some(pod) = kill {
            self.plan.delete_pod = Some(pod.name.clone());
        }
        let ended_at = ending
            .finished_at
            .map_or(self.now, whole_second)
            .min(self.now);
        let ran_for = ending.started_at.map(|started| span(started, ended_at));
        let (class, shutdown) = match &ending.shutdown {
            Some(request) => (
                FailureClass::Shutdown,
                Some((request.kind, "TerminationMessage")),
            ),
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
        // Shared by lastFailure and the history record: one copy of up to 1 KiB.
        let message: Option<Arc<str>> = ending.message.as_deref().map(Arc::from);
        self.s.last_failure = Some(Failure {
            time: Time(ended_at),
            reason: ending.reason,
            class,
            exit_code: ending.exit_code,
            signal: ending.signal,
            message: message.clone(),
            container: ending.container.clone(),
            pod_name: self.s.pod_name.clone(),
            ran_for,
        });
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

        match (class, shutdown) {
            (_, Some((kind, source))) => self.record_shutdown(kind, source, &ending),
            (FailureClass::Permanent, _) => {
                self.crashed(&ending, "a Stop rule matched: not restarting");
                self.stop("StoppedByRule");
            }
            (FailureClass::Disruption, _) => {
                record.backoff = Some(Duration::ZERO);
                self.start_next_attempt(Some(record));
            }
            _ => self.counted_failure(&ending, record, ran_for),
        }
    }

    /// A failure that counts: toward the restart limit, the breaker and the backoff.
    fn counted_failure(
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

    fn crashed(&mut self, ending: &Ending, outcome: &str) {
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

    fn stop(&mut self, reason: &'static str) {
        self.s.phase = Some(Phase::Stopped);
        self.s.next_restart_at = None;
        self.stop_reason = Some(reason);
    }

    fn record_shutdown(&mut self, kind: ShutdownType, source: &str, ending: &Ending) {
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

    // --- Starting pods ---------------------------------------------------------------------

    /// The breaker's single probe: HalfOpen, and one restart.
    fn probe(&mut self) {
        self.breaker().state = BreakerState::HalfOpen;
        let note = format!(
            "Circuit breaker half-open: starting one probe (attempt {})",
            self.s.attempt.saturating_add(1)
        );
        self.event(EventReason::CircuitHalfOpen, note);
        self.start_next_attempt(None);
    }

    /// Creates the next attempt's pod. A pending restart in the history is completed by it;
    /// otherwise `record` (if any) is added as a new restart.
    fn start_next_attempt(&mut self, record: Option<RestartRecord>) {
        // Whatever led here, the attempt being replaced never stays live beside the new one.
        if let Some(live) = self.current_pod().filter(|p| p.is_live()) {
            self.plan.delete_pod = Some(live.name.clone());
        }
        let pending = self
            .s
            .restart_history
            .first_mut()
            .filter(|r| r.restarted_at.is_none());
        let restarted = match (pending, record) {
            (Some(pending), _) => {
                pending.restarted_at = Some(Time(self.now));
                Some(pending.class == Some(FailureClass::Transient))
            }
            (None, Some(mut record)) => {
                record.restarted_at = Some(Time(self.now));
                let counted = record.class == Some(FailureClass::Transient);
                self.push_history(record);
                Some(counted)
            }
            (None, None) => None,
        };
        if let Some(counted) = restarted {
            self.count_restart(counted, self.now);
        }
        let attempt = self.s.attempt.saturating_add(1);
        let name = pod_name(&self.input.agent.name, attempt);
        self.s.attempt = attempt;
        self.s.pod_name = Some(name.clone());
        self.s.phase = Some(Phase::Pending);
        self.s.next_restart_at = None;
        let what = if restarted.is_some() {
            "restart"
        } else {
            "start"
        };
        self.event(
            EventReason::PodCreated,
            format!("Created pod {name} (attempt {attempt}, {what})"),
        );
        if restarted.is_some() {
            let why = self
                .s
                .restart_history
                .first()
                .map(restart_cause)
                .unwrap_or_default();
            let note = format!(
                "Restarted as pod {name} (restart {}){why}",
                self.s.restart_count
            );
            self.event(EventReason::Restarted, note);
        }
        self.plan.create_pod = Some(NewPod {
            name,
            attempt,
            restart_count: self.s.restart_count,
            last_failure_reason: self.s.last_failure.as_ref().map(|f| f.reason),
        });
        self.requeue(add(self.now, self.policy.startup_timeout.as_std()));
    }

    /// A pod of a newer attempt exists that the status does not know: a status write was lost
    /// after the pod was created. Take it as created.
    fn adopt(&mut self, pod: &PodFacts) {
        let created = whole_second(pod.created_at);
        if let Some(pending) = self
            .s
            .restart_history
            .first_mut()
            .filter(|r| r.restarted_at.is_none())
        {
            pending.restarted_at = Some(Time(created));
            let counted = pending.class == Some(FailureClass::Transient);
            self.count_restart(counted, created);
        }
        // A pod created while the breaker was open is its probe.
        if self.breaker().state == BreakerState::Open {
            self.breaker().state = BreakerState::HalfOpen;
        }
        self.s.attempt = pod.attempt;
        self.s.pod_name = Some(pod.name.clone());
        self.s.phase = Some(Phase::Pending);
        self.s.next_restart_at = None;
    }

    /// A restart performed at `at`; `counted` ones count toward the restart limit.
    fn count_restart(&mut self, counted: bool, at: Timestamp) {
        self.s.restart_count = self.s.restart_count.saturating_add(1);
        if counted {
            self.s.recent_restarts.insert(0, Time(at));
            self.s
                .recent_restarts
                .truncate(self.policy.limits.max_restarts.max(1) as usize);
        }
    }

    /// A restart record for the current attempt with `trigger`, and no failure.
    fn record(&self, trigger: Trigger) -> RestartRecord {
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
            backoff: None,
            restarted_at: None,
        }
    }

    fn push_history(&mut self, record: RestartRecord) {
        self.s.restart_history.insert(0, record);
        self.s.restart_history.truncate(self.history_limit());
    }

    fn history_limit(&self) -> usize {
        self.policy.history_limit.clamp(1, 50) as usize
    }

    fn manual_event(&mut self, manual: bool) {
        if manual {
            let value = self.s.handled_restart_request.clone().unwrap_or_default();
            let note = format!(
                "Restart requested ({}={value})",
                crate::api::RESTART_REQUESTED_ANNOTATION
            );
            self.event(EventReason::ManualRestart, note);
        }
    }

    fn rollout_event(&mut self) {
        let note = format!(
            "Template changed (generation {}): replacing pod {}",
            self.input.agent.generation,
            self.s.pod_name.as_deref().unwrap_or("")
        );
        self.event(EventReason::RolledOut, note);
    }

    // --- Conditions and the result --------------------------------------------------------

    fn finish(mut self) -> Plan {
        let generation = self.input.agent.generation;
        let breaker = self.breaker().clone();
        let open = breaker.state == BreakerState::Open;
        let message = match (&breaker.half_open_at, open) {
            (Some(at), true) => format!(
                "opened after {} failures in a row; probe at {}",
                self.s.consecutive_failures, at.0
            ),
            _ => String::new(),
        };
        let desired = Desired {
            type_: CIRCUIT_BREAKER_OPEN,
            status: open,
            reason: if open {
                "Tripped"
            } else {
                breaker.state.as_str()
            },
            message: &message,
        };
        conditions::set(&mut self.s.conditions, desired, generation, self.now);

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
        conditions::set(&mut self.s.conditions, desired, generation, self.now);

        self.plan.status = self.s;
        self.plan
    }

    /// Ready's status and reason; `None` as reason keeps the one already recorded.
    fn ready(&self) -> (bool, Option<&'static str>) {
        let pod_ready = self.plan.create_pod.is_none()
            && self.plan.delete_pod.is_none()
            && self
                .input
                .pod
                .as_ref()
                .is_some_and(|p| p.attempt == self.s.attempt && p.ready);
        match self.s.phase {
            Some(Phase::Running) if pod_ready => (true, Some("PodReady")),
            Some(Phase::Running) => (false, Some("PodNotReady")),
            Some(Phase::Pending) if !matches!(self.input.policy, PolicyResolution::Missing(_)) => {
                (false, Some("PodPending"))
            }
            Some(Phase::Pending) | None => (false, Some("PolicyNotFound")),
            Some(Phase::BackingOff) => (false, Some("BackingOff")),
            Some(Phase::CircuitOpen) => (false, Some("CircuitOpen")),
            Some(Phase::Stopped) => (false, self.stop_reason),
            Some(Phase::Shutdown) => (false, Some("Shutdown")),
            Some(Phase::Suspended) => (false, Some("Suspended")),
        }
    }

    fn ready_message(&self) -> String {
        let pod = self.s.pod_name.as_deref().unwrap_or("");
        match (self.s.phase, self.stop_reason) {
            (Some(Phase::Stopped), Some("RestartLimitExceeded")) => format!(
                "more than {} restarts within {}; annotate {} to resume",
                self.policy.limits.max_restarts,
                self.policy.limits.window,
                crate::api::RESET_REQUESTED_ANNOTATION
            ),
            (Some(Phase::Stopped), Some("StoppedByRule")) => {
                "a Stop rule matched the last failure".to_string()
            }
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

/// The start of a (termination) message, for an Event note: notes are limited to 1 KiB in
/// all, and a sentence reads better with a short quote.
fn excerpt(message: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 200;
    if message.len() <= MAX {
        return message.into();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end]).into()
}

/// Why a restart happened, for its Event: " after Evicted: the node ran out of memory".
fn restart_cause(record: &RestartRecord) -> String {
    let what = match (record.trigger, record.reason) {
        (Trigger::Manual, _) => "on request".to_string(),
        (Trigger::Rollout, _) => "for a new template".to_string(),
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

/// A request annotation's value, when it differs from the last one handled.
fn new_request(annotation: &Option<String>, handled: &Option<String>) -> Option<String> {
    annotation
        .as_ref()
        .filter(|v| Some(*v) != handled.as_ref())
        .cloned()
}

fn shutdown_note(shutdown: &Shutdown) -> String {
    let kind = match shutdown.kind {
        ShutdownType::Economic => "economic",
        ShutdownType::Voluntary => "voluntary",
    };
    let reason = shutdown
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    format!("Agent shut down, {kind}{reason}: it is left alone until status.shutdown is cleared")
}

/// Status times are stored to the second; decisions use the same resolution.
fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn ceil_second(t: Timestamp) -> Timestamp {
    let down = whole_second(t);
    if down == t {
        t
    } else {
        add(down, std::time::Duration::from_secs(1))
    }
}

fn sub(t: Timestamp, d: std::time::Duration) -> Timestamp {
    let d = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
    t.checked_sub(d).unwrap_or(Timestamp::MIN)
}

fn span(from: Timestamp, to: Timestamp) -> Duration {
    let millis = (to - from).total(jiff::Unit::Millisecond).unwrap_or(0.0);
    Duration::from_millis(millis.max(0.0) as u64)
}
