//! The API server itself rejects invalid RestartPolicies and Agents, with messages that name the
//! field and the fix; valid manifests (every file in examples/) are accepted; `kubectl explain`
//! shows the field docs. The same for AgentGroups: admission/group.rs.

mod support;

#[path = "admission/group.rs"]
mod group;

use agent_supervisor::api::{Agent, RestartPolicy};
use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube::{Api, Resource};
use serde_json::{Value, json};
use support::TestNamespace;

async fn setup() -> TestNamespace {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    ns
}

fn policy(name: &str, spec: Value) -> RestartPolicy {
    serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "RestartPolicy",
        "metadata": { "name": name }, "spec": spec
    }))
    .expect("test policy deserializes")
}

/// Creates a raw object, bypassing the Rust types (so invalid values reach the server).
async fn create_raw<K: Resource<DynamicType = ()>>(
    ns: &TestNamespace,
    object: Value,
) -> Result<(), String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::erase::<K>(&()));
    let object: DynamicObject = serde_json::from_value(object).expect("valid object shape");
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(e) => panic!("unexpected client error: {e}"),
    }
}

/// Creates `object` (case `name`) and says how admission failed to refuse it as expected:
/// accepted, or refused with a message lacking one of `expected` or containing one of `absent`.
/// Empty: refused as expected.
async fn refusal_failures<K: Resource<DynamicType = ()>>(
    ns: &TestNamespace,
    name: &str,
    object: Value,
    expected: &[&str],
    absent: &[&str],
) -> Vec<String> {
    let message = match create_raw::<K>(ns, object.clone()).await {
        Ok(()) => return vec![format!("{name}: {object} was accepted")],
        Err(message) => message,
    };
    let missing = expected
        .iter()
        .filter(|want| !message.contains(*want))
        .map(|want| format!("{name}: message {message:?} does not contain {want:?}"));
    let wrong = absent
        .iter()
        .filter(|unwanted| message.contains(*unwanted))
        .map(|unwanted| format!("{name}: message {message:?} should not say {unwanted:?}"));
    missing.chain(wrong).collect()
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
    assert_eq!(
        empty.max_retry_after.to_string(),
        "1h",
        "maxRetryAfter defaults to 1h"
    );
}

#[tokio::test]
async fn invalid_agents_are_rejected() {
    let ns = setup().await;
    let agent = |spec: Value| json!({ "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent", "metadata": { "name": "a" }, "spec": spec });
    let template = json!({ "spec": { "containers": [{ "name": "agent", "image": "busybox" }] } });
    let cases = [
        (json!({}), vec!["spec.template", "Required value"]),
        (
            json!({ "template": { "spec": {} } }),
            vec!["spec.template.spec.containers", "Required value"],
        ),
        (
            json!({ "template": template, "heartbeat": { "timeout": "0s" } }),
            vec![
                "spec.heartbeat.timeout",
                "heartbeat timeout must be longer than 0s",
            ],
        ),
        (
            json!({ "template": template, "heartbeat": { "timeout": "soon" } }),
            vec!["spec.heartbeat.timeout", "must be a duration"],
        ),
        (
            json!({ "template": template, "heartbeat": { "timeout": "1h", "gracePeriod": "9999999999999999h" } }),
            vec!["spec.heartbeat.gracePeriod", "must be a duration"],
        ),
        (
            json!({ "template": template, "restartPolicyRef": { "name": "" } }),
            vec!["spec.restartPolicyRef.name"],
        ),
        (
            json!({ "template": template, "volumeClaimTemplates": [{ "metadata": { "name": "Bad_Name" }, "spec": {} }] }),
            vec!["spec.volumeClaimTemplates[0].metadata.name"],
        ),
        (
            json!({ "template": template, "agentContainer": "sidecar" }),
            vec![
                "spec.agentContainer",
                "agentContainer must name one of the template's containers",
            ],
        ),
    ];
    let mut failures = Vec::new();
    for (spec, expected) in cases {
        match create_raw::<Agent>(&ns, agent(spec.clone())).await {
            Ok(()) => failures.push(format!("{spec} was accepted")),
            Err(message) => {
                for want in expected {
                    if !message.contains(want) {
                        failures.push(format!(
                            "{spec}: message {message:?} does not contain {want:?}"
                        ));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "admission did not reject as expected:\n{}",
        failures.join("\n")
    );
}

#[tokio::test]
async fn every_example_manifest_is_accepted() {
    let ns = setup().await;
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut count = 0;
    for entry in std::fs::read_dir(&examples).expect("examples/ exists") {
        let path = entry.expect("readable entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let out = support::kubectl()
            .args(["apply", "--dry-run=server", "-n", &ns.name, "-f"])
            .arg(&path)
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "{} was rejected:\n{}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        count += 1;
    }
    assert!(
        count >= 2,
        "expected the example manifests in {}, found {count}",
        examples.display()
    );
}

/// `kubectl explain path`. The API server publishes a new CRD's OpenAPI schema a moment after it
/// is Established: retried for up to a minute.
async fn explain(path: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = support::kubectl()
            .args(["explain", path])
            .output()
            .expect("run kubectl explain");
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl explain {path} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn kubectl_explain_shows_the_field_docs() {
    let ns = setup().await;
    drop(ns);
    let heartbeat = explain("agent.spec.heartbeat").await;
    for want in [
        "renews a Lease named after the Agent",
        "timeout",
        "gracePeriod",
        "HeartbeatLost",
    ] {
        assert!(
            heartbeat.contains(want),
            "explain agent.spec.heartbeat lacks {want:?}:\n{heartbeat}"
        );
    }
    let backoff = explain("restartpolicy.spec.backoff").await;
    for want in [
        "How long to wait before each restart",
        "initialDelay",
        "maxDelay",
        "multiplier",
        "jitter",
        "Exponential",
    ] {
        assert!(
            backoff.contains(want),
            "explain restartpolicy.spec.backoff lacks {want:?}:\n{backoff}"
        );
    }
    let outage = explain("restartpolicy.spec.outage").await;
    for want in ["Distinct agents", "holdFor", "probe", "window"] {
        assert!(
            outage.contains(want),
            "explain restartpolicy.spec.outage lacks {want:?}:\n{outage}"
        );
    }
    let outages = explain("restartpolicy.status.outages").await;
    for want in ["fingerprint", "probeAgent", "nextProbeAt", "Holding"] {
        assert!(
            outages.contains(want),
            "explain restartpolicy.status.outages lacks {want:?}:\n{outages}"
        );
    }
    let status = explain("agent.status.restartHistory").await;
    assert!(
        status.contains("newest first"),
        "explain agent.status.restartHistory:\n{status}"
    );
}

#[tokio::test]
async fn names_an_agent_cannot_run_under_are_refused_and_free_text_is_bounded() {
    let ns = setup().await;
    let template = json!({ "spec": { "containers": [{ "name": "agent", "image": "busybox" }] } });
    let agent = |name: &str| json!({ "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent", "metadata": { "name": name }, "spec": { "template": template } });
    // The name is the value of the supervisor.dev/agent label on its pods: 63 characters at most.
    let message = create_raw::<Agent>(&ns, agent(&"a".repeat(64)))
        .await
        .expect_err("a 64-character name is refused");
    assert!(
        message.contains("an Agent's name must be at most 63 characters"),
        "{message}"
    );
    create_raw::<Agent>(&ns, agent(&"a".repeat(63)))
        .await
        .expect("a 63-character name is accepted");

    // A shutdown written by someone else: its free text is bounded, so every Event about it fits.
    let agents: Api<Agent> = Api::namespaced(ns.client.clone(), &ns.name);
    let write = |reason: String, message: String| {
        let agents = agents.clone();
        async move {
            let patch = json!({ "status": { "shutdown": { "type": "Economic", "reason": reason, "message": message } } });
            agents
                .patch_status(
                    &"a".repeat(63),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
        }
    };
    let too_long = write("r".repeat(257), String::new())
        .await
        .expect_err("a 257-character reason");
    assert!(
        too_long.to_string().contains("status.shutdown.reason"),
        "{too_long}"
    );
    let too_long = write("r".into(), "é".repeat(1025))
        .await
        .expect_err("a 1025-character message");
    assert!(
        too_long.to_string().contains("status.shutdown.message"),
        "{too_long}"
    );
    write("r".repeat(256), "é".repeat(1024))
        .await
        .expect("the longest reason and message are accepted");
}
