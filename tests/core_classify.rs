//! Failure classification, table-driven: every row of SPEC.md's table, the typed shutdown
//! channel and hostile termination messages (reading real `Pod` objects: `facts`).

use agent_supervisor::api::{FailureReason, Heartbeat, ShutdownType};
use agent_supervisor::supervise::classify::{
    Ending, Liveness, MESSAGE_LIMIT, REASON_LIMIT, ShutdownRequest, Verdict, classify,
    shutdown_request, truncate,
};
use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase, Termination};
use agent_supervisor::supervise::{LeaseFacts, PodFacts};
use jiff::{SignedDuration, Timestamp};

const STARTUP: std::time::Duration = std::time::Duration::from_secs(600);
const POD: &str = "researcher-3";

#[path = "common/clock.rs"]
mod clock;
use clock::t;

fn no_heartbeat() -> Liveness<'static> {
    Liveness {
        heartbeat: None,
        lease: None,
    }
}

fn base_pod(phase: PodPhase) -> PodFacts {
    PodFacts {
        name: POD.to_string(),
        attempt: 3,
        template_hash: Some("h1".to_string()),
        created_at: t(0),
        deleting: false,
        phase,
        reason: None,
        message: None,
        disruption: None,
        unschedulable: None,
        ready: false,
        containers: Vec::new(),
        agent_container: None,
        origin: Default::default(),
    }
}

fn termination(exit_code: i32, reason: Option<&str>, message: Option<&str>) -> Termination {
    Termination {
        exit_code,
        signal: None,
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        started_at: Some(t(5)),
        finished_at: Some(t(65)),
    }
}

fn container(name: &str, state: ContainerPhase) -> ContainerFacts {
    ContainerFacts {
        name: name.to_string(),
        state,
    }
}

/// A finished pod whose one container `agent` ended with `term`.
fn ended_pod(term: Termination) -> PodFacts {
    let phase = if term.exit_code == 0 {
        PodPhase::Succeeded
    } else {
        PodPhase::Failed
    };
    PodFacts {
        containers: vec![container("agent", ContainerPhase::Terminated(term))],
        ..base_pod(phase)
    }
}

fn running_pod(started: Timestamp) -> PodFacts {
    PodFacts {
        ready: true,
        containers: vec![container(
            "agent",
            ContainerPhase::Running {
                started_at: Some(started),
            },
        )],
        ..base_pod(PodPhase::Running)
    }
}

fn waiting(reason: &str, message: Option<&str>) -> ContainerPhase {
    ContainerPhase::Waiting {
        reason: Some(reason.to_string()),
        message: message.map(str::to_string),
    }
}

/// The ending of a verdict that must be `Ended`, with its kill flag.
#[track_caller]
fn ended(verdict: Verdict) -> (Ending, bool) {
    match verdict {
        Verdict::Ended { ending, kill } => (ending, kill),
        other => panic!("expected the attempt to have ended, got {other:?}"),
    }
}

#[track_caller]
fn classify_ended(pod: &PodFacts) -> (Ending, bool) {
    ended(classify(pod, STARTUP, no_heartbeat(), t(120)))
}

// --- Exit codes ------------------------------------------------------------------------------

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

// --- Heartbeats ------------------------------------------------------------------------------

fn heartbeat(timeout: u64, grace: Option<u64>) -> Heartbeat {
    Heartbeat {
        timeout: agent_supervisor::api::Duration::from_secs(timeout),
        grace_period: grace.map(agent_supervisor::api::Duration::from_secs),
    }
}

fn lease(holder: Option<&str>, renewed: Option<Timestamp>) -> LeaseFacts {
    LeaseFacts {
        holder: holder.map(str::to_string),
        renew_time: renewed,
    }
}

#[test]
fn heartbeats_decide_whether_a_running_pod_is_alive() {
    // The pod started at t(10); heartbeats are required 60s after that, within 30s of each other.
    let hb = heartbeat(30, Some(60));
    let pod = running_pod(t(10));
    let grace_end = t(70);
    struct Row {
        name: &'static str,
        lease: Option<LeaseFacts>,
        now: Timestamp,
        /// `Some(deadline)`: still alive until then; `None`: lost.
        alive_until: Option<Timestamp>,
        message: &'static str,
    }
    let rows = [
        Row {
            name: "no lease, within grace",
            lease: None,
            now: t(69),
            alive_until: Some(grace_end),
            message: "",
        },
        Row {
            name: "no lease at all after grace",
            lease: None,
            now: t(71),
            alive_until: None,
            message: "no heartbeat within 1m of starting",
        },
        Row {
            name: "renewed recently by this pod",
            lease: Some(lease(Some(POD), Some(t(100)))),
            now: t(120),
            alive_until: Some(t(130)),
            message: "",
        },
        Row {
            name: "renewal expired",
            lease: Some(lease(Some(POD), Some(t(100)))),
            now: t(131),
            alive_until: None,
            message: "no heartbeat for 31s (timeout 30s)",
        },
        Row {
            name: "an expired renewal within grace is not yet lost",
            lease: Some(lease(Some(POD), Some(t(11)))),
            now: t(69),
            alive_until: Some(grace_end),
            message: "",
        },
        Row {
            name: "held by a stale pod, within grace",
            lease: Some(lease(Some("researcher-2"), Some(t(100)))),
            now: t(50),
            alive_until: Some(grace_end),
            message: "",
        },
        Row {
            name: "held by a stale pod that renews it, after grace",
            lease: Some(lease(Some("researcher-2"), Some(t(100)))),
            now: t(101),
            alive_until: None,
            message: "the heartbeat Lease is held by researcher-2, not by this pod",
        },
        Row {
            name: "a lease nobody holds, after grace",
            lease: Some(lease(None, None)),
            now: t(80),
            alive_until: None,
            message: "no heartbeat within 1m of starting",
        },
    ];
    for row in rows {
        let liveness = Liveness {
            heartbeat: Some(&hb),
            lease: row.lease.as_ref(),
        };
        match (classify(&pod, STARTUP, liveness, row.now), row.alive_until) {
            (
                Verdict::Running {
                    since,
                    ready,
                    heartbeat_deadline,
                },
                Some(deadline),
            ) => {
                assert_eq!(since, t(10), "{}", row.name);
                assert!(ready, "{}", row.name);
                assert_eq!(heartbeat_deadline, Some(deadline), "{}", row.name);
                assert!(row.now < deadline, "{}: the deadline is ahead", row.name);
            }
            (Verdict::Ended { ending, kill }, None) => {
                assert_eq!(ending.reason, FailureReason::HeartbeatLost, "{}", row.name);
                assert!(kill, "{}: a hung pod is still live and must go", row.name);
                assert_eq!(ending.message.as_deref(), Some(row.message), "{}", row.name);
                assert_eq!(ending.container.as_deref(), Some("agent"), "{}", row.name);
                assert_eq!(ending.started_at, Some(t(10)), "{}", row.name);
                assert_eq!(ending.exit_code, None, "{}", row.name);
            }
            (verdict, want) => panic!("{}: got {verdict:?}, want alive until {want:?}", row.name),
        }
    }
}

#[test]
fn grace_defaults_to_the_timeout() {
    let hb = heartbeat(45, None);
    let pod = running_pod(t(0));
    let at = |now| {
        classify(
            &pod,
            STARTUP,
            Liveness {
                heartbeat: Some(&hb),
                lease: None,
            },
            now,
        )
    };
    assert!(matches!(
        at(t(44)),
        Verdict::Running { heartbeat_deadline: Some(d), .. } if d == t(45)
    ));
    let (ending, _) = ended(at(t(46)));
    assert_eq!(ending.reason, FailureReason::HeartbeatLost);
}

#[test]
fn without_a_heartbeat_a_running_pod_is_trusted() {
    let pod = running_pod(t(0));
    let verdict = classify(&pod, STARTUP, no_heartbeat(), t(1_000_000));
    assert_eq!(
        verdict,
        Verdict::Running {
            since: t(0),
            ready: true,
            heartbeat_deadline: None
        }
    );
}

// --- Startup ---------------------------------------------------------------------------------

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

// --- Disruptions -----------------------------------------------------------------------------

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

// --- The typed shutdown channel --------------------------------------------------------------

#[test]
fn a_termination_message_can_ask_for_a_shutdown() {
    let rows = [
        (
            r#"{"shutdown":"economic","reason":"budget exhausted"}"#,
            ShutdownType::Economic,
            Some("budget exhausted"),
            None,
        ),
        (
            r#"{"shutdown":"voluntary","reason":"task done","message":"wrote report.md"}"#,
            ShutdownType::Voluntary,
            Some("task done"),
            Some("wrote report.md"),
        ),
        (
            "  {\"shutdown\": \"Economic\"}\n",
            ShutdownType::Economic,
            None,
            None,
        ),
        (
            r#"{"reason":42,"shutdown":"VOLUNTARY","extra":[1,2,3]}"#,
            ShutdownType::Voluntary,
            None,
            None,
        ),
    ];
    for (message, kind, reason, detail) in rows {
        let want = ShutdownRequest {
            kind,
            reason: reason.map(str::to_string),
            message: detail.map(str::to_string),
        };
        assert_eq!(shutdown_request(message), Some(want.clone()), "{message}");

        // Read from a pod, whatever the exit code.
        for exit_code in [0, 1] {
            let (ending, _) =
                classify_ended(&ended_pod(termination(exit_code, None, Some(message))));
            assert_eq!(ending.shutdown, Some(want.clone()), "{message}");
            assert_eq!(ending.message.as_deref(), Some(message), "{message}");
        }
    }
}

#[test]
fn any_container_may_ask_for_the_shutdown() {
    let pod = PodFacts {
        containers: vec![
            container(
                "agent",
                ContainerPhase::Terminated(termination(1, Some("Error"), None)),
            ),
            container(
                "budget-keeper",
                ContainerPhase::Terminated(termination(
                    0,
                    None,
                    Some(r#"{"shutdown":"economic","reason":"out of credits"}"#),
                )),
            ),
        ],
        ..base_pod(PodPhase::Failed)
    };
    let (ending, _) = classify_ended(&pod);
    assert_eq!(ending.container.as_deref(), Some("agent"));
    assert_eq!(
        ending.shutdown.map(|s| (s.kind, s.reason)),
        Some((ShutdownType::Economic, Some("out of credits".to_string())))
    );
}

#[test]
fn hostile_termination_messages_are_not_shutdown_requests() {
    let padded_request = format!(
        r#"{{"shutdown":"economic","reason":"budget exhausted","padding":"{}"}}"#,
        "x".repeat(4096)
    );
    assert!(padded_request.len() > 4096);
    let not_requests = [
        "",
        "budget exhausted",
        "{",
        r#"{"shutdown":"economic""#,
        r#"{"shutdown":"economic",}"#,
        "null",
        "42",
        r#""economic""#,
        r#"[{"shutdown":"economic"}]"#,
        r#"["shutdown","economic"]"#,
        r#"{"shutdown":true}"#,
        r#"{"shutdown":1}"#,
        r#"{"shutdown":null}"#,
        r#"{"shutdown":["economic"]}"#,
        r#"{"shutdown":{"type":"economic"}}"#,
        r#"{"shutdown":"bankrupt"}"#,
        r#"{"shutdown":""}"#,
        r#"{"shutdown":"economic "}"#,
        r#"{"Shutdown":"economic"}"#,
        r#"{"type":"Economic","reason":"budget exhausted"}"#,
        r#"{"shutdown":"economic"} trailing"#,
        r#"{"shutdown":"economic"}{"shutdown":"voluntary"}"#,
        padded_request.as_str(),
    ];
    for message in not_requests {
        let shown: String = message.chars().take(60).collect();
        assert_eq!(shutdown_request(message), None, "{shown}");
        let (ending, _) = classify_ended(&ended_pod(termination(1, Some("Error"), Some(message))));
        assert_eq!(ending.shutdown, None, "{shown}");
        assert_eq!(ending.reason, FailureReason::Error, "{shown}");
        let stored = ending.message.expect("the message is kept");
        assert!(stored.len() <= MESSAGE_LIMIT, "{shown}");
        assert!(message.starts_with(&stored), "{shown}: a prefix is kept");
    }
}

#[test]
fn the_4_kib_bound_is_inclusive_and_long_fields_are_cut_to_1_kib() {
    let prefix = r#"{"shutdown":"economic","reason":""#;
    let suffix = r#""}"#;
    let fill = 4096 - prefix.len() - suffix.len();
    let exactly = format!("{prefix}{}{suffix}", "r".repeat(fill));
    assert_eq!(exactly.len(), 4096);
    let request = shutdown_request(&exactly).expect("a 4 KiB message is read");
    assert_eq!(request.kind, ShutdownType::Economic);
    assert_eq!(
        request.reason,
        Some("r".repeat(REASON_LIMIT)),
        "a reason is cut to 256 bytes (the schema's bound)"
    );

    let over = format!("{prefix}{}{suffix}", "r".repeat(fill + 1));
    assert_eq!(shutdown_request(&over), None);

    let long_message = format!(
        r#"{{"shutdown":"voluntary","message":"{}"}}"#,
        "é".repeat(700)
    );
    assert!(long_message.len() < 4096);
    let request = shutdown_request(&long_message).expect("read");
    let stored = request.message.expect("the message is kept");
    assert_eq!(stored, "é".repeat(512), "1024 bytes of two-byte characters");
}

#[test]
fn oversized_messages_are_stored_cut_to_1_kib_on_a_character_boundary() {
    // A character of each width straddles the 1024-byte boundary.
    for wide in ["é", "€", "🦀"] {
        for offset in 0..wide.len() {
            let message = format!("{}{}tail", "a".repeat(MESSAGE_LIMIT - offset), wide);
            let (ending, _) =
                classify_ended(&ended_pod(termination(1, Some("Error"), Some(&message))));
            let stored = ending.message.expect("the message is kept");
            assert!(stored.len() <= MESSAGE_LIMIT, "{wide} at -{offset}");
            // A String is valid UTF-8 by construction; check it is the longest prefix that fits.
            assert!(message.starts_with(&stored), "{wide} at -{offset}");
            let next = message[stored.len()..].chars().next().unwrap();
            assert!(
                stored.len() + next.len_utf8() > MESSAGE_LIMIT,
                "{wide} at -{offset}: no more fits ({} bytes kept)",
                stored.len()
            );
            assert_eq!(stored.len(), MESSAGE_LIMIT - offset, "{wide} at -{offset}");
        }
    }

    // A 64 KiB message of four-byte characters.
    let huge = "🦀".repeat(16 * 1024);
    let (ending, _) = classify_ended(&ended_pod(termination(1, None, Some(&huge))));
    let stored = ending.message.unwrap();
    assert_eq!(stored, "🦀".repeat(256));
    assert_eq!(ending.shutdown, None);

    // Short messages, and messages of exactly 1 KiB, are kept whole.
    assert_eq!(truncate("short".to_string()), "short");
    let exact = "b".repeat(MESSAGE_LIMIT);
    assert_eq!(truncate(exact.clone()), exact);
}

#[test]
fn every_stored_message_is_bounded() {
    let long = "ü".repeat(3000);
    let pods = [
        // Unknown: the pod's message.
        PodFacts {
            message: Some(long.clone()),
            ..base_pod(PodPhase::Failed)
        },
        // A disruption: the pod's message.
        PodFacts {
            reason: Some("Evicted".to_string()),
            message: Some(long.clone()),
            ..base_pod(PodPhase::Failed)
        },
        // A startup timeout: the waiting message.
        PodFacts {
            containers: vec![container("agent", waiting("ErrImagePull", Some(&long)))],
            ..base_pod(PodPhase::Pending)
        },
    ];
    for pod in pods {
        let (ending, _) = ended(classify(&pod, STARTUP, no_heartbeat(), t(10_000)));
        let stored = ending.message.expect("a message");
        assert!(stored.len() <= MESSAGE_LIMIT, "{:?}", ending.reason);
        assert!(stored.len() > MESSAGE_LIMIT - 4, "{:?}", ending.reason);
    }

    // A lease holder name is not the operator's to trust either.
    let hb = heartbeat(10, None);
    let holder = "h".repeat(5000);
    let lease = lease(Some(&holder), Some(t(0)));
    let (ending, _) = ended(classify(
        &running_pod(t(0)),
        STARTUP,
        Liveness {
            heartbeat: Some(&hb),
            lease: Some(&lease),
        },
        t(100),
    ));
    assert!(ending.message.unwrap().len() <= MESSAGE_LIMIT);
}

#[path = "core_classify/facts.rs"]
mod facts;

#[path = "core_classify/retry_after.rs"]
mod retry_after;
