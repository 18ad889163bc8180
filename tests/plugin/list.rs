//! `list`, `history` and `top`: the restarts of several agents, as tables and as data.

use serde_json::{Value, json};

use crate::{agent_with, assert_says, at, failure, plugin, setup};

#[tokio::test]
async fn list_history_and_top_show_the_restarts() {
    let ns = setup().await;
    let mut history = Vec::new();
    // Attempts 1..=3 each failed after running a while; the fourth runs now.
    for attempt in (1..=3).rev() {
        let failed = -100 * (4 - attempt);
        history.push(json!({
            "attempt": attempt, "trigger": "Failure", "failedAt": at(failed), "reason": "Error",
            "class": "Transient", "exitCode": attempt, "message": format!("failure number {attempt}"),
            "ranFor": "20s", "backoff": "10s", "restartedAt": at(failed + 10)
        }));
    }
    agent_with(
        &ns,
        "flaky",
        json!({}),
        json!({
            "phase": "Running", "podName": "flaky-4", "attempt": 4, "restartCount": 3,
            "lastFailure": failure("Error", 3, "failure number 3", 100),
            "restartHistory": history,
        }),
    )
    .await;
    let due = at(100);
    agent_with(
        &ns,
        "waiting",
        json!({}),
        json!({
            "phase": "BackingOff", "attempt": 1, "restartCount": 0, "nextRestartAt": due,
            "lastFailure": failure("OOMKilled", 137, "", 1),
        }),
    )
    .await;
    agent_with(
        &ns,
        "calm",
        json!({}),
        json!({ "phase": "Running", "attempt": 1, "podName": "calm-1" }),
    )
    .await;

    let list = plugin(&ns, &["list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{list}");
    assert_says(
        lines[0],
        &[
            "PHASE",
            "RESTARTS",
            "BREAKER",
            "LAST FAILURE",
            "NEXT RESTART",
            "AGE",
        ],
    );
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{list}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("flaky")[1..5],
        ["Running", "3", "Closed", "Error"],
        "{list}"
    );
    assert_eq!(
        row("waiting")[1..5],
        ["BackingOff", "0", "Closed", "OOMKilled"],
        "{list}"
    );
    // Due 100 s after it was written: a minute of slack for the writes and the plugin's start.
    let due_in: Vec<i64> = row("waiting")
        .windows(2)
        .filter(|w| w[0] == "in")
        .filter_map(|w| w[1].strip_suffix('s')?.parse().ok())
        .collect();
    assert!(
        matches!(due_in[..], [secs] if (40..=100).contains(&secs)),
        "{list}"
    );
    assert_eq!(row("calm")[1..5], ["Running", "0", "Closed", "-"], "{list}");

    let rows: Value = serde_json::from_str(&plugin(&ns, &["list", "-o", "json"])).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3);
    assert_eq!(rows[1]["name"], "flaky");
    assert_eq!(rows[1]["lastFailureMessage"], "failure number 3");
    let yaml: Value = serde_yaml::from_str(&plugin(&ns, &["list", "-o", "yaml"])).unwrap();
    assert_eq!(yaml, rows);
    let all = plugin(&ns, &["list", "-A"]);
    assert!(
        all.lines().next().unwrap().starts_with("NAMESPACE"),
        "{all}"
    );
    assert!(
        all.lines()
            .any(|l| l.starts_with(&ns.name) && l.contains("flaky")),
        "{all}"
    );
    let wide = plugin(&ns, &["list", "-o", "wide"]);
    assert_says(
        &wide,
        &["POD", "GROUP", "MESSAGE", "flaky-4", "failure number 3"],
    );

    let history = plugin(&ns, &["history", "flaky"]);
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines[0].starts_with("Agent flaky: Running, attempt 4, 3 restarts"),
        "{history}"
    );
    assert_says(
        lines[1],
        &[
            "ATTEMPT", "STARTED", "RAN", "ENDED", "BACKOFF", "RESTART", "TIMELINE",
        ],
    );
    // One line per attempt, oldest first, the running one last.
    for (line, attempt) in lines[2..6].iter().zip(1..) {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], attempt.to_string(), "{history}");
        if attempt < 4 {
            assert!(
                line.contains(&format!("Error (exit {attempt})")),
                "{history}"
            );
            assert!(
                line.contains("20s") && line.contains("10s") && line.contains("Failure"),
                "{history}"
            );
            assert!(
                line.contains(&format!("failure number {attempt}")),
                "{history}"
            );
            assert!(
                line.contains('█') && line.contains('·'),
                "a run and a wait:\n{history}"
            );
        } else {
            assert!(line.contains("running") && line.contains('█'), "{history}");
        }
    }
    assert!(lines[6].starts_with("Timeline: the last "), "{history}");
    let attempts: Value =
        serde_json::from_str(&plugin(&ns, &["history", "flaky", "-o", "json"])).unwrap();
    assert_eq!(attempts.as_array().unwrap().len(), 4);
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[3]["current"], true);

    let top = plugin(&ns, &["top"]);
    let lines: Vec<&str> = top.lines().collect();
    assert_says(lines[0], &["NAME", "LAST HOUR", "RESTARTS"]);
    assert!(lines[1].starts_with("flaky"), "{top}");
    assert_eq!(
        lines.len(),
        2,
        "agents that never restarted are left out:\n{top}"
    );
}
