//! RestartPolicies at admission: invalid ones refused naming the field, valid ones defaulted.

use agent_supervisor::api::RestartPolicy;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::{refusal_failures, setup};

fn policy(name: &str, spec: Value) -> RestartPolicy {
    serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "RestartPolicy",
        "metadata": { "name": name }, "spec": spec
    }))
    .expect("test policy deserializes")
}

fn raw_policy(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "RestartPolicy",
        "metadata": { "name": name }, "spec": spec
    })
}

#[tokio::test]
async fn invalid_restart_policies_are_rejected_with_a_message_naming_the_field() {
    let ns = setup().await;
    // (name, spec, what the message must say)
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "delay-order",
            json!({ "backoff": { "initialDelay": "10m", "maxDelay": "5m" } }),
            vec![
                "spec.backoff.initialDelay",
                "initialDelay (10m) must not be longer than maxDelay (5m)",
            ],
        ),
        (
            "delay-order-default-max",
            json!({ "backoff": { "initialDelay": "6m" } }),
            vec![
                "spec.backoff.initialDelay",
                "must not be longer than maxDelay (5m)",
            ],
        ),
        (
            "multiplier",
            json!({ "backoff": { "multiplier": 0.5 } }),
            vec!["spec.backoff.multiplier", "greater than or equal to 1"],
        ),
        (
            "jitter-one",
            json!({ "backoff": { "jitter": 1.0 } }),
            vec!["spec.backoff.jitter", "jitter must be a fraction"],
        ),
        (
            "jitter-negative",
            json!({ "backoff": { "jitter": -0.1 } }),
            vec!["spec.backoff.jitter", "jitter must be a fraction"],
        ),
        (
            "duration-words",
            json!({ "backoff": { "initialDelay": "ten seconds" } }),
            vec![
                "spec.backoff.initialDelay",
                "must be a duration such as 30s, 5m or 1h30m",
            ],
        ),
        (
            "duration-days",
            json!({ "resetAfter": "1d" }),
            vec!["spec.resetAfter", "must be a duration"],
        ),
        (
            "duration-negative",
            json!({ "startupTimeout": "-5s" }),
            vec!["spec.startupTimeout", "must be a duration"],
        ),
        (
            "exit-code-high",
            json!({ "rules": [{ "exitCodes": { "operator": "In", "values": [256] }, "action": "Stop" }] }),
            vec![
                "spec.rules[0].exitCodes.values[0]",
                "less than or equal to 255",
            ],
        ),
        (
            "exit-code-negative",
            json!({ "rules": [{ "exitCodes": { "operator": "NotIn", "values": [0, -1] }, "action": "Stop" }] }),
            vec![
                "spec.rules[0].exitCodes.values[1]",
                "greater than or equal to 0",
            ],
        ),
        (
            "history-zero",
            json!({ "historyLimit": 0 }),
            vec!["spec.historyLimit", "greater than or equal to 1"],
        ),
        (
            "history-large",
            json!({ "historyLimit": 51 }),
            vec!["spec.historyLimit", "less than or equal to 50"],
        ),
        (
            "checkpoints-keep-zero",
            json!({ "checkpoints": { "keep": 0 } }),
            vec!["spec.checkpoints.keep", "greater than or equal to 1"],
        ),
        (
            "checkpoints-keep-large",
            json!({ "checkpoints": { "keep": 21 } }),
            vec!["spec.checkpoints.keep", "less than or equal to 20"],
        ),
        (
            "checkpoints-max-failures-zero",
            json!({ "checkpoints": { "maxFailures": 0 } }),
            vec!["spec.checkpoints.maxFailures", "greater than or equal to 1"],
        ),
        (
            "progress-stall-zero",
            json!({ "progress": { "stallTimeout": "0s" } }),
            vec![
                "spec.progress.stallTimeout",
                "stallTimeout must be longer than 0s",
            ],
        ),
        (
            "progress-stall-words",
            json!({ "progress": { "stallTimeout": "a while" } }),
            vec![
                "spec.progress.stallTimeout",
                "must be a duration such as 30s, 5m or 1h30m",
            ],
        ),
        (
            "progress-required-text",
            json!({ "progress": { "requiredForReset": "yes" } }),
            vec!["spec.progress.requiredForReset", "boolean"],
        ),
        (
            "window-zero",
            json!({ "limits": { "maxRestarts": 3, "window": "0s" } }),
            vec![
                "spec.limits.window",
                "window must be longer than 0s when maxRestarts is set",
            ],
        ),
        (
            "open-order",
            json!({ "circuitBreaker": { "openDuration": "2h" } }),
            vec![
                "spec.circuitBreaker.openDuration",
                "openDuration (2h) must not be longer than maxOpenDuration (1h)",
            ],
        ),
        (
            "open-multiplier",
            json!({ "circuitBreaker": { "openDurationMultiplier": 0 } }),
            vec![
                "spec.circuitBreaker.openDurationMultiplier",
                "greater than or equal to 1",
            ],
        ),
        (
            "backoff-type",
            json!({ "backoff": { "type": "Fibonacci" } }),
            vec!["spec.backoff.type", "Unsupported value: \"Fibonacci\""],
        ),
        (
            "rule-action",
            json!({ "rules": [{ "reasons": ["OOMKilled"], "action": "Panic" }] }),
            vec!["spec.rules[0].action", "Unsupported value: \"Panic\""],
        ),
        (
            "rule-reason",
            json!({ "rules": [{ "reasons": ["Sad"], "action": "Stop" }] }),
            vec!["spec.rules[0].reasons[0]", "Unsupported value: \"Sad\""],
        ),
        (
            "rule-no-action",
            json!({ "rules": [{ "reasons": ["Error"] }] }),
            vec!["spec.rules[0].action", "Required value"],
        ),
        (
            "outage-one-agent",
            json!({ "outage": { "agents": 1 } }),
            vec!["spec.outage.agents", "greater than or equal to 2"],
        ),
        (
            "outage-no-agents",
            json!({ "outage": { "window": "1m" } }),
            vec!["spec.outage.agents", "Required value"],
        ),
        (
            "outage-too-many",
            json!({ "outage": { "agents": 10001 } }),
            vec!["spec.outage.agents", "less than or equal to 10000"],
        ),
        (
            "outage-window-zero",
            json!({ "outage": { "agents": 3, "window": "0s" } }),
            vec!["spec.outage.window", "window must be longer than 0s"],
        ),
        (
            "outage-hold-zero",
            json!({ "outage": { "agents": 3, "holdFor": "0s" } }),
            vec!["spec.outage.holdFor", "holdFor must be longer than 0s"],
        ),
        (
            "outage-hold-words",
            json!({ "outage": { "agents": 3, "holdFor": "a while" } }),
            vec!["spec.outage.holdFor", "must be a duration"],
        ),
        (
            "retry-after-words",
            json!({ "maxRetryAfter": "forever" }),
            vec!["spec.maxRetryAfter", "must be a duration"],
        ),
        (
            "budget-negative-cost",
            json!({ "budget": { "maxCost": "-1" } }),
            vec!["spec.budget.maxCost", "should match"],
        ),
        (
            "budget-cost-words",
            json!({ "budget": { "maxCost": "ten dollars" } }),
            vec!["spec.budget.maxCost", "should match"],
        ),
        (
            "budget-window-zero",
            json!({ "budget": { "maxCost": "2", "window": "0s" } }),
            vec!["spec.budget.window", "budget window must be longer than 0s"],
        ),
        (
            "budget-warn-zero",
            json!({ "budget": { "maxCost": "2", "warnAt": 0 } }),
            vec!["spec.budget.warnAt", "must be above 0"],
        ),
        (
            "budget-warn-over-one",
            json!({ "budget": { "maxTokens": 10, "warnAt": 1.5 } }),
            vec!["spec.budget.warnAt", "less than or equal to 1"],
        ),
        (
            "budget-no-maximum",
            json!({ "budget": { "window": "1h" } }),
            vec!["spec.budget", "sets maxCost, maxTokens or both"],
        ),
        (
            "budget-negative-tokens",
            json!({ "budget": { "maxTokens": -5 } }),
            vec!["spec.budget.maxTokens", "greater than or equal to 0"],
        ),
    ];
    let mut failures = Vec::new();
    for (name, spec, expected) in cases {
        failures.extend(
            refusal_failures::<RestartPolicy>(&ns, name, raw_policy(name, spec), &expected, &[])
                .await,
        );
    }
    assert!(
        failures.is_empty(),
        "admission did not reject as expected:\n{}",
        failures.join("\n")
    );
}

#[tokio::test]
async fn valid_policies_are_accepted_and_defaulted_by_the_server() {
    let ns = setup().await;
    let api: Api<RestartPolicy> = ns.api();
    for (name, spec) in [
        ("empty", json!({})),
        (
            "fractional",
            json!({ "backoff": { "initialDelay": "1.5s", "maxDelay": "1m30s", "jitter": 0.0 } }),
        ),
        (
            "linear",
            json!({ "backoff": { "type": "Linear", "initialDelay": "0s" }, "limits": { "maxRestarts": 5 } }),
        ),
        (
            "never",
            json!({ "backoff": { "type": "Never" }, "circuitBreaker": { "failureThreshold": 0 } }),
        ),
        (
            "outage",
            json!({ "outage": { "agents": 5 }, "maxRetryAfter": "15m" }),
        ),
        ("progress", json!({ "progress": { "stallTimeout": "20m" } })),
        (
            "budget",
            json!({ "budget": { "maxCost": "25.00", "maxTokens": 0, "window": "24h" } }),
        ),
    ] {
        api.create(&PostParams::default(), &policy(name, spec))
            .await
            .unwrap_or_else(|e| panic!("{name} should be accepted: {e}"));
    }
    // The server filled in SPEC's defaults.
    let empty = api.get("empty").await.expect("read back").spec;
    assert_eq!(empty, agent_supervisor::api::RestartPolicySpec::default());
    let linear = api.get("linear").await.expect("read back").spec;
    assert_eq!(
        linear.limits.window.to_string(),
        "1h",
        "window defaults to 1h"
    );
    assert_eq!(linear.backoff.max_delay.to_string(), "5m");
    let outage = api.get("outage").await.expect("read back").spec;
    let config = outage.outage.expect("outage kept");
    assert_eq!(
        (
            config.agents,
            config.window.to_string(),
            config.hold_for.to_string()
        ),
        (5, "1m".to_string(), "5m".to_string()),
        "window and holdFor default to 1m and 5m"
    );
    assert_eq!(outage.max_retry_after.to_string(), "15m");
    let budget = api.get("budget").await.expect("read back").spec.budget;
    let budget = budget.expect("budget kept");
    assert_eq!(budget.max_cost.as_deref(), Some("25.00"));
    assert_eq!(budget.warn_at, 0.8, "warnAt defaults to 0.8");
    assert_eq!(
        empty.max_retry_after.to_string(),
        "1h",
        "maxRetryAfter defaults to 1h"
    );
    let progress = api.get("progress").await.expect("read back").spec;
    let progress = progress.progress.expect("progress kept");
    assert_eq!(
        (
            progress.stall_timeout.map(|d| d.to_string()),
            progress.required_for_reset
        ),
        (Some("20m".to_string()), false),
        "requiredForReset defaults to false"
    );
}
