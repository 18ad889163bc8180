//! `kubectl agent why NAME`: an Agent's state in one plain paragraph — what happened, what the
//! operator will do next and when, and what a person can do about it, with the exact command.
//!
//! Pure: it reads the Agent, how its policy resolved, its recent Events and its group, all
//! fetched by the caller, so every case is tested without a cluster.

use jiff::Timestamp;
use serde::Serialize;

use super::text::{duration, one_line, relative, seconds};
use crate::api::{
    Agent, AgentGroup, BackoffType, BreakerState, Failure, FailureReason, Phase, RestartPolicySpec,
    ShutdownType, Time, Trigger,
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
    let cmd = |verb: &str| format!("kubectl agent {verb} {name} -n {namespace}");
    let status = agent.status.clone().unwrap_or_default();
    let policy = policy_of(facts.policy);
    let policy_name = match facts.policy {
        PolicyResolution::Named(n, _) => format!("RestartPolicy {n}"),
        PolicyResolution::NamespaceDefault(_) => "the namespace's RestartPolicy default".into(),
        PolicyResolution::BuiltIn | PolicyResolution::Missing(_) => "the built-in policy".into(),
    };
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
    let ready_reason = ready.map(|c| c.reason.as_str()).unwrap_or_default();
    let ready_message = ready.map(|c| c.message.as_str()).unwrap_or_default();
    let now = facts.now;
    let at = |t: &Time| relative(now, t.0);
    let last_failure = status
        .last_failure
        .as_ref()
        .map(|f| failure(f, now))
        .unwrap_or_default();
    let pod = status.pod_name.clone().unwrap_or_default();

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

    match status.phase {
        None => {
            why.phase = "Unknown".into();
            let age = agent
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| format!(" (created {})", at(t)))
                .unwrap_or_default();
            why.happened =
                format!("Agent {name} has no status yet{age}: the operator has not acted on it.");
            why.next = "The operator starts its first pod as soon as it sees it.".into();
            why.action = format!(
                "If this lasts more than a few seconds, check that the agent-supervisor operator is running and watches namespace {namespace} (its logs say which namespaces it watches)."
            );
        }
        Some(Phase::Suspended) => {
            why.happened = format!("Agent {name} is suspended: its spec.suspend is true.");
            why.next = if pod.is_empty() {
                "The operator starts no pod while it is suspended.".into()
            } else {
                format!(
                    "The operator stops pod {pod} gracefully if it still runs, and starts no pod while the agent is suspended."
                )
            };
            why.action = "To resume it:".into();
            why.command = Some(cmd("resume"));
        }
        Some(Phase::Shutdown) => {
            let shutdown = status.shutdown.clone().unwrap_or(crate::api::Shutdown {
                kind: ShutdownType::Voluntary,
                reason: None,
                message: None,
                at: None,
                source: None,
            });
            let kind = match shutdown.kind {
                ShutdownType::Economic => "an economic",
                ShutdownType::Voluntary => "a voluntary",
            };
            let when = shutdown
                .at
                .as_ref()
                .map(|t| format!(" {}", at(t)))
                .unwrap_or_default();
            let reason = shutdown
                .reason
                .as_deref()
                .map(|r| format!(": {}", one_line(r, 200)))
                .unwrap_or_default();
            // A message that is the typed termination message itself says nothing more.
            let message = shutdown
                .message
                .as_deref()
                .filter(|m| !m.is_empty() && !m.trim_start().starts_with('{'))
                .map(|m| format!(" ({})", one_line(m, 200)))
                .unwrap_or_default();
            let source = shutdown
                .source
                .as_deref()
                .map(|s| format!(", recorded by {s}"))
                .unwrap_or_default();
            why.happened = format!(
                "Agent {name} shut down{when} for {kind} reason{reason}{message}{source}. That was a decision to stop, not a crash."
            );
            why.next = "The operator leaves it alone: while status.shutdown is set it starts no pod, deletes no pod and schedules no restart.".into();
            why.action =
                "If it should run again, clear its shutdown and supervision resumes:".into();
            why.command = Some(format!(
                r#"kubectl patch agent {name} -n {namespace} --subresource=status --type=merge -p '{{"status":{{"shutdown":null}}}}'"#
            ));
        }
        Some(Phase::Stopped) => {
            let stopped_at = ready
                .map(|c| format!(" {}", at(&c.last_transition_time)))
                .unwrap_or_default();
            let cause = match ready_reason {
                "RestartLimitExceeded" => format!(
                    "it was restarted more than {} times within {}, the limit of {policy_name}",
                    policy.limits.max_restarts,
                    duration(policy.limits.window)
                ),
                "StoppedByRule" => format!("a Stop rule of {policy_name} matched its last failure"),
                "GroupGaveUp" | "GroupShutdown" => {
                    let group = status
                        .group
                        .as_ref()
                        .map(|g| g.name.clone())
                        .unwrap_or_default();
                    let message = if ready_message.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", one_line(ready_message, 200))
                    };
                    if ready_reason == "GroupGaveUp" {
                        format!("its AgentGroup {group} gave up{message}")
                    } else {
                        format!("its AgentGroup {group} shut down{message}")
                    }
                }
                _ => format!(
                    "the backoff of {policy_name} is Never: a failed agent is not restarted"
                ),
            };
            let failure = if last_failure.is_empty() {
                String::new()
            } else {
                format!(" Its last failure: {last_failure}.")
            };
            why.happened = format!("Agent {name} was stopped{stopped_at}: {cause}.{failure}");
            why.next = "The operator will not restart it by itself.".into();
            match (ready_reason, &status.group) {
                ("GroupGaveUp" | "GroupShutdown", Some(group)) => {
                    why.action = format!(
                        "The group decides for its members: once the cause is fixed, reset AgentGroup {}:",
                        group.name
                    );
                    why.command = Some(format!(
                        "kubectl annotate agentgroup {} -n {namespace} --overwrite {}=\"$(date +%s)\"",
                        group.name,
                        crate::api::RESET_REQUESTED_ANNOTATION
                    ));
                }
                _ => {
                    why.action = "Once the cause is fixed, reset it: that clears the give-up and the failure count, and starts it again:".into();
                    why.command = Some(cmd("reset"));
                }
            }
        }
        Some(Phase::CircuitOpen) if ready_reason == "Outage" => {
            why.happened = format!(
                "Agent {name} failed with {last_failure}. The same failure hit many agents under {policy_name}, so the operator treats it as an outage of something they share rather than as this agent's fault."
            );
            why.next = format!(
                "Its restart is held: {}. Held restarts count toward no limit and not toward its circuit breaker.",
                trim_period(ready_message)
            );
            why.action =
                "Nothing is needed: it restarts when the outage ends. To restart it now anyway:"
                    .into();
            why.command = Some(cmd("restart"));
        }
        Some(Phase::CircuitOpen) => {
            let breaker = status.circuit_breaker.clone().unwrap_or_default();
            let opened = breaker
                .opened_at
                .as_ref()
                .map(|t| format!(" {}", at(t)))
                .unwrap_or_default();
            let trips = if breaker.trips > 1 {
                format!(
                    " (it has opened {} times without recovering)",
                    breaker.trips
                )
            } else {
                String::new()
            };
            why.happened = format!(
                "Agent {name} failed {} times in a row, most recently {last_failure}, and its circuit breaker opened{opened}{trips}.",
                status.consecutive_failures
            );
            why.next = match &breaker.half_open_at {
                Some(probe) => format!(
                    "No restart happens until the breaker lets one probe restart through {} (at {}). If the probe runs for {}, the breaker closes; if it fails, the breaker opens again for longer (at most {}).",
                    at(probe),
                    super::text::absolute(probe),
                    duration(policy.reset_after),
                    duration(
                        policy
                            .circuit_breaker
                            .max_open_duration
                            .max(policy.circuit_breaker.open_duration)
                    )
                ),
                None => "No restart happens while the breaker is open.".into(),
            };
            if ready_reason == "WaitingForGroup" && !ready_message.is_empty() {
                why.next.push_str(&format!(
                    " Its group holds it too: {}.",
                    trim_period(ready_message)
                ));
            }
            why.action = "Once the cause is fixed, close the breaker and restart it now:".into();
            why.command = Some(cmd("reset"));
        }
        Some(Phase::BackingOff) => {
            let pending = status
                .restart_history
                .first()
                .filter(|r| r.restarted_at.is_none());
            let trigger = pending.map(|r| r.trigger);
            why.happened = match trigger {
                Some(Trigger::Manual) => format!(
                    "Someone asked for Agent {name} to be restarted ({}).",
                    crate::api::RESTART_REQUESTED_ANNOTATION
                ),
                Some(Trigger::Rollout) => format!(
                    "Agent {name}'s template changed: its pod is being replaced with one from the new template."
                ),
                Some(Trigger::Disruption) => format!(
                    "Agent {name}'s pod was disrupted ({last_failure}); a disruption counts toward no limit."
                ),
                Some(Trigger::RetryAfter) => format!(
                    "Agent {name} ended with {last_failure} and asked to be restarted later (retryAfter in its termination message); that counts toward no limit and not toward its circuit breaker."
                ),
                Some(Trigger::Group) => {
                    let group = status
                        .group
                        .as_ref()
                        .map(|g| format!(" {}", g.name))
                        .unwrap_or_default();
                    format!(
                        "Agent {name}'s group{group} is restarting it together with a member that crashed; a restart the group orders counts toward none of the agent's own limits."
                    )
                }
                Some(Trigger::Outage) => format!(
                    "Agent {name}'s failure ({last_failure}) was held by an outage, which let it go: it restarts now, counted toward nothing."
                ),
                _ if last_failure.is_empty() => {
                    format!("Agent {name} is waiting to be restarted.")
                }
                _ => {
                    let count = match status.consecutive_failures {
                        0 | 1 => String::new(),
                        n => format!(" That is its {} failure in a row.", ordinal(n)),
                    };
                    format!("Agent {name} crashed: {last_failure}.{count}")
                }
            };
            let backoff = pending
                .and_then(|r| r.backoff)
                .map(|b| format!(" after a backoff of {}", duration(b)))
                .unwrap_or_default();
            why.next = match &status.next_restart_at {
                Some(due) if seconds(now, due.0) > 0 => format!(
                    "The operator restarts it {} (at {}){backoff}, as attempt {}.",
                    at(due),
                    super::text::absolute(due),
                    status.attempt + 1
                ),
                Some(due) => {
                    let budget = facts.events.iter().any(|e| {
                        e.reason == "RestartScheduled"
                            && e.message.contains("restart budget")
                            && e.last >= due.0
                    });
                    if budget {
                        format!(
                            "Its restart was due {}; it waits its turn in the operator's restart budget, which many agents restarting at once are sharing.",
                            at(due)
                        )
                    } else {
                        format!(
                            "Its restart was due {}; the operator starts it as soon as it gets to it.",
                            at(due)
                        )
                    }
                }
                None => "The operator restarts it shortly.".into(),
            };
            if ready_reason == "WaitingForGroup" && !ready_message.is_empty() {
                why.next = format!("Its group decides when: {}.", trim_period(ready_message));
            }
            if matches!(
                trigger,
                None | Some(Trigger::Failure | Trigger::HeartbeatLost)
            ) {
                why.next.push_str(&limits_ahead(&status, &policy));
            }
            why.action = "To restart it now instead of waiting:".into();
            why.command = Some(cmd("restart"));
        }
        Some(Phase::Pending) => {
            let since = status
                .restart_history
                .first()
                .and_then(|r| r.restarted_at.as_ref())
                .or(ready.map(|c| &c.last_transition_time))
                .map(|t| format!(", created {}", at(t)))
                .unwrap_or_default();
            let waiting = if ready_reason == "WaitingForGroup" {
                format!(" Its group holds it: {}.", trim_period(ready_message))
            } else {
                String::new()
            };
            // After a failure a replacement is recorded Running only once it has stayed up.
            let settling = if status.consecutive_failures > 0 {
                format!(
                    " After a failure, a replacement counts as running once it has stayed up {}.",
                    duration(crate::supervise::SETTLE.into())
                )
            } else {
                String::new()
            };
            why.happened = format!(
                "Agent {name}'s pod {pod} (attempt {}{since}) is not running yet.{settling}{waiting}",
                status.attempt
            );
            why.next = format!(
                "If it is not running within {} (the startupTimeout of {policy_name}), the operator records a StartupTimeout failure and restarts it.",
                duration(policy.startup_timeout)
            );
            why.action = "To see why the pod is not running:".into();
            why.command = Some(format!("kubectl describe pod {pod} -n {namespace}"));
        }
        Some(Phase::Running) => {
            let breaker = status.circuit_breaker.clone().unwrap_or_default();
            let readiness = match ready_reason {
                "PodReady" => "",
                "PodNotReady" => " but not ready",
                _ => "",
            };
            let restarts = match status.restart_count {
                0 => " It has never been restarted.".to_string(),
                n => {
                    let times = if n == 1 {
                        "once".to_string()
                    } else {
                        format!("{n} times")
                    };
                    if last_failure.is_empty() {
                        format!(" It has been restarted {times}.")
                    } else {
                        format!(
                            " It has been restarted {times}; the last failure was {last_failure}."
                        )
                    }
                }
            };
            why.happened = format!(
                "Agent {name} is running{readiness}: pod {pod}, attempt {}.{restarts}",
                status.attempt
            );
            why.next = if breaker.state == BreakerState::HalfOpen {
                format!(
                    "This run is its circuit breaker's probe: if it keeps running for {}, the breaker closes; if it fails, the breaker opens again for longer.",
                    duration(policy.reset_after)
                )
            } else if status.consecutive_failures > 0 {
                format!(
                    "It failed {} times in a row before this run; the count goes back to zero once it has run for {} without failing. If it fails, the operator restarts it{}.",
                    status.consecutive_failures,
                    duration(policy.reset_after),
                    backoff_phrase(&policy)
                )
            } else {
                format!(
                    "Nothing is scheduled: if it fails, the operator restarts it{}.",
                    backoff_phrase(&policy)
                )
            };
            why.action = "Nothing needs doing. To restart it anyway:".into();
            why.command = Some(cmd("restart"));
        }
    }
    with_context(why, facts, &status)
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
    let explained = [
        "Crashed",
        "HeartbeatLost",
        "CircuitOpened",
        "RestartLimitExceeded",
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
