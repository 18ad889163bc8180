//! The decision: given what happened to an agent, its history and its policy, at time `now` —
//! what next? A pure function of plain data: no client, no clock, no unseeded randomness.
//!
//! Here: the entry point, the phases, and leaving an agent alone. A failure's consequences are
//! in `failure`, starting pods in `start`, the conditions and the result in `finish`.

/// How long a replacement made after a failure runs before it counts as `Running`: until
/// then the Agent stays `Pending` (and not `Ready`).
pub const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

mod failure;
mod member;
mod outage;
mod set_conditions;
mod start;

use jiff::{SignedDuration, Timestamp};

use super::classify::{self, Ending, Liveness, Verdict, add};
use super::conditions::{self, Desired, POLICY_RESOLVED};
use super::input::{Input, PodFacts, PolicyResolution};
use super::plan::{Event, EventReason, Plan};
use crate::api::{
    AgentStatus, BreakerState, CircuitBreakerStatus, Duration, FailureReason, Phase,
    RestartPolicySpec, Shutdown, ShutdownType, Time, Trigger,
};

/// Decides what to do next. The same input always gives the same plan.
///
/// The input is taken by value: its status becomes the plan's (changed where the decision
/// says), so no decision copies an agent's history. The caller compares against the status it
/// read, which it still has.
pub fn decide(input: Input) -> Plan {
    decide_with(input, Options::default())
}

/// How a decision may act, beyond what its input says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// A restart due at once after a failure is made in the same decision as the failure: one
    /// status write and one Event instead of two of each. Off when the restart must wait (the
    /// restart budget has no token for it): the failure is recorded, the restart stays due.
    pub restart_at_once: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            restart_at_once: true,
        }
    }
}

/// [`decide`], with `options`.
pub fn decide_with(mut input: Input, options: Options) -> Plan {
    let builtin = RestartPolicySpec::default();
    let status = std::mem::take(&mut input.status);
    let mut d = Decider {
        input: &input,
        now: whole_second(input.now),
        policy: &builtin,
        s: status,
        plan: Plan::default(),
        stop_reason: None,
        creates_blocked: false,
        held: None,
        outage_hold: None,
        options,
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
    /// The named policy is missing: no pod may be created.
    creates_blocked: bool,
    /// Why the agent's group holds back its next pod, if it does (the Ready condition's message).
    held: Option<String>,
    /// Why an outage holds the agent's restart, if one does (the Ready condition's message).
    outage_hold: Option<String>,
    options: Options,
}

impl<'a> Decider<'a> {
    fn run(&mut self) {
        self.s.observed_generation = Some(self.input.agent.generation);
        self.s
            .circuit_breaker
            .get_or_insert_with(CircuitBreakerStatus::default);
        self.s.group = self
            .input
            .group
            .as_ref()
            .map(|d| crate::api::GroupMembership {
                name: d.group.clone(),
                handled_reset: self
                    .s
                    .group
                    .as_ref()
                    .filter(|g| g.name == d.group)
                    .and_then(|g| g.handled_reset.clone()),
            });

        if self.s.shutdown.is_some() {
            return self.respect_shutdown();
        }
        // A missing policy blocks creates, nothing else: suspend, kills and the recording of
        // failures go on (under the built-in policy) while it is missing.
        self.creates_blocked = !self.resolve_policy();
        // A lowered historyLimit applies at once, not at the next restart.
        self.s.restart_history.truncate(self.history_limit());
        let pod = self.current_pod();
        // Adopted first: the pod says which requests were already handled when it was made.
        if let Some(pod) = pod.filter(|p| p.attempt > self.s.attempt) {
            self.recover_failure(pod);
            self.adopt(pod);
        }
        if let Some(value) = new_request(
            &self.input.agent.reset_requested,
            &self.s.handled_reset_request,
        ) {
            self.s.handled_reset_request = Some(value);
            self.reset();
        }
        self.group_reset();
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
        let pod = pod.filter(|p| p.attempt == self.s.attempt && self.s.attempt > 0);
        if matches!(
            self.s.phase,
            Some(Phase::BackingOff | Phase::CircuitOpen | Phase::Stopped)
        ) && let Some(live) = pod.filter(|p| p.is_live())
        {
            // A kill recorded earlier and not carried out (the delete failed, or the operator
            // stopped between the status write and the delete): carry it out now.
            self.plan.delete_pod = Some(live.name.clone());
        }
        if self.group_orders(pod) {
            return;
        }

        match self.s.phase {
            Some(Phase::Pending | Phase::Running) if self.s.attempt > 0 => {
                self.active(pod, manual.is_some())
            }
            Some(Phase::BackingOff) => {
                if manual.is_none() && self.hold_pending() {
                    return;
                }
                let due = self
                    .s
                    .next_restart_at
                    .as_ref()
                    .is_none_or(|t| t.0 <= self.now);
                if due || manual.is_some() {
                    self.manual_event(manual.is_some());
                    self.start_next_attempt();
                } else {
                    self.plan.requeue_at = self.s.next_restart_at.as_ref().map(|t| t.0);
                }
            }
            Some(Phase::CircuitOpen) => {
                if self.held(manual.is_some()).is_none() {
                    self.circuit_open(manual.is_some());
                }
            }
            Some(Phase::Stopped) => {
                let rolled = pod.is_some_and(|p| !self.current_template(p));
                if manual.is_some() {
                    self.manual_event(true);
                    self.restart_now(self.record(Trigger::Manual));
                } else if rolled {
                    self.rollout_event();
                    self.restart_now(self.record(Trigger::Rollout));
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
                    None => self.start_next_attempt(),
                }
            }
        }
    }

    /// The breaker is open: one probe at `halfOpenAt` (or now, if asked), nothing before.
    fn circuit_open(&mut self, manual: bool) {
        let half_open_at = self.breaker().half_open_at.as_ref().map(|t| t.0);
        if half_open_at.is_none_or(|t| t <= self.now) || manual {
            if !manual && self.probe_held() {
                return;
            }
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
        self.complete_own_shutdown();
        if self.s.phase != Some(Phase::Shutdown) {
            let note = shutdown_note(self.s.shutdown.as_ref().expect("checked by the caller"));
            self.event(EventReason::ShutdownRespected, note);
        }
        self.s.phase = Some(Phase::Shutdown);
        self.s.next_restart_at = None;
    }

    /// Sets `PolicyResolved`. False when the named policy is missing: then no pod is created.
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
            self.manual_event(true);
            return self.restart_now(self.record(Trigger::Manual));
        }
        if pod.is_live() && !self.current_template(pod) {
            self.rollout_event();
            return self.restart_now(self.record(Trigger::Rollout));
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
                // After a failure, the replacement is recorded Running once it has stayed up
                // a while: one that crashes sooner was never up, and a crash loop costs one
                // status write per attempt instead of two.
                let settled = add(since, SETTLE);
                if self.s.consecutive_failures > 0
                    && self.s.phase == Some(Phase::Pending)
                    && self.now < settled
                {
                    return self.requeue(settled);
                }
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
