//! Spend: `list` against each agent's budget, `history` per attempt, and an attempt that ended in
//! the operator's budget shutdown.

use serde_json::{Value, json};

use crate::{agent_with, assert_says, at, failure, group_with, plugin, setup};

/// The cell of `column` in the row of agent `name`: from where its header starts to where the
/// next header starts (the table is aligned, and these cells are ASCII).
fn cell(table: &str, column: &str, name: &str) -> String {
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    let start = (header.find(column)).unwrap_or_else(|| panic!("no {column}:\n{table}"));
    let after = start + column.len();
    let end = after + header[after..].find(|c: char| c != ' ').unwrap_or(0);
    let row = lines
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no row for {name}:\n{table}"));
    row[start..end].trim().to_string()
}

fn spend(cost: &str, tokens: u64, attempt: u32, current: Value) -> Value {
    let mut current = current;
    current["attempt"] = attempt.into();
    json!({ "cost": cost, "tokens": tokens, "since": at(-3600), "current": current })
}

#[tokio::test]
async fn list_and_history_show_spend_against_the_budget() {
    let ns = setup().await;
    ns.create_policy("metered", json!({ "budget": { "maxCost": "2.00" } }))
        .await;
    ns.create_policy("counted", json!({ "budget": { "maxTokens": 20000 } }))
        .await;
    let metered = json!({ "restartPolicyRef": { "name": "metered" } });
    // Five attempts crashed having spent 0.40 each; the fifth's last words spent the rest, so it
    // was stopped: its crash is recorded with no restart after it.
    let history: Vec<Value> = (1..=5)
        .rev()
        .map(|attempt: i64| {
            let failed = -3000 + 500 * attempt;
            let mut record = json!({
                "attempt": attempt, "trigger": "Failure", "failedAt": at(failed), "reason": "Error",
                "class": "Transient", "exitCode": 1, "message": "{\"spend\":{\"cost\":\"0.40\"}}",
                "ranFor": "60s", "spend": { "cost": "0.40", "tokens": 10000 }
            });
            if attempt < 5 {
                record["backoff"] = json!("10s");
                record["restartedAt"] = json!(at(failed + 10));
            }
            record
        })
        .collect();
    agent_with(
        &ns,
        "spender",
        metered.clone(),
        json!({
            "phase": "Shutdown", "attempt": 5, "restartCount": 4,
            "lastFailure": failure("Error", 1, "the model said no", 1000),
            "restartHistory": history,
            "shutdown": { "type": "Economic", "reason": "spend budget exhausted: 2.00 of 2.00", "at": at(-500), "source": "Budget" },
            "spend": spend("2.00", 50000, 5, json!({ "cost": "0.40", "tokens": 10000 })),
        }),
    )
    .await;
    agent_with(
        &ns,
        "frugal",
        metered,
        json!({ "phase": "Running", "attempt": 1, "spend": spend("0.5", 900, 1, json!({ "cost": "0.5" })) }),
    )
    .await;
    agent_with(
        &ns,
        "counter",
        json!({ "restartPolicyRef": { "name": "counted" } }),
        json!({ "phase": "Running", "attempt": 1, "spend": spend("3.10", 18000, 1, json!({})) }),
    )
    .await;
    // No policy named and no default in the namespace: no budget, the spend alone.
    agent_with(
        &ns,
        "loose",
        json!({}),
        json!({ "phase": "Running", "attempt": 1, "spend": { "cost": "0.35", "since": at(-60), "current": { "attempt": 1 } } }),
    )
    .await;
    agent_with(
        &ns,
        "quiet",
        json!({}),
        json!({ "phase": "Running", "attempt": 1 }),
    )
    .await;

    // Its second attempt said it was done: a shutdown no crash came with, in no history entry.
    agent_with(
        &ns,
        "quitter",
        json!({}),
        json!({
            "phase": "Shutdown", "attempt": 2, "restartCount": 1,
            "restartHistory": [{
                "attempt": 1, "trigger": "Failure", "failedAt": at(-300), "reason": "Error",
                "class": "Transient", "exitCode": 1, "ranFor": "60s", "backoff": "10s",
                "restartedAt": at(-290), "spend": { "cost": "0.30" }
            }],
            "shutdown": { "type": "Voluntary", "reason": "task done", "at": at(-60), "source": "TerminationMessage" },
            "spend": { "cost": "0.40", "since": at(-360), "current": { "attempt": 2, "cost": "0.10" } },
        }),
    )
    .await;

    let list = plugin(&ns, &["list"]);
    assert_says(
        list.lines().next().unwrap(),
        &[
            "NAME",
            "PHASE",
            "RESTARTS",
            "BREAKER",
            "LAST FAILURE",
            "NEXT RESTART",
            "SPEND",
            "AGE",
        ],
    );
    for (name, want) in [
        ("spender", "2.00/2.00"),
        ("frugal", "0.50/2.00"),
        ("counter", "18k/20k tokens"),
        ("loose", "0.35"),
        ("quiet", "-"),
        ("quitter", "0.40"),
    ] {
        assert_eq!(cell(&list, "SPEND", name), want, "{list}");
    }
    let rows: Value = serde_json::from_str(&plugin(&ns, &["list", "-o", "json"])).unwrap();
    let row = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {rows}"))
    };
    assert_eq!(
        row("spender")["spend"],
        json!({ "cost": "2.00", "tokens": 50000 })
    );
    assert_eq!(
        row("spender")["budget"],
        json!({ "maxCost": "2.00", "warnAt": 0.8 })
    );
    assert_eq!(row("loose")["budget"], Value::Null);
    assert_eq!(row("quiet")["spend"], Value::Null);

    let history = plugin(&ns, &["history", "spender"]);
    let lines: Vec<&str> = history.lines().collect();
    assert_says(
        lines[1],
        &["ATTEMPT", "ENDED", "RESTART", "SPENT", "TIMELINE"],
    );
    for (line, attempt) in lines[2..6].iter().zip(1..) {
        assert!(line.starts_with(&format!("{attempt} ")), "{history}");
        assert_says(line, &["Error (exit 1)", "Failure", "0.40, 10k tokens"]);
    }
    // The attempt the budget ended: how, by whom, what it spent, and that no restart follows.
    assert!(lines[6].starts_with("5 "), "{history}");
    assert_says(
        lines[6],
        &[
            "Error (exit 1), then Economic shutdown (Budget)",
            "none",
            "0.40, 10k tokens",
            "spend budget exhausted: 2.00 of 2.00",
        ],
    );
    assert!(!lines[6].contains('·'), "no wait for a restart:\n{history}");
    assert_eq!(lines.len(), 9, "five attempts, no sixth:\n{history}");
    assert_says(&history, &["Spent in all: 2.00, 50k tokens since 60m ago"]);
    let attempts: Value =
        serde_json::from_str(&plugin(&ns, &["history", "spender", "-o", "json"])).unwrap();
    assert_eq!(attempts.as_array().unwrap().len(), 5, "{attempts}");
    assert_eq!(
        attempts[0]["spend"],
        json!({ "cost": "0.40", "tokens": 10000 })
    );
    assert_eq!(attempts[4]["shutdown"]["source"], "Budget", "{attempts}");
    assert_eq!(attempts[3]["shutdown"], Value::Null, "{attempts}");

    // A shutdown that ended an attempt with no crash: its own row, from status.shutdown.
    let quitter = plugin(&ns, &["history", "quitter"]);
    let lines: Vec<&str> = quitter.lines().collect();
    assert!(lines[3].starts_with("2 "), "{quitter}");
    assert_says(
        lines[3],
        &[
            "Voluntary shutdown (TerminationMessage)",
            "none",
            "0.10",
            "task done",
        ],
    );
    let attempts: Value =
        serde_json::from_str(&plugin(&ns, &["history", "quitter", "-o", "json"])).unwrap();
    let last = &attempts[1];
    assert_eq!(
        (&last["ended"], &last["shutdown"]["type"], &last["current"]),
        (&json!("Voluntary"), &json!("Voluntary"), &json!(false)),
        "{last}"
    );
    // From the first attempt's restart to the shutdown: 3m50s, give or take the writes' second.
    assert!(last["ranFor"].as_str().unwrap().starts_with("3m"), "{last}");
    assert_eq!(last["spend"], json!({ "cost": "0.10" }));

    // The running attempt's spend so far.
    let frugal = plugin(&ns, &["history", "frugal"]);
    assert_says(
        &frugal,
        &["running", "0.50", "Spent in all: 0.50, 900 tokens"],
    );
}

/// A member stopped by its group's budget: `why` names the group's budget and its window, and
/// `tree` shows the group's spend against it.
#[tokio::test]
async fn a_member_stopped_by_its_groups_budget_is_explained() {
    let ns = setup().await;
    group_with(
        &ns,
        "crew",
        json!({
            "members": [{ "agent": "scout" }],
            "budget": { "maxCost": "1.00", "window": "24h" },
        }),
        json!({
            "phase": "Running", "ready": "0/1",
            "spend": { "cost": "1.25", "since": at(-3600), "members": [
                { "kind": "Agent", "name": "scout", "since": at(-3600), "cost": "1.25" }
            ] },
        }),
    )
    .await;
    agent_with(
        &ns,
        "scout",
        json!({}),
        json!({
            "phase": "Shutdown", "attempt": 2, "group": { "name": "crew" },
            "shutdown": { "type": "Economic", "source": "GroupBudget", "at": at(-600),
                "reason": "group crew's spend budget is used up: 1.25 of 1.00" },
            "spend": spend("1.25", 0, 2, json!({ "cost": "0.25" })),
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "scout"]);
    assert_says(
        &why,
        &[
            "was stopped 10m ago by the spend budget of group crew: group crew's spend budget is used up: 1.25 of 1.00",
            "when the group's 24h budget window, begun 60m ago, moves on",
            &format!("kubectl patch agentgroup crew -n {}", ns.name),
        ],
    );
    let tree = plugin(&ns, &["tree", "crew"]);
    assert!(
        tree.lines()
            .next()
            .unwrap_or_default()
            .contains("spent 1.25/1.00"),
        "{tree}"
    );
}
