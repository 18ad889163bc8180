//! Writes that only catch the record up with a first pod still pending (it waited
//! `FIRST_RECORD_WAIT` since it was placed, or `FIRST_RECORD_QUEUE_WAIT` unplaced, and has not
//! run yet) give way to the reconciles that create pods: at
//! 10,000 Agents they came due by the thousand while the last Agents were still being created,
//! and kept those waiting (see the README's performance section).

use std::time::Duration;

use crate::api::{AgentStatus, Phase};
use crate::supervise::Plan;

/// At most this many such writes run at once, per scope.
pub(super) const TURNS: usize = 8;
/// How long one that found no turn waits before it tries again.
pub(super) const LATER: Duration = Duration::from_secs(3);

/// Whether `plan` only writes down, for an Agent never written, a first pod that has waited and
/// is still pending: nothing created, deleted or said.
pub(super) fn catching_up(before: &AgentStatus, plan: &Plan, held: bool) -> bool {
    !held
        && *before == AgentStatus::default()
        && plan.create_pod.is_none()
        && plan.delete_pod.is_none()
        && plan.events.is_empty()
        && plan.status.attempt == 1
        && plan.status.phase == Some(Phase::Pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan that writes down, for an Agent never written, its first pod still pending.
    fn recording_pending() -> Plan {
        let mut plan = Plan::default();
        plan.status.attempt = 1;
        plan.status.phase = Some(Phase::Pending);
        plan
    }

    #[test]
    fn only_the_record_of_a_first_pod_still_pending_gives_way() {
        let never = AgentStatus::default();
        assert!(catching_up(&never, &recording_pending(), false));
        // Still held: nothing is written, so nothing waits for a turn.
        assert!(!catching_up(&never, &recording_pending(), true));
        // Written before: a change of an agent already recorded is not catching up.
        let written = AgentStatus {
            attempt: 1,
            ..AgentStatus::default()
        };
        assert!(!catching_up(&written, &recording_pending(), false));
        // The pod runs: the write that records it is due now.
        let mut running = recording_pending();
        running.status.phase = Some(Phase::Running);
        assert!(!catching_up(&never, &running, false));
        // Anything else the decision does or says goes first, with its write.
        let mut saying = recording_pending();
        saying.events.push(crate::supervise::Event {
            reason: crate::supervise::EventReason::PodCreated,
            note: String::new(),
            pod: None,
        });
        assert!(!catching_up(&never, &saying, false));
        let mut deleting = recording_pending();
        deleting.delete_pod = Some("a-1".to_string());
        assert!(!catching_up(&never, &deleting, false));
    }
}
