//! `kubectl agent why NAME`: an Agent's state in one plain paragraph — what happened, what the
//! operator will do next and when, and what a person can do about it, with the exact command.
//!
//! Pure: it reads the Agent, how its policy resolved, its recent Events and its group, all
//! fetched by the caller, so every case is tested without a cluster.

mod running;
mod sandbox;
mod stopped;
mod waiting;

use jiff::Timestamp;
use serde::Serialize;

use super::text::{duration, one_line, relative, seconds};
use crate::api::{
    Agent, AgentGroup, AgentStatus, BackoffType, Failure, FailureReason, Phase, RestartPolicySpec,
    Time,
};
use crate::supervise::PolicyResolution;

/// An Event about the Agent, as `why` needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct EventFact {
    pub reason: String,
    pub message: String,
    pub warning: bool,
    /// When it last happened.
    pub last: Timestamp,
}

/// What `why` reads.
pub struct Facts<'a> {
    pub agent: &'a Agent,
    pub policy: &'a PolicyResolution,
    /// The Agent's Events, any order.
    pub events: &'a [EventFact],
    /// The group that lists the agent as a member, if any.
    pub group: Option<&'a AgentGroup>,
    pub now: Timestamp,
}

/// The explanation, in three parts; `paragraph` joins them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Why {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    /// What happened.
    pub happened: String,
    /// What the operator does next, and when.
    pub next: String,
    /// What a person can do.
    pub action: String,
    /// The command for that, if one command does it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl Why {
    pub fn paragraph(&self) -> String {
        let mut parts = vec![self.happened.as_str(), self.next.as_str()];
        parts.push(self.action.as_str());
        let mut text = parts
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(command) = &self.command {
            text.push_str("\n\n    ");
            text.push_str(command);
        }
        text
    }
}

/// How long a warning Event stays worth mentioning.
const RECENT_WARNING_SECS: i64 = 15 * 60;

pub fn explain(facts: &Facts) -> Why {
    let agent = facts.agent;
    let name = agent.metadata.name.clone().unwrap_or_default();
    let namespace = agent.metadata.namespace.clone().unwrap_or_default();
    let status = agent.status.clone().unwrap_or_default();
    let mut why = Why {
        phase: status
            .phase
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        namespace: namespace.clone(),
        name: name.clone(),
        ..Why::default()
    };

    // A named policy that does not exist blocks every new pod, whatever the phase says.
    if let PolicyResolution::Missing(missing) = facts.policy
        && !matches!(
            status.phase,
            Some(Phase::Running | Phase::Shutdown | Phase::Suspended)
        )
    {
        why.happened = format!(
            "Agent {name} names RestartPolicy {missing} in spec.restartPolicyRef, and no such policy exists in namespace {namespace}, so the operator starts no pod for it."
        );
        why.next = format!("It starts one as soon as RestartPolicy {missing} exists.");
        why.action = format!(
            "Create RestartPolicy {missing} in namespace {namespace}, or point spec.restartPolicyRef at one that exists:"
        );
        why.command = Some(format!("kubectl edit agent {name} -n {namespace}"));
        return with_context(why, facts, &status);
    }

    if sandbox::blocked(agent, &status, &mut why) {
        return with_context(why, facts, &status);
    }
    let c = Context::of(facts, name, namespace, status);
    match c.status.phase {
        None => running::unknown(&c, &mut why),
        Some(Phase::Suspended) => stopped::suspended(&c, &mut why),
        Some(Phase::Shutdown) => stopped::shut_down(&c, &mut why),
        Some(Phase::Stopped) => stopped::stopped(&c, &mut why),
        Some(Phase::CircuitOpen) if c.ready_reason == "Outage" => {
            waiting::held_by_outage(&c, &mut why)
        }
        Some(Phase::CircuitOpen) => waiting::breaker_open(&c, &mut why),
        Some(Phase::BackingOff) => waiting::backing_off(&c, &mut why),
        Some(Phase::Pending) => running::pending(&c, &mut why),
        Some(Phase::Running) => running::running(&c, &mut why),
    }
    with_context(why, facts, &c.status)
}

/// What every phase's explanation reads, worked out once.
struct Context<'a> {
    facts: &'a Facts<'a>,
    name: String,
    namespace: String,
    status: AgentStatus,
    policy: RestartPolicySpec,
    /// How the policy is named in a sentence.
    policy_name: String,
    /// The `Ready` condition's reason and message, empty without one, and when it changed.
    ready_reason: String,
    ready_message: String,
    ready_since: Option<Time>,
    /// The last failure in words, empty without one.
    last_failure: String,
    /// The current pod's name, empty without one.
    pod: String,
    now: Timestamp,
}

impl<'a> Context<'a> {
    fn of(facts: &'a Facts<'a>, name: String, namespace: String, status: AgentStatus) -> Self {
        let policy_name = match facts.policy {
            PolicyResolution::Named(n, _) => format!("RestartPolicy {n}"),
            PolicyResolution::NamespaceDefault(_) => "the namespace's RestartPolicy default".into(),
            PolicyResolution::BuiltIn | PolicyResolution::Missing(_) => {
                "the built-in policy".into()
            }
        };
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        Context {
            policy: policy_of(facts.policy),
            policy_name,
            ready_reason: ready.map(|c| c.reason.clone()).unwrap_or_default(),
            ready_message: ready.map(|c| c.message.clone()).unwrap_or_default(),
            ready_since: ready.map(|c| c.last_transition_time.clone()),
            last_failure: (status.last_failure.as_ref())
                .map(|f| failure(f, facts.now))
                .unwrap_or_default(),
            pod: status.pod_name.clone().unwrap_or_default(),
            now: facts.now,
            facts,
            name,
            namespace,
            status,
        }
    }

    /// The plugin's command `verb` for this agent.
    fn cmd(&self, verb: &str) -> String {
        format!("kubectl agent {verb} {} -n {}", self.name, self.namespace)
    }

    /// `t`, relative to now.
    fn at(&self, t: &Time) -> String {
        relative(self.now, t.0)
    }
}

/// Where the next attempt resumes from, and which checkpoint was given up on, if the agent
/// reports checkpoints; empty otherwise.
fn resumes(status: &AgentStatus, now: Timestamp) -> String {
    if status.checkpoints.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    if let (Some(from), Some(Phase::Pending | Phase::Running)) =
        (&status.resumed_from, status.phase)
    {
        out.push_str(&format!(
            " This run resumed from checkpoint {}.",
            one_line(from, 120)
        ));
    }
    out += &match crate::supervise::progress::resume_point(&status.checkpoints) {
        Some(c) => {
            let progress = c
                .progress
                .map(|p| format!(", at progress {p}"))
                .unwrap_or_default();
            format!(
                " Its next attempt resumes from checkpoint {} (reported {} by attempt {}{progress}).",
                one_line(&c.reference, 120),
                relative(now, c.at.0),
                c.attempt
            )
        }
        None => " Its next attempt starts from scratch: every checkpoint it reported is poisoned."
            .to_string(),
    };
    if let Some(poisoned) = status.checkpoints.iter().find(|c| c.poisoned) {
        out.push_str(&format!(
            " Checkpoint {} is poisoned: {} attempts in a row resumed from it and failed before getting further (a reset gives it another chance).",
            one_line(&poisoned.reference, 120),
            poisoned.failures
        ));
    }
    out
}

/// Adds what the group and the operator's recent warnings say, where they add something.
fn with_context(mut why: Why, facts: &Facts, status: &crate::api::AgentStatus) -> Why {
    if let Some(membership) = &status.group {
        let strategy = facts
            .group
            .map(|g| format!(" ({})", strategy_words(g)))
            .unwrap_or_default();
        why.happened.push_str(&format!(
            " It is a member of AgentGroup {}{strategy}, which orders its restarts.",
            membership.name
        ));
    }
    if status.phase != Some(Phase::Shutdown) {
        why.next.push_str(&resumes(status, facts.now));
    }
    let explained = [
        "Crashed",
        "HeartbeatLost",
        "NoProgress",
        "CircuitOpened",
        "RestartLimitExceeded",
        "CheckpointPoisoned",
    ];
    let warning = facts
        .events
        .iter()
        .filter(|e| e.warning && !explained.contains(&e.reason.as_str()))
        .filter(|e| seconds(e.last, facts.now) <= RECENT_WARNING_SECS)
        .max_by_key(|e| e.last);
    if let Some(e) = warning {
        why.happened.push_str(&format!(
            " The operator's latest warning ({}) is {}: {}.",
            relative(facts.now, e.last),
            e.reason,
            trim_period(&one_line(&e.message, 300))
        ));
    }
    why
}

fn strategy_words(group: &AgentGroup) -> &'static str {
    use crate::api::Strategy;
    match group.spec.strategy {
        Strategy::OneForOne => "one-for-one: a crash restarts only the member that crashed",
        Strategy::OneForAll => "one-for-all: a crash restarts every member",
        Strategy::RestForOne => {
            "rest-for-one: a crash restarts that member and the members after it"
        }
    }
}

/// What the breaker and the restart limit still allow, as a sentence (with a leading space).
fn limits_ahead(status: &crate::api::AgentStatus, policy: &RestartPolicySpec) -> String {
    let mut out = String::new();
    let threshold = policy.circuit_breaker.failure_threshold;
    if threshold > 0 && status.consecutive_failures > 0 {
        let left = threshold.saturating_sub(status.consecutive_failures);
        if left <= 1 {
            out.push_str(" If that attempt fails too, its circuit breaker opens.");
        } else {
            out.push_str(&format!(
                " {left} more failures in a row open its circuit breaker (threshold {threshold})."
            ));
        }
    }
    if policy.limits.max_restarts > 0 {
        let used = status.recent_restarts.len();
        out.push_str(&format!(
            " It has used {used} of {} restarts allowed within {}.",
            policy.limits.max_restarts,
            duration(policy.limits.window)
        ));
    }
    out
}

fn backoff_phrase(policy: &RestartPolicySpec) -> String {
    let b = &policy.backoff;
    match b.kind {
        BackoffType::Never => " — no: its policy's backoff is Never, so it would be stopped".into(),
        BackoffType::Immediate => " at once".into(),
        BackoffType::Linear => format!(
            " after {} times the number of failures in a row (at most {})",
            duration(b.initial_delay),
            duration(b.max_delay)
        ),
        BackoffType::Exponential => format!(
            " after a backoff of {}, multiplied by {} with each failure in a row, up to {}",
            duration(b.initial_delay),
            b.multiplier,
            duration(b.max_delay)
        ),
    }
}

/// A failure in words: `Error, exit code 1, after running 3s, 2m ago: "message"`.
pub fn failure(f: &Failure, now: Timestamp) -> String {
    let mut out = f.reason.as_str().to_string();
    match (f.reason, f.signal, f.exit_code) {
        (FailureReason::Signal, Some(signal), _) => {
            out.push_str(&format!(" {signal} ({})", signal_name(signal)));
        }
        (_, _, Some(code)) if f.reason != FailureReason::Completed => {
            out.push_str(&format!(", exit code {code}"));
        }
        _ => {}
    }
    if let Some(ran) = f.ran_for {
        out.push_str(&format!(", after running {}", duration(ran)));
    }
    out.push_str(&format!(", {}", relative(now, f.time.0)));
    if let Some(message) = f.message.as_deref().filter(|m| !m.trim().is_empty()) {
        out.push_str(&format!(": \"{}\"", one_line(message, 200)));
    }
    out
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "signal",
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn trim_period(s: &str) -> &str {
    s.trim().trim_end_matches('.')
}

fn policy_of(resolution: &PolicyResolution) -> RestartPolicySpec {
    match resolution {
        PolicyResolution::Named(_, spec) | PolicyResolution::NamespaceDefault(spec) => spec.clone(),
        PolicyResolution::BuiltIn | PolicyResolution::Missing(_) => RestartPolicySpec::default(),
    }
}
