//! The typed shutdown channel: termination messages that ask for a shutdown, from any
//! container, and hostile ones that do not.

use agent_supervisor::api::{FailureReason, ShutdownType};
use agent_supervisor::supervise::PodFacts;
use agent_supervisor::supervise::classify::MESSAGE_LIMIT;
use agent_supervisor::supervise::input::{ContainerPhase, PodPhase};
use agent_supervisor::supervise::last_words::{self, ShutdownRequest, shutdown_request};

use super::{base_pod, classify_ended, container, ended_pod, termination};

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
        match last_words::reason(message) {
            // Not a shutdown, but typed words with a reason: the reason is the message.
            Some(reason) => assert_eq!(stored, reason, "{shown}"),
            None => assert!(message.starts_with(&stored), "{shown}: a prefix is kept"),
        }
    }
}
