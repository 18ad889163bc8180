//! Bounds on what is stored: a shutdown request's 4 KiB limit, and every message and reason
//! cut on a character boundary.

use agent_supervisor::api::ShutdownType;
use agent_supervisor::supervise::PodFacts;
use agent_supervisor::supervise::classify::{
    Liveness, MESSAGE_LIMIT, REASON_LIMIT, classify, truncate,
};
use agent_supervisor::supervise::input::PodPhase;
use agent_supervisor::supervise::last_words::shutdown_request;

use super::{
    STARTUP, base_pod, classify_ended, container, ended, ended_pod, heartbeat, lease, no_heartbeat,
    running_pod, termination, waiting,
};
use crate::clock::t;

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

#[test]
fn a_typed_message_with_a_reason_is_recorded_as_that_reason() {
    // What the SDK writes when the agent's code raises: its exception, and where it got to.
    let words = r#"{"reason":"RuntimeError: the search tool timed out","progress":3,"spend":{"cost":"0.40"}}"#;
    let (ending, _) = classify_ended(&ended_pod(termination(1, Some("Error"), Some(words))));
    assert_eq!(
        ending.message.as_deref(),
        Some("RuntimeError: the search tool timed out")
    );
    assert_eq!(ending.reported.progress.as_deref(), Some("3"));
    // A blank reason says nothing: the message stays as written.
    let blank = r#"{"reason":"  ","spend":{"cost":"0.40"}}"#;
    let (ending, _) = classify_ended(&ended_pod(termination(1, Some("Error"), Some(blank))));
    assert_eq!(ending.message.as_deref(), Some(blank));
    // A reason is cut as the schema bounds it.
    let long = format!(r#"{{"reason":"{}"}}"#, "é".repeat(200));
    let (ending, _) = classify_ended(&ended_pod(termination(1, Some("Error"), Some(&long))));
    assert_eq!(ending.message, Some("é".repeat(REASON_LIMIT / 2)));
}
