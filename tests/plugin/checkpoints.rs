//! `why` and `history` of an agent that reports checkpoints: where its next attempt resumes,
//! which checkpoint was given up on, and where each attempt resumed and how far it got.

use serde_json::json;

use crate::{agent_with, assert_says, at, failure, plugin, setup};

#[tokio::test]
async fn why_and_history_tell_where_attempts_resume_and_what_was_poisoned() {
    let ns = setup().await;
    let record = |attempt: u32, checkpoint: Option<&str>, progress: u64, ago: i64| {
        json!({
            "attempt": attempt, "trigger": "Failure", "failedAt": at(-ago), "reason": "Error",
            "class": "Transient", "exitCode": 1, "message": "boom", "ranFor": "20s",
            "backoff": "10s", "restartedAt": at(-ago + 10),
            "checkpoint": checkpoint, "progress": progress,
        })
    };
    agent_with(
        &ns,
        "resumer",
        json!({}),
        json!({
            "phase": "Running", "podName": "resumer-5", "attempt": 5, "restartCount": 4,
            "lastFailure": failure("Error", 1, "boom", 100),
            "progress": { "value": 1200, "at": at(-700) },
            "resumedFrom": "s3://runs/step-800",
            "checkpoints": [
                { "ref": "s3://runs/step-1200", "at": at(-700), "attempt": 1,
                  "progress": 1200, "failures": 3, "poisoned": true },
                { "ref": "s3://runs/step-800", "at": at(-900), "attempt": 1, "progress": 800 },
            ],
            "restartHistory": [
                record(4, Some("s3://runs/step-1200"), 1200, 100),
                record(3, Some("s3://runs/step-1200"), 1200, 300),
                record(2, Some("s3://runs/step-1200"), 1200, 500),
                record(1, None, 1200, 650),
            ],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "resumer"]);
    assert_says(
        &why,
        &[
            "Its next attempt resumes from checkpoint s3://runs/step-800 (reported 15m ago by attempt 1, at progress 800).",
            "Checkpoint s3://runs/step-1200 is poisoned: 3 attempts in a row resumed from it and failed",
            "This run resumed from checkpoint s3://runs/step-800.",
        ],
    );
    let history = plugin(&ns, &["history", "resumer"]);
    assert_says(
        &history,
        &["RESUMED FROM", "PROGRESS", "s3://runs/step-1200", "1200"],
    );
    let line = |attempt: &str| {
        history
            .lines()
            .find(|l| l.split_whitespace().next() == Some(attempt))
            .unwrap_or_else(|| panic!("no attempt {attempt} in:\n{history}"))
            .to_string()
    };
    assert!(
        line("1").contains(" - "),
        "attempt 1 started from scratch: {history}"
    );
    assert!(line("4").contains("s3://runs/step-1200"), "{history}");
    assert!(
        line("5").contains("s3://runs/step-800"),
        "the current run: {history}"
    );

    // Without reports, neither says anything of checkpoints.
    agent_with(
        &ns,
        "plain",
        json!({}),
        json!({
            "phase": "Running", "podName": "plain-2", "attempt": 2, "restartCount": 1,
            "lastFailure": failure("Error", 1, "boom", 100),
            "restartHistory": [record(1, None, 0, 100)],
        }),
    )
    .await;
    assert!(!plugin(&ns, &["why", "plain"]).contains("checkpoint"));
}

#[tokio::test]
async fn why_tells_how_long_progress_may_stand_still() {
    let ns = setup().await;
    ns.create_policy(
        "judged",
        json!({ "progress": { "stallTimeout": "10m", "requiredForReset": true } }),
    )
    .await;
    let spec = json!({
        "restartPolicyRef": { "name": "judged" },
        "heartbeat": { "timeout": "1m" },
    });
    let status = json!({
        "phase": "Running", "podName": "grinder-3", "attempt": 3, "restartCount": 2,
        "consecutiveFailures": 2,
        "lastFailure": {
            "time": at(-900), "reason": "NoProgress", "class": "Transient",
            "message": "progress stayed at 40 for 600s (stallTimeout 10m)", "ranFor": "12m",
        },
        "progress": { "value": 42, "at": at(-1200) },
    });
    agent_with(&ns, "grinder", spec, status.clone()).await;
    let why = plugin(&ns, &["why", "grinder"]);
    assert_says(
        &why,
        &[
            "If its progress (now 42, last grown 20m ago) does not grow for 10m (the stallTimeout of RestartPolicy judged), the operator stops it as NoProgress and restarts it.",
            "once it has run for 10m without failing and its progress has grown",
            "the last failure was NoProgress, after running 12m, 15m ago: \"progress stayed at 40 for 600s",
        ],
    );

    // Without a heartbeat there is no Lease to report on: no stall to speak of.
    let spec = json!({ "restartPolicyRef": { "name": "judged" } });
    agent_with(&ns, "quiet", spec, status).await;
    let why = plugin(&ns, &["why", "quiet"]);
    assert!(!why.contains("does not grow for"), "{why}");
}
