//! Restart records that wait out a crash storm.
//!
//! Under a crash storm every restart used to cost a status write, the most expensive request
//! the operator makes (see the README's performance section), and the API server those writes
//! saturate is the one the next pods wait for. While the operator creates pods at a storm's pace,
//! the record of a failure (its backoff, then the pod that replaced it) waits, in this process,
//! for the agent's next step: the next failure's write then records both, or the record is
//! written once it has waited `StormConfig::wait`. A decision made meanwhile starts from the held
//! record, as it would from the written one.
//!
//! What makes the wait safe: only one failure is ever unrecorded, and only what a successor
//! decides again from the pods: the failure itself from the pod that ended (kept until it is
//! recorded), the restart from the pod that replaced it, as after a lost status write. A record
//! that would hold a second failure is written.
//!
//! Nothing others decide from waits: not an agent with a heartbeat, not a member of a group (its
//! group orders its members by their statuses), not an agent whose policy detects outages (it
//! counts failures from the statuses).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;

use super::Context;
use crate::api::{Agent, AgentStatus, Phase, Trigger};
use crate::supervise::{Input, Plan, PolicyResolution};

/// When failure records wait, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StormConfig {
    /// Pods created within `within`, in any scope, that make a crash storm (0: never).
    pub creates: usize,
    /// How recent those creates are: a second.
    pub within: Duration,
    /// How long a failure's record waits at most.
    pub wait: Duration,
}

impl Default for StormConfig {
    fn default() -> Self {
        StormConfig {
            creates: 10,
            within: Duration::from_secs(1),
            wait: Duration::from_secs(10),
        }
    }
}

/// Whether `plan`'s record may wait, given the status as written: it records a failure of the
/// written attempt, waiting for its backoff or restarted by the pod created for it, and nothing
/// else that is news.
pub(super) fn may_wait(written: &AgentStatus, plan: &Plan, watched: bool) -> bool {
    let running = |s: &AgentStatus| matches!(s.phase, Some(Phase::Pending | Phase::Running));
    let n = written.attempt;
    let s = &plan.status;
    // What a successor would decide again from the pods: the written attempt still running
    // and its failure not recorded; then either that failure, its restart due later (decided
    // anew from the pod that ended), or one attempt after it, made for that failure (adopted
    // as after a lost write).
    let failed = s
        .restart_history
        .first()
        .is_some_and(|r| r.attempt == n && r.trigger == Trigger::Failure);
    let backing_off = s.attempt == n && s.phase == Some(Phase::BackingOff);
    let restarted = s.attempt == n.saturating_add(1) && running(s);
    let rebuilt = n > 0
        && running(written)
        && written
            .restart_history
            .first()
            .is_none_or(|r| r.attempt != n)
        && failed
        && (backing_off || restarted);
    rebuilt
        && !watched
        && s.group.is_none()
        && s.shutdown == written.shutdown
        && plan.record_shutdown.is_none()
        && plan.delete_pod.is_none()
        && plan.hold_status_until.is_none()
}

/// Holds `plan`'s record back, decided on `written` (the Agent as the server has it), when the
/// crash storm goes on and the record may wait (`may_wait`) and has not waited its fill (`held`
/// is what was held before): how long it may still wait, or `None` to write it now.
pub(super) fn hold_back(
    ctx: &Context,
    written: &Agent,
    plan: &Plan,
    held: Option<&Record>,
    watched: bool,
) -> Option<Duration> {
    let now = Instant::now();
    let since = held.map_or(now, |h| h.since);
    let waited = now.saturating_duration_since(since);
    let unset = AgentStatus::default();
    let on_server = written.status.as_ref().unwrap_or(&unset);
    let storm = ctx.creates.storm(now, ctx.storm.creates, ctx.storm.within);
    if !storm || waited >= ctx.storm.wait || !may_wait(on_server, plan, watched) {
        return None;
    }
    ctx.held.hold(written, plan.status.clone(), since);
    Some(ctx.storm.wait - waited)
}

/// Whether others decide from this agent's status, or a successor could not rebuild its failure
/// exactly from its pods: a heartbeat (a lost heartbeat is told by the Lease, not the pod), a
/// policy that detects outages, or one that is missing.
pub(super) fn watched(input: &Input) -> bool {
    let outages = match &input.policy {
        PolicyResolution::Named(_, spec) | PolicyResolution::NamespaceDefault(spec) => {
            spec.outage.is_some()
        }
        PolicyResolution::BuiltIn => false,
        PolicyResolution::Missing(_) => true,
    };
    outages || input.agent.heartbeat.is_some()
}

/// The records held back, by Agent.
#[derive(Default)]
pub struct Held(Mutex<HashMap<(String, String), Record>>);

/// One Agent's record held back.
#[derive(Clone, Debug)]
pub struct Record {
    /// The Agent's uid and the status it had when the record was decided.
    uid: String,
    written: AgentStatus,
    pub status: AgentStatus,
    /// When it began to wait.
    pub since: Instant,
}

impl Record {
    /// `agent` with this record as its status.
    pub fn apply(&self, agent: &Agent) -> Agent {
        Agent {
            status: Some(self.status.clone()),
            ..agent.clone()
        }
    }

    /// Whether it was decided on `agent`'s status as it is (its spec or metadata may differ).
    fn made_on(&self, agent: &Agent) -> bool {
        let unset = AgentStatus::default();
        agent.uid().as_deref() == Some(self.uid.as_str())
            && *agent.status.as_ref().unwrap_or(&unset) == self.written
    }
}

impl Held {
    /// The record held for `agent`, if it was decided on the Agent's status as it is (a change
    /// of its spec or annotations leaves it held). One decided on a status changed since, by
    /// someone else, is dropped: the decision adopts the pod, as after a lost write.
    pub fn get(&self, agent: &Agent) -> Option<Record> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = key(agent);
        let record = held.get(&key)?;
        if record.made_on(agent) {
            return Some(record.clone());
        }
        held.remove(&key);
        None
    }

    /// Holds `status` as `agent`'s record, decided on `agent` (the Agent as written).
    pub fn hold(&self, agent: &Agent, status: AgentStatus, since: Instant) {
        let record = Record {
            uid: agent.uid().unwrap_or_default(),
            written: agent.status.clone().unwrap_or_default(),
            status,
            since,
        };
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.insert(key(agent), record);
    }

    /// `agent`'s record was written, or the Agent is gone.
    pub fn release(&self, agent: &Agent) {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(&key(agent));
    }
}

fn key(agent: &Agent) -> (String, String) {
    (agent.namespace().unwrap_or_default(), agent.name_any())
}

#[cfg(test)]
mod tests;
