//! agent-sandbox `Sandbox`es under the operator, with agent-sandbox's own controller making
//! their pods (the control plane started with `AGENT_SANDBOX=1`) as real containers: a crash
//! loop backed off and tripped, then probed; a restart policy that hides crashes refused; a
//! shutdown left alone; a give-up that suspends the Sandbox, and the reset that resumes it.

use std::time::Duration;

use agent_supervisor::api::{BreakerState, FailureReason, Phase, RESET_REQUESTED_ANNOTATION};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::install::SHELL_IMAGE;
use crate::support::{Operator, TestNamespace, eventually};

/// Real containers start in about a second here, but CI's machine is loaded: every wait allows
/// two minutes, and only a failing test waits it out.
pub(crate) const REAL: Duration = Duration::from_secs(120);

pub(crate) fn sandboxes(ns: &TestNamespace) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox");
    Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk(&gvk))
}

/// Makes Sandbox `name` running `script` in the shell image on the real node; `restart_policy`
/// `None` leaves the Sandbox's default.
pub(crate) async fn create_sandbox(
    ns: &TestNamespace,
    name: &str,
    script: &str,
    restart_policy: Option<&str>,
) {
    let mut spec = json!({
        "nodeSelector": { "supervisor.dev/node": "real" },
        "tolerations": [{ "key": "supervisor.dev/node", "operator": "Exists" }],
        "terminationGracePeriodSeconds": 2,
        "containers": [{
            "name": "agent", "image": SHELL_IMAGE, "imagePullPolicy": "Never",
            "command": ["sh", "-c", script],
        }],
    });
    if let Some(policy) = restart_policy {
        spec["restartPolicy"] = json!(policy);
    }
    let sandbox: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "metadata": { "name": name },
        "spec": { "podTemplate": { "spec": spec } },
    }))
    .expect("a Sandbox");
    sandboxes(ns)
        .create(&PostParams::default(), &sandbox)
        .await
        .unwrap_or_else(|e| {
            panic!("create Sandbox {name} (is agent-sandbox installed? AGENT_SANDBOX=1): {e}")
        });
}

pub(crate) async fn operating_mode(ns: &TestNamespace, name: &str) -> Option<String> {
    let sandbox = sandboxes(ns).get(name).await.expect("read the Sandbox");
    sandbox.data["spec"]["operatingMode"]
        .as_str()
        .map(str::to_string)
}

fn condition(status: &agent_supervisor::api::AgentStatus, kind: &str) -> (String, String, String) {
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .unwrap_or_else(|| panic!("no {kind} condition: {status:?}"));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

pub(crate) async fn setup() -> (TestNamespace, Operator) {
    let ns = TestNamespace::new().await;
    crate::support::install_crds(&ns.client).await;
    let node = Api::<Node>::all(ns.client.clone())
        .get_opt("real-node")
        .await;
    assert!(
        node.expect("read nodes").is_some(),
        "the control plane has no real node: start it with hack/cluster.sh (without REAL_NODE=0)"
    );
    let operator = Operator::start_prompt(&ns.name).await;
    (ns, operator)
}

#[tokio::test]
async fn a_crash_looping_sandbox_is_backed_off_tripped_and_probed() {
    let (ns, operator) = setup().await;
    ns.create_policy(
        "careful",
        json!({ "backoff": { "type": "Exponential", "initialDelay": "2s", "maxDelay": "8s",
                             "multiplier": 2.0, "jitter": 0.0 },
                "circuitBreaker": { "failureThreshold": 3, "openDuration": "6s" },
                "historyLimit": 20 }),
    )
    .await;
    let crash = "sleep 1; echo 'search tool: timed out' >/dev/termination-log; exit 3";
    create_sandbox(&ns, "crasher", crash, Some("Never")).await;
    ns.create_agent(
        "crasher",
        json!({ "sandboxRef": { "name": "crasher" }, "restartPolicyRef": { "name": "careful" } }),
    )
    .await;

    let open = ns
        .wait_status_for(REAL, "crasher", "the breaker open after 3 crashes", |s| {
            s.circuit_breaker
                .as_ref()
                .is_some_and(|b| b.state == BreakerState::Open)
        })
        .await;
    assert_eq!(open.phase, Some(Phase::CircuitOpen), "{open:?}");
    assert_eq!(open.restart_history.len(), 3, "{:?}", open.restart_history);
    for record in &open.restart_history {
        assert_eq!(record.exit_code, Some(3), "{record:?}");
        assert_eq!(record.reason, Some(FailureReason::Error), "{record:?}");
        assert_eq!(
            record.message.as_deref().map(str::trim),
            Some("search tool: timed out")
        );
    }
    // Backed off between recreations: 2 s, then 4 s (no jitter), from each failure's time.
    let restarts: Vec<_> = open.restart_history.iter().rev().collect();
    for (record, delay) in restarts.iter().zip([2, 4]) {
        let (failed, restarted) = (
            record.failed_at.clone().expect("failed at").0,
            record.restarted_at.clone().expect("restarted").0,
        );
        let waited = (restarted - failed).get_seconds();
        assert!(
            waited >= delay,
            "restarted {waited}s after failing, backoff {delay}s: {record:?}"
        );
    }
    // The ended pod is kept while the breaker is open; the Sandbox is not suspended for it.
    let pod = ns
        .api::<Pod>()
        .get("crasher")
        .await
        .expect("the Sandbox's pod");
    assert_eq!(
        pod.labels()
            .get("supervisor.dev/attempt")
            .map(String::as_str),
        Some("3")
    );
    assert_ne!(
        operating_mode(&ns, "crasher").await.as_deref(),
        Some("Suspended")
    );

    // The probe: a fourth attempt, in its own pod, once the breaker's open duration is up.
    let probed = ns
        .wait_status_for(REAL, "crasher", "the half-open probe started", |s| {
            s.attempt >= 4
        })
        .await;
    let third = probed
        .restart_history
        .iter()
        .find(|r| r.attempt == 3)
        .expect("attempt 3's record");
    let waited = (third.restarted_at.clone().expect("probed").0
        - third.failed_at.clone().expect("failed").0)
        .get_seconds();
    assert!(
        waited >= 6,
        "probed {waited}s after the breaker opened, openDuration 6s"
    );
    let note = ns.wait_event("crasher", "CircuitHalfOpen").await;
    assert!(!note.is_empty());
    // Each attempt had a pod of its own: told apart by uid, the name repeats.
    let attempt = ns
        .api::<Pod>()
        .get("crasher")
        .await
        .expect("the probe's pod");
    assert_ne!(
        attempt.uid(),
        pod.uid(),
        "a new pod, made by the Sandbox's controller"
    );
    operator.stop().await;
}

#[tokio::test]
async fn a_sandbox_the_kubelet_would_restart_in_place_is_refused_and_left_alone() {
    let (ns, operator) = setup().await;
    create_sandbox(&ns, "looper", "sleep 3600", None).await;
    ns.create_agent("looper", json!({ "sandboxRef": { "name": "looper" } }))
        .await;
    let status = ns
        .wait_status_for(REAL, "looper", "the refusal said", |s| {
            s.conditions
                .iter()
                .any(|c| c.reason == "SandboxRestartPolicy")
        })
        .await;
    let (ready, _, message) = condition(&status, "Ready");
    assert_eq!(ready, "False");
    assert!(message.contains("restartPolicy Always"), "{message}");
    assert!(
        message.contains("restartPolicy: Never"),
        "names the fix: {message}"
    );
    let note = ns.wait_event("looper", "SandboxRestartPolicy").await;
    assert!(note.contains("restartPolicy: Never"), "{note}");
    // Nothing done to it: its pod not adopted, the Sandbox not suspended.
    let pod = eventually(REAL, "the Sandbox's pod", || async {
        ns.api::<Pod>().get_opt("looper").await.ok().flatten()
    })
    .await;
    assert!(
        !pod.labels().contains_key("supervisor.dev/attempt"),
        "{:?}",
        pod.labels()
    );
    assert_ne!(
        operating_mode(&ns, "looper").await.as_deref(),
        Some("Suspended")
    );
    assert_eq!(status.attempt, 0);
    operator.stop().await;
}

#[tokio::test]
async fn a_sandbox_that_shuts_down_is_left_alone_and_suspended() {
    let (ns, operator) = setup().await;
    let quit =
        r#"echo '{"shutdown":"voluntary","reason":"task done"}' >/dev/termination-log; exit 0"#;
    create_sandbox(&ns, "quitter", quit, Some("Never")).await;
    ns.create_agent("quitter", json!({ "sandboxRef": { "name": "quitter" } }))
        .await;
    let status = ns
        .wait_status_for(REAL, "quitter", "the shutdown recorded", |s| {
            s.phase == Some(Phase::Shutdown)
        })
        .await;
    assert_eq!(status.restart_count, 0);
    let shutdown = status.shutdown.expect("a shutdown");
    assert_eq!(shutdown.reason.as_deref(), Some("task done"));
    // Nothing it leaves looks running: the Sandbox is suspended, by the operator.
    eventually(REAL, "the Sandbox suspended", || async {
        (operating_mode(&ns, "quitter").await.as_deref() == Some("Suspended")).then_some(())
    })
    .await;
    let status = ns.decided_again("quitter").await;
    assert_eq!((status.phase, status.attempt), (Some(Phase::Shutdown), 1));
    operator.stop().await;
}

#[tokio::test]
async fn a_give_up_suspends_the_sandbox_and_a_reset_resumes_it() {
    let (ns, operator) = setup().await;
    ns.create_policy(
        "brief",
        json!({ "backoff": { "type": "Immediate" }, "circuitBreaker": { "failureThreshold": 0 },
                "limits": { "maxRestarts": 1, "window": "1h" } }),
    )
    .await;
    create_sandbox(&ns, "fragile", "sleep 1; exit 2", Some("Never")).await;
    ns.create_agent(
        "fragile",
        json!({ "sandboxRef": { "name": "fragile" }, "restartPolicyRef": { "name": "brief" } }),
    )
    .await;
    let stopped = ns
        .wait_status_for(REAL, "fragile", "given up", |s| {
            s.phase == Some(Phase::Stopped)
        })
        .await;
    assert_eq!(stopped.attempt, 2, "one restart allowed: {stopped:?}");
    eventually(REAL, "the Sandbox suspended by the give-up", || async {
        (operating_mode(&ns, "fragile").await.as_deref() == Some("Suspended")).then_some(())
    })
    .await;

    let agents = ns.api::<agent_supervisor::api::Agent>();
    let reset = json!({ "metadata": { "annotations": { RESET_REQUESTED_ANNOTATION: "now-1" } } });
    agents
        .patch("fragile", &PatchParams::default(), &Patch::Merge(&reset))
        .await
        .expect("ask for a reset");
    let resumed = ns
        .wait_status_for(REAL, "fragile", "a third attempt after the reset", |s| {
            s.attempt >= 3
        })
        .await;
    assert_eq!(
        operating_mode(&ns, "fragile").await.as_deref(),
        Some("Running")
    );
    let pod: Pod = ns
        .api::<Pod>()
        .get("fragile")
        .await
        .expect("the resumed pod");
    assert_eq!(
        pod.labels()
            .get("supervisor.dev/attempt")
            .map(String::as_str),
        Some("3"),
        "{resumed:?}"
    );
    operator.stop().await;
}
