//! Disruptions: evictions, preemptions, node loss and deletions by someone else, and what is
//! not one.

use agent_supervisor::api::FailureReason;
use agent_supervisor::supervise::PodFacts;
use agent_supervisor::supervise::classify::{Verdict, classify};
use agent_supervisor::supervise::input::PodPhase;

use super::{STARTUP, base_pod, classify_ended, ended_pod, no_heartbeat, running_pod, termination};
use crate::clock::t;

#[test]
fn disruptions_are_read_from_the_pod_reason_the_disruption_condition_or_a_deletion() {
    struct Row {
        name: &'static str,
        pod: PodFacts,
        reason: FailureReason,
        message: &'static str,
        /// Still live (not finished, not being deleted): the operator deletes it before the
        /// replacement starts, so the two are never live together.
        kill: bool,
    }
    let crashed = || ended_pod(termination(137, Some("Error"), None));
    let rows = [
        Row {
            name: "status reason Evicted",
            pod: PodFacts {
                reason: Some("Evicted".to_string()),
                message: Some("The node was low on resource: memory.".to_string()),
                ..crashed()
            },
            reason: FailureReason::Evicted,
            message: "The node was low on resource: memory.",
            kill: false,
        },
        Row {
            name: "DisruptionTarget EvictionByEvictionAPI",
            pod: PodFacts {
                disruption: Some("EvictionByEvictionAPI".to_string()),
                ..running_pod(t(5))
            },
            reason: FailureReason::Evicted,
            message: "EvictionByEvictionAPI",
            kill: true,
        },
        Row {
            name: "DisruptionTarget PreemptionByScheduler",
            pod: PodFacts {
                disruption: Some("PreemptionByScheduler".to_string()),
                ..crashed()
            },
            reason: FailureReason::Preempted,
            message: "PreemptionByScheduler",
            kill: false,
        },
        Row {
            name: "DisruptionTarget DeletionByTaintManager",
            pod: PodFacts {
                disruption: Some("DeletionByTaintManager".to_string()),
                ..running_pod(t(5))
            },
            reason: FailureReason::NodeLost,
            message: "DeletionByTaintManager",
            kill: true,
        },
        Row {
            name: "deleted by someone else while running",
            pod: PodFacts {
                deleting: true,
                ..running_pod(t(5))
            },
            reason: FailureReason::NodeLost,
            message: "the pod was deleted by someone else",
            kill: false,
        },
        Row {
            name: "deleted by someone else while pending",
            pod: PodFacts {
                deleting: true,
                ..base_pod(PodPhase::Pending)
            },
            reason: FailureReason::NodeLost,
            message: "the pod was deleted by someone else",
            kill: false,
        },
    ];
    for row in rows {
        let (ending, kill) = classify_ended(&row.pod);
        assert_eq!(ending.reason, row.reason, "{}", row.name);
        assert!(ending.reason.is_disruption(), "{}", row.name);
        assert_eq!(ending.message.as_deref(), Some(row.message), "{}", row.name);
        assert_eq!(kill, row.kill, "{}", row.name);
    }
}

#[test]
fn a_deleted_pod_that_had_already_finished_keeps_its_own_ending() {
    let pod = PodFacts {
        deleting: true,
        ..ended_pod(termination(1, Some("Error"), None))
    };
    let (ending, _) = classify_ended(&pod);
    assert_eq!(ending.reason, FailureReason::Error);
    assert_eq!(ending.exit_code, Some(1));
}

#[test]
fn a_pod_on_an_unreachable_node_is_not_yet_given_up() {
    let pod = PodFacts {
        containers: running_pod(t(5)).containers,
        ..base_pod(PodPhase::Unknown)
    };
    let verdict = classify(&pod, STARTUP, no_heartbeat(), t(10_000));
    assert_eq!(
        verdict,
        Verdict::Running {
            since: t(5),
            ready: false,
            heartbeat_deadline: None
        }
    );
}
