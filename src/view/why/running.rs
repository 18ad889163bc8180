//! Agents not yet acted on, starting, or running.

use super::{Context, Why, backoff_phrase, trim_period};
use crate::api::{BreakerState, Time};
use crate::view::text::{duration, relative};

/// No status yet: the operator has not acted on it.
pub(super) fn unknown(c: &Context, why: &mut Why) {
    let Context {
        name,
        namespace,
        facts,
        ..
    } = c;
    let at = |t: &Time| c.at(t);
    why.phase = "Unknown".into();
    if let Some(created) = facts.events.iter().find(|e| e.reason == "PodCreated") {
        // The pod was created and its status is not written yet: the Event came first.
        why.happened = format!(
            "Agent {name}'s first pod was created {} ({}); its status is written within the operator's status interval (--status-interval, 10s unless set).",
            relative(facts.now, created.last),
            trim_period(&created.message),
        );
        why.next = "The operator records the pod's phase within its status interval.".into();
        why.action = format!(
            "If its pod is still Pending, `kubectl describe pod` says what it waits for. If the pod runs and this stays, check that the agent-supervisor operator is running and watches namespace {namespace} (its logs say which namespaces it watches)."
        );
        return;
    }
    let age = facts
        .agent
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

/// Its pod is not running yet.
pub(super) fn pending(c: &Context, why: &mut Why) {
    let Context {
        name,
        namespace,
        status,
        policy,
        policy_name,
        ready_reason,
        ready_message,
        ready_since,
        pod,
        ..
    } = c;
    let at = |t: &Time| c.at(t);
    let since = status
        .restart_history
        .first()
        .and_then(|r| r.restarted_at.as_ref())
        .or(ready_since.as_ref())
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

/// Running.
pub(super) fn running(c: &Context, why: &mut Why) {
    let Context {
        name,
        status,
        policy,
        policy_name,
        ready_reason,
        last_failure,
        pod,
        ..
    } = c;
    let cmd = |verb: &str| c.cmd(verb);
    let progress_rules = policy.progress.clone().unwrap_or_default();
    let needs_progress = if progress_rules.required_for_reset {
        " and its progress has grown"
    } else {
        ""
    };
    let breaker = status.circuit_breaker.clone().unwrap_or_default();
    let readiness = match ready_reason.as_str() {
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
                format!(" It has been restarted {times}; the last failure was {last_failure}.")
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
            "It failed {} times in a row before this run; the count goes back to zero once it has run for {} without failing{needs_progress}. If it fails, the operator restarts it{}.",
            status.consecutive_failures,
            duration(policy.reset_after),
            backoff_phrase(policy)
        )
    } else {
        format!(
            "Nothing is scheduled: if it fails, the operator restarts it{}.",
            backoff_phrase(policy)
        )
    };
    if let Some(stall) = progress_rules.stall_timeout
        && c.facts.agent.spec.heartbeat.is_some()
    {
        let now = match &status.progress {
            Some(p) => format!(" (now {}, last grown {})", p.value, c.at(&p.at)),
            None => " (none reported yet)".to_string(),
        };
        why.next.push_str(&format!(
            " If its progress{now} does not grow for {} (the stallTimeout of {policy_name}), the operator stops it as NoProgress and restarts it.",
            duration(stall)
        ));
    }
    why.action = "Nothing needs doing. To restart it anyway:".into();
    why.command = Some(cmd("restart"));
}
