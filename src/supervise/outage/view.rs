//! An agent as the outage decision sees it, made from the facts the shell gathers.

use super::{AgentOutageView, FailureSeen};
use crate::api::{AgentStatus, FailureClass, Phase, Trigger};
use crate::supervise::input::{LeaseFacts, PodFacts, PodPhase};

/// What the outage decision reads of an Agent besides its status: plain facts the shell gathers
/// (`controller::facts::agent_traits`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentTraits {
    pub name: String,
    pub suspended: bool,
    /// It renews a heartbeat Lease.
    pub heartbeat: bool,
    /// Its own container has a readiness probe.
    pub readiness_probe: bool,
}

impl AgentOutageView {
    /// What the outage decision needs of `agent`, with its current pod and heartbeat Lease.
    ///
    /// Its failures are those that count: a failure restarted with backoff, or one held for an
    /// outage (restarts the agent asked to wait for, disruptions and stops are not outages).
    /// Failures of attempts up to its latest restart out of an outage are left out: an outage
    /// that ended is not declared again from the failures it held.
    pub fn of(
        agent: &AgentTraits,
        s: &AgentStatus,
        pod: Option<&PodFacts>,
        lease: Option<&LeaseFacts>,
    ) -> AgentOutageView {
        // By attempt, not by time: a probe may fail within the second it was started.
        let released = s
            .restart_history
            .iter()
            .find(|r| r.trigger == Trigger::Outage && r.restarted_at.is_some())
            .map(|r| r.attempt);
        let failures = s
            .restart_history
            .iter()
            .filter(|r| {
                r.class == Some(FailureClass::Transient)
                    && matches!(
                        r.trigger,
                        Trigger::Failure | Trigger::HeartbeatLost | Trigger::Outage
                    )
            })
            .filter_map(|r| {
                let at = r.failed_at.as_ref()?.0;
                Some(FailureSeen {
                    fingerprint: r.fingerprint.clone()?,
                    at,
                    attempt: r.attempt,
                    reason: r.reason?,
                    message: r.message.clone(),
                    fresh: r.trigger != Trigger::Outage,
                })
            })
            .filter(|f| released.is_none_or(|r| f.attempt > r))
            .collect();
        let pending = s
            .restart_history
            .first()
            .filter(|r| r.restarted_at.is_none() && r.trigger == Trigger::Outage);
        let held = pending
            .filter(|_| s.phase == Some(Phase::CircuitOpen) && s.shutdown.is_none())
            .and_then(|r| Some((r.fingerprint.clone()?, r.failed_at.as_ref()?.0)));
        let pod = pod.filter(|p| p.attempt == s.attempt && p.phase == PodPhase::Running);
        let (readiness, heartbeat) = (agent.readiness_probe, agent.heartbeat);
        let running_since = pod.map(|p| p.started_at().unwrap_or(p.created_at));
        let renewed = pod.zip(lease).is_some_and(|(p, l)| {
            l.holder.as_deref() == Some(p.name.as_str())
                && l.renew_time
                    .zip(running_since)
                    .is_some_and(|(renewed, since)| renewed >= since)
        });
        let ready = pod.is_some_and(|p| p.ready);
        AgentOutageView {
            name: agent.name.clone(),
            attempt: s.attempt,
            failures,
            available: held.is_some() && !agent.suspended,
            held,
            running_since,
            proven: (readiness || heartbeat) && (!readiness || ready) && (!heartbeat || renewed),
            provable: readiness || heartbeat,
        }
    }
}
