//! Agents waiting to be restarted: held by an outage, behind an open breaker, backing off.

use super::{Context, Why, limits_ahead, ordinal, trim_period};
use crate::api::{Time, Trigger};
use crate::view::text::{self, duration, seconds};

/// Held by an outage of something many agents share.
pub(super) fn held_by_outage(c: &Context, why: &mut Why) {
    let Context {
        name,
        policy_name,
        ready_message,
        last_failure,
        ..
    } = c;
    let cmd = |verb: &str| c.cmd(verb);
    why.happened = format!(
        "Agent {name} failed with {last_failure}. The same failure hit many agents under {policy_name}, so the operator treats it as an outage of something they share rather than as this agent's fault."
    );
    why.next = format!(
        "Its restart is held: {}. Held restarts count toward no limit and not toward its circuit breaker.",
        trim_period(ready_message)
    );
    why.action =
        "Nothing is needed: it restarts when the outage ends. To restart it now anyway:".into();
    why.command = Some(cmd("restart"));
}

/// Behind its open circuit breaker.
pub(super) fn breaker_open(c: &Context, why: &mut Why) {
    let Context {
        name,
        status,
        policy,
        ready_reason,
        ready_message,
        last_failure,
        ..
    } = c;
    let cmd = |verb: &str| c.cmd(verb);
    let at = |t: &Time| c.at(t);
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
            text::absolute(probe),
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

/// Waiting for its restart: after a crash, or asked for.
pub(super) fn backing_off(c: &Context, why: &mut Why) {
    let Context {
        name,
        status,
        policy,
        ready_reason,
        ready_message,
        last_failure,
        now,
        facts,
        ..
    } = c;
    let cmd = |verb: &str| c.cmd(verb);
    let at = |t: &Time| c.at(t);
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
        Some(due) if seconds(*now, due.0) > 0 => format!(
            "The operator restarts it {} (at {}){backoff}, as attempt {}.",
            at(due),
            text::absolute(due),
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
        why.next.push_str(&limits_ahead(status, policy));
    }
    why.action = "To restart it now instead of waiting:".into();
    why.command = Some(cmd("restart"));
}
