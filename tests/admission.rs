//! The API server itself rejects invalid RestartPolicies and Agents, with messages that name the
//! field and the fix; valid manifests (every file in examples/) are accepted; `kubectl explain`
//! shows the field docs. RestartPolicies: admission/policy.rs; Agents: admission/agent.rs; the
//! same for AgentGroups: admission/group.rs.

mod support;

#[path = "admission/agent.rs"]
mod agent;
#[path = "admission/group.rs"]
mod group;
#[path = "admission/policy.rs"]
mod policy;

use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube::{Api, Resource};
use serde_json::Value;
use support::TestNamespace;

async fn setup() -> TestNamespace {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    ns
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
