//! Startup: a pod not running within the policy's startup timeout is killed, with the reason
//! it was waiting for.

use agent_supervisor::api::FailureReason;
use agent_supervisor::supervise::PodFacts;
use agent_supervisor::supervise::classify::{Verdict, classify};
use agent_supervisor::supervise::input::PodPhase;

use super::{STARTUP, base_pod, container, ended, no_heartbeat, waiting};
use crate::clock::t;

#[test]
fn a_pod_not_running_within_the_startup_timeout_is_killed_with_the_waiting_reason() {
    struct Row {
        name: &'static str,
        pod: PodFacts,
        message: &'static str,
    }
    let pending = |containers, unschedulable: Option<&str>| PodFacts {
        containers,
        unschedulable: unschedulable.map(str::to_string),
        ..base_pod(PodPhase::Pending)
    };
    let rows = [
        Row {
            name: "image pull back-off, with its message",
            pod: pending(
                vec![container(
                    "agent",
                    waiting(
                        "ImagePullBackOff",
                        Some("Back-off pulling image \"example.invalid/agent:1\""),
                    ),
                )],
                None,
            ),
            message: "not running after 10m: ImagePullBackOff: Back-off pulling image \"example.invalid/agent:1\"",
        },
        Row {
            name: "a waiting reason without a message",
            pod: pending(
                vec![container(
                    "agent",
                    waiting("CreateContainerConfigError", None),
                )],
                None,
            ),
            message: "not running after 10m: CreateContainerConfigError",
        },
        Row {
            name: "unschedulable",
            pod: pending(Vec::new(), Some("Unschedulable")),
            message: "not running after 10m: Unschedulable",
        },
        Row {
            name: "nothing known",
            pod: pending(Vec::new(), None),
            message: "not running after 10m: Pending",
        },
    ];
    for row in rows {
        let before = classify(&row.pod, STARTUP, no_heartbeat(), t(599));
        assert_eq!(
            before,
            Verdict::Starting { deadline: t(600) },
            "{}",
            row.name
        );
        let (ending, kill) = ended(classify(&row.pod, STARTUP, no_heartbeat(), t(601)));
        assert_eq!(ending.reason, FailureReason::StartupTimeout, "{}", row.name);
        assert!(kill, "{}: the pod is still live and must go", row.name);
        assert_eq!(ending.message.as_deref(), Some(row.message), "{}", row.name);
        assert_eq!(ending.exit_code, None, "{}", row.name);
    }
}

#[test]
fn the_startup_timeout_is_the_policys() {
    let pod = base_pod(PodPhase::Pending);
    let short = std::time::Duration::from_secs(30);
    assert_eq!(
        classify(&pod, short, no_heartbeat(), t(29)),
        Verdict::Starting { deadline: t(30) }
    );
    let (ending, _) = ended(classify(&pod, short, no_heartbeat(), t(31)));
    assert_eq!(
        ending.message.as_deref(),
        Some("not running after 30s: Pending")
    );
}
