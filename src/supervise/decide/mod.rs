//! The decision: given what happened to an agent, its history and its policy, at time `now` —
//! what next? A pure function of plain data: no client, no clock, no unseeded randomness.
//!
//! Here: the entry point and the phases. Leaving an agent alone (shutdown, a missing policy,
//! suspend, reset) is in `alone`, an attempt in progress in `active`, a failure's consequences
//! in `failure`, starting pods in `start`, group orders in `member`, outage holds in `outage`,
//! the conditions and the result in `set_conditions`.

/// How long a replacement made after a failure runs before it counts as `Running`: until
/// then the Agent stays `Pending` (and not `Ready`).
pub const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

mod active;
mod alone;
mod budget;
mod failure;
mod member;
mod outage;
mod progress;
mod retry_later;
mod set_conditions;
mod start;

use jiff::{SignedDuration, Timestamp};

use super::classify::add;
use super::input::{Input, PodFacts};
use super::plan::{Event, EventReason, Plan};
use crate::api::{
    AgentStatus, BreakerState, CircuitBreakerStatus, Duration, Phase, RestartPolicySpec, Shutdown,
    ShutdownType, Trigger,
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

        self.roll_budget_window();
        self.lift_budget_shutdown();
        if self.s.shutdown.is_some() {
            return self.respect_shutdown();
        }
        // A missing policy blocks creates, nothing else: suspend, kills and the recording of
        // failures go on (under the built-in policy) while it is missing.
        self.creates_blocked = !self.resolve_policy() | self.input.agent.blocked.is_some();
        // A lowered historyLimit applies at once, not at the next restart.
        self.s.restart_history.truncate(self.history_limit());
        let pod = self.current_pod();
        // Adopted first: the pod says which requests were already handled when it was made.
        // What the attempt reported on its Lease, before anything is decided on it.
        self.take_lease_reports();
        if let Some(pod) = pod.filter(|p| p.attempt > self.s.attempt) {
            self.recover_failure(pod);
            self.adopt(pod);
        }
        // Spent while it runs or waits (an attempt that has just ended is judged, and its last
        // words counted, first: `fail`).
        let ended = pod.is_some_and(|p| p.attempt == self.s.attempt && !p.is_live())
            && self
                .s
                .restart_history
                .first()
                .is_none_or(|r| r.attempt != self.s.attempt);
        if !ended && self.enforce_budget() {
            return;
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
        ) && let Some(live) = pod.filter(|p| p.needs_kill())
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

    /// Sets one of the Agent's conditions, at this decision's time and generation: true when
    /// its status flipped (or it is new).
    fn set_condition(&mut self, desired: super::conditions::Desired<'_>) -> bool {
        let generation = self.input.agent.generation;
        super::conditions::set(&mut self.s.conditions, desired, generation, self.now)
    }

    fn requeue(&mut self, at: Timestamp) {
        if at > self.now {
            self.plan.requeue_at = Some(self.plan.requeue_at.map_or(at, |t| t.min(at)));
        }
    }
}

/// A message quoted at the end of an Event note (`: <its start>`), or nothing.
fn quoted(message: Option<&str>) -> String {
    message
        .map(|m| format!(": {}", excerpt(m)))
        .unwrap_or_default()
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
