//! `retryAfter` in the typed termination message: what is read, and what is safely ignored.

use super::*;
use agent_supervisor::supervise::last_words::{RetryAfter, retry_after};

fn after(secs: u64) -> Option<RetryAfter> {
    Some(RetryAfter::After(std::time::Duration::from_secs(secs)))
}

#[test]
fn a_termination_message_can_ask_to_be_restarted_later() {
    let table = [
        (
            r#"{"retryAfter":"15m","reason":"rate limited"}"#,
            after(900),
        ),
        (r#"{"retryAfter":"1h30m"}"#, after(5400)),
        (r#"  {"retryAfter":"0s"}  "#, after(0)),
        (r#"{"retryAfter":"120"}"#, after(120)),
        (r#"{"retryAfter":120}"#, after(120)),
        (
            r#"{"retryAfter":1.5}"#,
            Some(RetryAfter::After(std::time::Duration::from_millis(1500))),
        ),
        (
            r#"{"retryAfter":"2026-11-22T10:00:00Z"}"#,
            Some(RetryAfter::At("2026-11-22T10:00:00Z".parse().unwrap())),
        ),
        (
            r#"{"retryAfter":"2026-11-22T11:00:00+01:00"}"#,
            Some(RetryAfter::At("2026-11-22T10:00:00Z".parse().unwrap())),
        ),
        (
            r#"{"retryAfter":"Sun, 22 Nov 2026 10:00:00 GMT"}"#,
            Some(RetryAfter::At("2026-11-22T10:00:00Z".parse().unwrap())),
        ),
    ];
    for (message, want) in table {
        assert_eq!(retry_after(message), want, "{message}");
    }
    let (ending, _) = classify_ended(&ended_pod(termination(
        1,
        Some("Error"),
        Some(r#"{"retryAfter":"15m","reason":"rate limited"}"#),
    )));
    assert_eq!(ending.retry_after, after(900));
    assert_eq!(ending.reason, FailureReason::Error);
}

#[test]
fn hostile_retry_after_values_are_ignored() {
    let padded = format!(r#"{{"retryAfter":"15m","padding":"{}"}}"#, "x".repeat(4096));
    let long = format!(r#"{{"retryAfter":"{}s"}}"#, "9".repeat(70));
    let ignored = [
        "",
        "retry after 15m",
        r#"{"retryAfter":"soon"}"#,
        r#"{"retryAfter":"-5m"}"#,
        r#"{"retryAfter":-5}"#,
        r#"{"retryAfter":1e308}"#,
        r#"{"retryAfter":31536001}"#,
        r#"{"retryAfter":"9999999h"}"#,
        r#"{"retryAfter":"P1D"}"#,
        r#"{"retryAfter":"15 m"}"#,
        r#"{"retryAfter":""}"#,
        r#"{"retryAfter":null}"#,
        r#"{"retryAfter":true}"#,
        r#"{"retryAfter":["15m"]}"#,
        r#"{"retryAfter":{"minutes":15}}"#,
        r#"{"retryAfter":"2026-13-45T99:00:00Z"}"#,
        r#"{"RetryAfter":"15m"}"#,
        r#"{"retry_after":"15m"}"#,
        r#"{"retryAfter":"15m""#,
        r#"{"retryAfter":"15m"} trailing"#,
        r#"[{"retryAfter":"15m"}]"#,
        "\u{0}\u{1}{\"retryAfter\":\"15m\"}",
        padded.as_str(),
        long.as_str(),
    ];
    for message in ignored {
        let shown: String = message.chars().take(60).collect();
        assert_eq!(retry_after(message), None, "{shown}");
        let (ending, _) = classify_ended(&ended_pod(termination(1, Some("Error"), Some(message))));
        assert_eq!(ending.retry_after, None, "{shown}");
        assert_eq!(ending.reason, FailureReason::Error, "{shown}");
    }
}
