//! `why` on an agent in each phase, and what it says to do.

use serde_json::{Value, json};

use crate::support::TestNamespace;
use crate::{absolute, agent_with, assert_says, at, condition, failure, plugin, setup};

// The ages asserted are of ten minutes or more, written in whole minutes: they read the same
// for a minute, however slow the machine between writing a status and reading it.
#[tokio::test]
async fn why_explains_each_phase_and_what_to_do() {
    let ns = setup().await;
    ns.create_policy(
        "careful",
        json!({
            "backoff": { "type": "Exponential", "initialDelay": "10s", "maxDelay": "5m" },
            "limits": { "maxRestarts": 3, "window": "10m" },
            "circuitBreaker": { "failureThreshold": 5, "openDuration": "5m" },
            "resetAfter": "10m"
        }),
    )
    .await;
    let careful = json!({ "restartPolicyRef": { "name": "careful" } });

    running_after_two_restarts(&ns, &careful).await;
    backing_off_after_its_third_failure(&ns, &careful).await;
    breaker_open(&ns, &careful).await;
    held_by_an_outage(&ns, &careful).await;
    half_open_probe_runs(&ns, &careful).await;
    stopped_by_the_restart_limit(&ns, &careful).await;
    shut_down_for_an_economic_reason(&ns).await;
    stopped_by_its_budget(&ns).await;
    suspended(&ns).await;
    policy_missing(&ns).await;
    explanation_as_data(&ns);
    pending_after_a_failure(&ns, &careful).await;
}

/// Running after two restarts.
async fn running_after_two_restarts(ns: &TestNamespace, careful: &Value) {
    let n = ns.name.as_str();
    agent_with(
        ns,
        "runner",
        careful.clone(),
        json!({
            "phase": "Running", "podName": "runner-3", "attempt": 3, "restartCount": 2,
            "lastFailure": failure("Error", 1, "connection reset", 600),
            "conditions": [condition("Ready", "True", "PodReady", "pod runner-3", -300)],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "runner"]);
    assert_says(
        &why,
        &[
            "Agent runner is running: pod runner-3, attempt 3.",
            "restarted 2 times",
            "Error, exit code 1",
            "\"connection reset\"",
            "Nothing needs doing",
            &format!("kubectl agent restart runner -n {n}"),
        ],
    );
}

/// Backing off after its third failure in a row.
async fn backing_off_after_its_third_failure(ns: &TestNamespace, careful: &Value) {
    let n = ns.name.as_str();
    let due = at(600);
    agent_with(
        ns,
        "crasher",
        careful.clone(),
        json!({
            "phase": "BackingOff", "podName": "crasher-4", "attempt": 4, "restartCount": 3,
            "consecutiveFailures": 3, "nextRestartAt": due,
            "lastFailure": failure("Error", 1, "model API returned 500", 5),
            "recentRestarts": [at(-120), at(-60)],
            "restartHistory": [{
                "attempt": 4, "trigger": "Failure", "failedAt": at(-5), "reason": "Error",
                "class": "Transient", "exitCode": 1, "message": "model API returned 500",
                "ranFor": "3s", "backoff": "40s"
            }],
            "conditions": [condition("Ready", "False", "BackingOff", "restart scheduled", -5)],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "crasher"]);
    assert_says(
        &why,
        &[
            "Agent crasher crashed: Error, exit code 1, after running 3s",
            "\"model API returned 500\"",
            "its 3rd failure in a row",
            "The operator restarts it in ",
            &absolute(&due),
            "after a backoff of 40s, as attempt 5",
            "2 more failures in a row open its circuit breaker (threshold 5)",
            "used 2 of 3 restarts allowed within 10m",
            &format!("kubectl agent restart crasher -n {n}"),
        ],
    );
}

/// The breaker is open.
async fn breaker_open(ns: &TestNamespace, careful: &Value) {
    let n = ns.name.as_str();
    let probe = at(300);
    agent_with(
        ns,
        "tripped",
        careful.clone(),
        json!({
            "phase": "CircuitOpen", "attempt": 5, "restartCount": 4, "consecutiveFailures": 5,
            "lastFailure": failure("OOMKilled", 137, "", 900),
            "circuitBreaker": { "state": "Open", "trips": 2, "openedAt": at(-900), "halfOpenAt": probe },
            "conditions": [
                condition("Ready", "False", "CircuitOpen", "circuit breaker open", -900),
                condition("CircuitBreakerOpen", "True", "Tripped", "opened", -900),
            ],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "tripped"]);
    assert_says(
        &why,
        &[
            "failed 5 times in a row, most recently OOMKilled, exit code 137",
            "its circuit breaker opened 15m ago",
            "opened 2 times without recovering",
            "one probe restart through in ",
            &absolute(&probe),
            "If the probe runs for 10m, the breaker closes",
            "close the breaker and restart it now",
            &format!("kubectl agent reset tripped -n {n}"),
        ],
    );
}

/// Held by an outage of its policy.
async fn held_by_an_outage(ns: &TestNamespace, careful: &Value) {
    let n = ns.name.as_str();
    agent_with(
        ns,
        "caller",
        careful.clone(),
        json!({
            "phase": "CircuitOpen", "attempt": 1, "restartCount": 0,
            "lastFailure": failure("Error", 1, "provider: 503", 20),
            "conditions": [
                condition("Ready", "False", "Outage",
                    "held by RestartPolicy careful's outage 0123456789abcdef: next probe at 2026-11-22T15:00:00Z", -20),
                condition("CircuitBreakerOpen", "True", "Outage", "held", -20),
            ],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "caller"]);
    assert_says(
        &why,
        &[
            "Agent caller failed with Error, exit code 1",
            "treats it as an outage of something they share",
            "Its restart is held: held by RestartPolicy careful's outage 0123456789abcdef: next probe at 2026-11-22T15:00:00Z.",
            "count toward no limit",
            &format!("kubectl agent restart caller -n {n}"),
        ],
    );
    let list = plugin(ns, &["list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("caller ") && l.contains("held by outage")),
        "{list}"
    );
}

/// Half-open: the probe runs.
async fn half_open_probe_runs(ns: &TestNamespace, careful: &Value) {
    agent_with(
        ns,
        "probing",
        careful.clone(),
        json!({
            "phase": "Running", "podName": "probing-6", "attempt": 6, "restartCount": 5,
            "consecutiveFailures": 5,
            "circuitBreaker": { "state": "HalfOpen", "trips": 1, "openedAt": at(-400) },
            "conditions": [condition("Ready", "True", "PodReady", "pod probing-6", -60)],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "probing"]);
    assert_says(
        &why,
        &[
            "is running: pod probing-6",
            "This run is its circuit breaker's probe: if it keeps running for 10m, the breaker closes",
        ],
    );
}

/// Stopped by the restart limit.
async fn stopped_by_the_restart_limit(ns: &TestNamespace, careful: &Value) {
    let n = ns.name.as_str();
    agent_with(
        ns,
        "limited",
        careful.clone(),
        json!({
            "phase": "Stopped", "attempt": 4, "restartCount": 3, "consecutiveFailures": 4,
            "lastFailure": failure("Error", 2, "bad config", 900),
            "restartHistory": [{
                "attempt": 4, "trigger": "Failure", "failedAt": at(-900), "reason": "Error",
                "class": "Transient", "exitCode": 2, "message": "bad config", "ranFor": "5s",
            }],
            "conditions": [condition("Ready", "False", "RestartLimitExceeded", "more than 3 restarts", -900)],
        }),
    )
    .await;
    // Its last crash has no restart after it: not one pending.
    let history = plugin(ns, &["history", "limited"]);
    let row = history
        .lines()
        .find(|l| l.starts_with('4'))
        .unwrap_or_default();
    assert!(
        row.contains("none") && !row.contains("pending"),
        "{history}"
    );
    let why = plugin(ns, &["why", "limited"]);
    assert_says(
        &why,
        &[
            "Agent limited was stopped 15m ago: it was restarted more than 3 times within 10m, the limit of RestartPolicy careful.",
            "\"bad config\"",
            "will not restart it by itself",
            &format!("kubectl agent reset limited -n {n}"),
        ],
    );
}

/// Shut down for economic reasons, by someone else.
async fn shut_down_for_an_economic_reason(ns: &TestNamespace) {
    let n = ns.name.as_str();
    agent_with(
        ns,
        "broke",
        json!({}),
        json!({
            "phase": "Shutdown", "attempt": 2,
            "shutdown": { "type": "Economic", "reason": "budget exhausted", "at": at(-3600), "source": "economy-service" },
            "conditions": [condition("Ready", "False", "Shutdown", "left alone", -3600)],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "broke"]);
    assert_says(
        &why,
        &[
            "Agent broke shut down 60m ago for an economic reason: budget exhausted, recorded by economy-service.",
            "a decision to stop, not a crash",
            "leaves it alone",
            &format!(
                r#"kubectl patch agent broke -n {n} --subresource=status --type=merge -p '{{"status":{{"shutdown":null}}}}'"#
            ),
        ],
    );
}

/// Shut down by the operator: its spend reached its policy's budget.
async fn stopped_by_its_budget(ns: &TestNamespace) {
    let n = ns.name.as_str();
    ns.create_policy(
        "metered",
        json!({ "budget": { "maxCost": "2.00", "window": "24h" } }),
    )
    .await;
    agent_with(
        ns,
        "spender",
        json!({ "restartPolicyRef": { "name": "metered" } }),
        json!({
            "phase": "Shutdown", "attempt": 5,
            "shutdown": { "type": "Economic", "reason": "spend budget exhausted: 2.00 of 2.00", "at": at(-900), "source": "Budget" },
            "spend": { "cost": "2.00", "since": at(-7200), "current": { "attempt": 5, "cost": "0.40" } },
            "conditions": [condition("Ready", "False", "Shutdown", "left alone", -900)],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "spender"]);
    assert_says(
        &why,
        &[
            "Agent spender was stopped 15m ago by its spend budget: spend budget exhausted: 2.00 of 2.00 (the budget of RestartPolicy metered).",
            "whatever its restart limits say",
            "resumes by itself when the budget's 24h window, begun 120m ago, moves on",
            &format!(
                r#"kubectl patch restartpolicy metered -n {n} --type=merge -p '{{"spec":{{"budget":{{"maxCost":"<more>"}}}}}}'"#
            ),
        ],
    );
}

/// Suspended.
async fn suspended(ns: &TestNamespace) {
    let n = ns.name.as_str();
    agent_with(
        ns,
        "paused",
        json!({ "suspend": true }),
        json!({
            "phase": "Suspended", "attempt": 1,
            "conditions": [condition("Ready", "False", "Suspended", "spec.suspend is true", -10)],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "paused"]);
    assert_says(
        &why,
        &[
            "Agent paused is suspended",
            &format!("kubectl agent resume paused -n {n}"),
        ],
    );
}

/// Its policy does not exist.
async fn policy_missing(ns: &TestNamespace) {
    let n = ns.name.as_str();
    agent_with(
        ns,
        "orphan",
        json!({ "restartPolicyRef": { "name": "nowhere" } }),
        json!({
            "conditions": [condition("PolicyResolved", "False", "PolicyNotFound", "RestartPolicy nowhere not found", -10)],
        }),
    )
    .await;
    let why = plugin(ns, &["why", "orphan"]);
    assert_says(
        &why,
        &[
            &format!(
                "names RestartPolicy nowhere in spec.restartPolicyRef, and no such policy exists in namespace {n}, so the operator starts no pod"
            ),
            "as soon as RestartPolicy nowhere exists",
            &format!("kubectl edit agent orphan -n {n}"),
        ],
    );
}

/// Every explanation is also data.
fn explanation_as_data(ns: &TestNamespace) {
    let n = ns.name.as_str();
    let json: Value =
        serde_json::from_str(&plugin(ns, &["why", "crasher", "-o", "json"])).expect("JSON");
    assert_eq!(json["phase"], "BackingOff");
    assert_eq!(
        json["command"],
        format!("kubectl agent restart crasher -n {n}")
    );
    assert!(json["next"].as_str().unwrap().contains("restarts it in"));
}

/// Pending after a failure: the replacement is not recorded running until it has stayed up.
async fn pending_after_a_failure(ns: &TestNamespace, careful: &Value) {
    let n = ns.name.as_str();
    agent_with(
        ns,
        "replaced",
        careful.clone(),
        json!({
            "phase": "Pending", "podName": "replaced-2", "attempt": 2, "restartCount": 1,
            "consecutiveFailures": 1, "lastFailure": failure("Error", 1, "boom", 3),
        }),
    )
    .await;
    let why = plugin(ns, &["why", "replaced"]);
    assert_says(
        &why,
        &[
            "Agent replaced's pod replaced-2 (attempt 2",
            "is not running yet. After a failure, a replacement counts as running once it has stayed up 5s.",
            "the startupTimeout of RestartPolicy careful",
            &format!("kubectl describe pod replaced-2 -n {n}"),
        ],
    );
}
