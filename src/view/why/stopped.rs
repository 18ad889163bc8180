//! Agents that do not run by decision: suspended, shut down, stopped.

use super::{Context, Why};
use crate::api::{ShutdownType, Time};
use crate::view::text::{duration, one_line};

/// Suspended: spec.suspend is true.
pub(super) fn suspended(c: &Context, why: &mut Why) {
    let Context { name, pod, .. } = c;
    let cmd = |verb: &str| c.cmd(verb);
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

/// Shut down for an economic or voluntary reason: left alone.
pub(super) fn shut_down(c: &Context, why: &mut Why) {
    let Context {
        name,
        namespace,
        status,
        ..
    } = c;
    let at = |t: &Time| c.at(t);
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
    if shutdown.source.as_deref() == Some("Budget") {
        return stopped_by_budget(c, why, &when, &reason);
    }
    if shutdown.source.as_deref() == Some("GroupBudget") {
        return stopped_by_group_budget(c, why, &when, &reason);
    }
    why.happened = format!(
        "Agent {name} shut down{when} for {kind} reason{reason}{message}{source}. That was a decision to stop, not a crash."
    );
    why.next = "The operator leaves it alone: while status.shutdown is set it starts no pod, deletes no pod and schedules no restart.".into();
    why.action = "If it should run again, clear its shutdown and supervision resumes:".into();
    why.command = Some(format!(
        r#"kubectl patch agent {name} -n {namespace} --subresource=status --type=merge -p '{{"status":{{"shutdown":null}}}}'"#
    ));
}

/// Shut down by the operator because its spend reached its policy's budget: what would resume it.
fn stopped_by_budget(c: &Context, why: &mut Why, when: &str, reason: &str) {
    let Context {
        name,
        namespace,
        status,
        policy,
        policy_name,
        ..
    } = c;
    why.happened = format!(
        "Agent {name} was stopped{when} by its spend budget{reason} (the budget of {policy_name}). It starts no pod while the budget is spent, whatever its restart limits say."
    );
    let window = policy.budget.as_ref().and_then(|b| b.window);
    let since = status.spend.as_ref().map(|s| s.since.clone());
    why.next = match (window, since) {
        (Some(window), Some(since)) => format!(
            "It resumes by itself when the budget's {window} window, begun {}, moves on, or at once if the budget is raised.",
            c.at(&since)
        ),
        _ => "It resumes at once if the budget is raised (or removed); nothing else resumes it."
            .into(),
    };
    why.action = "To let it spend more, raise the policy's budget:".into();
    let policy = match c.facts.policy {
        crate::supervise::PolicyResolution::Named(n, _) => n.clone(),
        _ => "default".into(),
    };
    why.command = Some(format!(
        r#"kubectl patch restartpolicy {policy} -n {namespace} --type=merge -p '{{"spec":{{"budget":{{"maxCost":"<more>"}}}}}}'"#
    ));
}

/// Shut down by its group: the members' spend reached the group's budget (or one above it).
fn stopped_by_group_budget(c: &Context, why: &mut Why, when: &str, reason: &str) {
    let group = c.facts.group;
    let group_name = (group.and_then(|g| g.metadata.name.clone()))
        .or_else(|| c.status.group.as_ref().map(|g| g.name.clone()))
        .unwrap_or_else(|| "its group".into());
    why.happened = format!(
        "Agent {} was stopped{when} by the spend budget of group {group_name}{reason}. Every member of the group is stopped while that budget is spent.",
        c.name
    );
    let window = group
        .and_then(|g| g.spec.budget.as_ref())
        .and_then(|b| b.window);
    let since = group.and_then(|g| g.status.as_ref()?.spend.as_ref()?.since.clone());
    why.next = match (window, since) {
        (Some(window), Some(since)) => format!(
            "It resumes by itself when the group's {window} budget window, begun {}, moves on, or at once if the group's budget is raised.",
            c.at(&since)
        ),
        _ => "It resumes at once if the group's budget is raised (or removed).".into(),
    };
    why.action = "To let the group spend more, raise its budget:".into();
    why.command = Some(format!(
        r#"kubectl patch agentgroup {group_name} -n {} --type=merge -p '{{"spec":{{"budget":{{"maxCost":"<more>"}}}}}}'"#,
        c.namespace
    ));
}

/// Stopped for good: a limit, a Stop rule, a Never backoff, or its group.
pub(super) fn stopped(c: &Context, why: &mut Why) {
    let Context {
        name,
        namespace,
        status,
        policy,
        policy_name,
        ready_reason,
        ready_message,
        ready_since,
        last_failure,
        ..
    } = c;
    let cmd = |verb: &str| c.cmd(verb);
    let at = |t: &Time| c.at(t);
    let stopped_at = (ready_since.as_ref())
        .map(|t| format!(" {}", at(t)))
        .unwrap_or_default();
    let cause = match ready_reason.as_str() {
        "RestartLimitExceeded" => format!(
            "it was restarted more than {} times within {}, the limit of {policy_name}",
            policy.limits.max_restarts,
            duration(policy.limits.window)
        ),
        "StoppedByRule" => format!("a Stop rule of {policy_name} matched its last failure"),
        "PermanentFailure" => "the agent said its last failure is permanent".to_string(),
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
        _ => format!("the backoff of {policy_name} is Never: a failed agent is not restarted"),
    };
    let failure = if last_failure.is_empty() {
        String::new()
    } else {
        format!(" Its last failure: {last_failure}.")
    };
    why.happened = format!("Agent {name} was stopped{stopped_at}: {cause}.{failure}");
    why.next = "The operator will not restart it by itself.".into();
    match (ready_reason.as_str(), &status.group) {
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
