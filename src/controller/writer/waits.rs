//! Which decided statuses may wait for their Agent's interval: only what a successor would decide
//! again from the API server alone.

use super::MAX_UNRECORDED;
use crate::api::{AgentStatus, Phase, Trigger};
use crate::supervise::{Input, Plan, PolicyResolution};

/// Whether `plan`'s status may wait for the trailing edge, given the status as written: it
/// holds, beyond what is written, only failures (at most `MAX_UNRECORDED`) each restarted by the
/// pod made for it but the last (waiting for its backoff, or restarted too), and the phase of
/// the current pod; nothing others decide from (`watched`, a group, a shutdown, a kill, a
/// handled request, an open breaker) and nothing a successor could not decide again from the
/// pods.
pub fn may_wait(written: &AgentStatus, plan: &Plan, watched: bool) -> bool {
    let s = &plan.status;
    let routine = |s: &AgentStatus| {
        matches!(
            s.phase,
            Some(Phase::Pending | Phase::Running | Phase::BackingOff)
        )
    };
    let breaker = |s: &AgentStatus| s.circuit_breaker.as_ref().map(|b| (b.state, b.trips));
    // The first attempt whose failure the written status may not record yet.
    let first = written.attempt.max(1);
    let new_failures = s.restart_history.iter().take_while(|r| r.attempt >= first);
    let rebuildable = s.attempt >= written.attempt
        && s.attempt - written.attempt <= MAX_UNRECORDED
        && new_failures.clone().all(|r| r.trigger == Trigger::Failure)
        && new_failures.count() <= MAX_UNRECORDED as usize;
    written.attempt > 0
        && routine(written)
        && routine(s)
        && rebuildable
        && nothing_others_decide_from(written, plan, watched)
        && breaker(s) == breaker(written)
        && s.observed_generation == written.observed_generation
}

/// Whether `plan` only records a new Agent's first pod, pending or running, for an Agent never
/// written: it may wait for the interval (`Writer::first_due`), so that a burst of new Agents
/// gets its pods before their statuses, and a pod that runs soon costs one write, not two. A
/// successor adopts the pod, as after a lost write.
pub fn first_may_wait(written: &AgentStatus, plan: &Plan, watched: bool) -> bool {
    let s = &plan.status;
    *written == AgentStatus::default()
        && s.attempt == 1
        && matches!(s.phase, Some(Phase::Pending | Phase::Running))
        && s.restart_history.is_empty()
        && nothing_others_decide_from(written, plan, watched)
}

/// Whether `plan` changes nothing others decide from, against the status as written: not a
/// `watched` agent, no group member, no shutdown, no kill, no restart or reset request handled.
fn nothing_others_decide_from(written: &AgentStatus, plan: &Plan, watched: bool) -> bool {
    let s = &plan.status;
    let requests = |s: &AgentStatus| {
        (
            s.handled_restart_request.clone(),
            s.handled_reset_request.clone(),
        )
    };
    !watched
        && s.group.is_none()
        && written.group.is_none()
        && s.shutdown == written.shutdown
        && plan.record_shutdown.is_none()
        && plan.delete_pod.is_none()
        && requests(s) == requests(written)
}

/// Whether others decide from this agent's status: a policy that detects outages (it counts
/// failures from the statuses), or one that is missing. (A lost heartbeat kills a pod, and a
/// kill is written at once; the restart after it is rebuilt from the pod made for it.)
pub fn watched(input: &Input) -> bool {
    match &input.policy {
        PolicyResolution::Named(_, spec) | PolicyResolution::NamespaceDefault(spec) => {
            spec.outage.is_some()
        }
        PolicyResolution::BuiltIn => false,
        PolicyResolution::Missing(_) => true,
    }
}
