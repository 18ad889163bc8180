//! Exit codes, signals and the agent container: how a finished attempt's ending is read from
//! its containers, by SPEC.md's table.

use agent_supervisor::api::FailureReason;
use agent_supervisor::supervise::PodFacts;
use agent_supervisor::supervise::classify::{Verdict, classify};
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase};

use super::{
    STARTUP, base_pod, classify_ended, container, ended_pod, no_heartbeat, termination, waiting,
};
use crate::clock::t;

#[test]
fn terminated_containers_get_the_reason_exit_code_and_signal_of_the_table() {
    struct Row {
        name: &'static str,
        exit_code: i32,
        runtime_reason: Option<&'static str>,
        runtime_signal: Option<i32>,
        reason: FailureReason,
        signal: Option<i32>,
    }
    let rows = [
        Row {
            name: "exit 1 is an Error",
            exit_code: 1,
            runtime_reason: Some("Error"),
            runtime_signal: None,
            reason: FailureReason::Error,
            signal: None,
        },
        Row {
            name: "exit 2 without a runtime reason is an Error",
            exit_code: 2,
            runtime_reason: None,
            runtime_signal: None,
            reason: FailureReason::Error,
            signal: None,
        },
        Row {
            name: "exit 128 is not yet a signal",
            exit_code: 128,
            runtime_reason: Some("Error"),
            runtime_signal: None,
            reason: FailureReason::Error,
            signal: None,
        },
        Row {
            name: "OOMKilled with exit 137 is OOMKilled, not signal 9",
            exit_code: 137,
            runtime_reason: Some("OOMKilled"),
            runtime_signal: None,
            reason: FailureReason::OomKilled,
            signal: None,
        },
        Row {
            name: "OOMKilled wins over a signal the runtime reports",
            exit_code: 137,
            runtime_reason: Some("OOMKilled"),
            runtime_signal: Some(9),
            reason: FailureReason::OomKilled,
            signal: None,
        },
        Row {
            name: "exit 143 is signal 15",
            exit_code: 143,
            runtime_reason: Some("Error"),
            runtime_signal: None,
            reason: FailureReason::Signal,
            signal: Some(15),
        },
        Row {
            name: "exit 137 without OOM is signal 9",
            exit_code: 137,
            runtime_reason: Some("Error"),
            runtime_signal: None,
            reason: FailureReason::Signal,
            signal: Some(9),
        },
        Row {
            name: "exit 129 is signal 1",
            exit_code: 129,
            runtime_reason: None,
            runtime_signal: None,
            reason: FailureReason::Signal,
            signal: Some(1),
        },
        Row {
            name: "a signal the runtime reports is used as is",
            exit_code: 2,
            runtime_reason: None,
            runtime_signal: Some(6),
            reason: FailureReason::Signal,
            signal: Some(6),
        },
        Row {
            name: "exit 0 is Completed",
            exit_code: 0,
            runtime_reason: Some("Completed"),
            runtime_signal: None,
            reason: FailureReason::Completed,
            signal: None,
        },
    ];
    for row in rows {
        let mut term = termination(row.exit_code, row.runtime_reason, None);
        term.signal = row.runtime_signal;
        let (ending, kill) = classify_ended(&ended_pod(term));
        assert_eq!(ending.reason, row.reason, "{}", row.name);
        assert_eq!(ending.exit_code, Some(row.exit_code), "{}", row.name);
        assert_eq!(ending.signal, row.signal, "{}", row.name);
        assert!(!kill, "{}: a finished pod needs no deleting", row.name);
        assert_eq!(ending.container.as_deref(), Some("agent"), "{}", row.name);
        assert_eq!(ending.started_at, Some(t(5)), "{}", row.name);
        assert_eq!(ending.finished_at, Some(t(65)), "{}", row.name);
        assert_eq!(ending.shutdown, None, "{}", row.name);
        // Without a termination message, the runtime's reason is the message.
        assert_eq!(
            ending.message.as_deref(),
            row.runtime_reason,
            "{}",
            row.name
        );
    }
}

#[test]
fn the_termination_message_is_the_failure_message() {
    let pod = ended_pod(termination(
        1,
        Some("Error"),
        Some("RuntimeError: upstream returned 502"),
    ));
    let (ending, _) = classify_ended(&pod);
    assert_eq!(ending.reason, FailureReason::Error);
    assert_eq!(
        ending.message.as_deref(),
        Some("RuntimeError: upstream returned 502")
    );
}

#[test]
fn the_agent_container_named_in_the_spec_explains_the_failure() {
    let pod = PodFacts {
        agent_container: Some("agent".to_string()),
        containers: vec![
            container(
                "sidecar",
                ContainerPhase::Terminated(termination(0, Some("Completed"), None)),
            ),
            container(
                "agent",
                ContainerPhase::Terminated(termination(143, Some("Error"), None)),
            ),
        ],
        ..base_pod(PodPhase::Failed)
    };
    let (ending, _) = classify_ended(&pod);
    assert_eq!(ending.reason, FailureReason::Signal);
    assert_eq!(ending.signal, Some(15));
    assert_eq!(ending.container.as_deref(), Some("agent"));
    // Unnamed, the first container is the agent: its clean exit is what the attempt did.
    let first = PodFacts {
        agent_container: None,
        ..pod
    };
    let (ending, _) = classify_ended(&first);
    assert_eq!(ending.reason, FailureReason::Completed);
    assert_eq!(ending.container.as_deref(), Some("sidecar"));
}

#[test]
fn the_attempt_ends_when_the_agent_container_ends_though_sidecars_run_on() {
    let agent_exited = ContainerPhase::Terminated(termination(1, Some("Error"), Some("boom")));
    let sidecar = ContainerPhase::Running {
        started_at: Some(t(10)),
    };
    for (containers, agent_container) in [
        (
            vec![
                container("agent", agent_exited.clone()),
                container("mesh-proxy", sidecar.clone()),
            ],
            None,
        ),
        (
            vec![
                container("mesh-proxy", sidecar.clone()),
                container("agent", agent_exited.clone()),
            ],
            Some("agent".to_string()),
        ),
    ] {
        let pod = PodFacts {
            containers,
            agent_container,
            ..base_pod(PodPhase::Running)
        };
        let (ending, kill) = classify_ended(&pod);
        assert_eq!(ending.reason, FailureReason::Error);
        assert_eq!(ending.exit_code, Some(1));
        assert_eq!(ending.message.as_deref(), Some("boom"));
        assert_eq!(ending.container.as_deref(), Some("agent"));
        assert!(kill, "the pod still runs its sidecar: it is deleted");
    }
    // A sidecar that ends while the agent runs ends nothing.
    let pod = PodFacts {
        containers: vec![
            container("agent", sidecar.clone()),
            container("mesh-proxy", agent_exited.clone()),
        ],
        ..base_pod(PodPhase::Running)
    };
    assert!(matches!(
        classify(&pod, STARTUP, no_heartbeat(), t(120)),
        Verdict::Running { .. }
    ));
}

#[test]
fn a_pod_whose_containers_all_ended_is_not_killed_while_its_phase_catches_up() {
    // A real kubelet reports the container terminated a moment before the pod's terminal phase
    // (seen on the real node: about a second). Nothing runs any more: deleting it now would only
    // lose its log, which `kubectl logs` of the previous attempt is for.
    let exited = |code| ContainerPhase::Terminated(termination(code, Some("Error"), Some("boom")));
    let pod = PodFacts {
        containers: vec![container("agent", exited(3))],
        ..base_pod(PodPhase::Running)
    };
    let (ending, kill) = classify_ended(&pod);
    assert_eq!(ending.exit_code, Some(3));
    assert!(!kill, "every container has ended: nothing to kill");
    let pod = PodFacts {
        containers: vec![container("agent", exited(3)), container("logs", exited(0))],
        ..base_pod(PodPhase::Running)
    };
    assert!(!classify_ended(&pod).1, "both containers have ended");
    // One still waiting to start (no status yet, or restarting) may yet run: killed.
    let pod = PodFacts {
        containers: vec![
            container("agent", exited(3)),
            container("logs", waiting("ContainerCreating", None)),
        ],
        ..base_pod(PodPhase::Running)
    };
    assert!(classify_ended(&pod).1, "a container may still start");
}

#[test]
fn a_failed_pod_without_container_information_is_unknown() {
    let pod = PodFacts {
        message: Some("Pod was rejected: node had a problem".to_string()),
        ..base_pod(PodPhase::Failed)
    };
    let (ending, kill) = classify_ended(&pod);
    assert_eq!(ending.reason, FailureReason::Unknown);
    assert_eq!(ending.exit_code, None);
    assert_eq!(ending.signal, None);
    assert_eq!(ending.container, None);
    assert_eq!(
        ending.message.as_deref(),
        Some("Pod was rejected: node had a problem")
    );
    assert!(!kill);

    // Containers that never terminated say nothing about how the pod ended either.
    let pod = PodFacts {
        containers: vec![container("agent", waiting("ContainerCreating", None))],
        ..base_pod(PodPhase::Failed)
    };
    let (ending, _) = classify_ended(&pod);
    assert_eq!(ending.reason, FailureReason::Unknown);
    assert_eq!(ending.message, None);
}
