//! The Python SDK in a Sandbox's pod, which has none of the `AGENT_*` variables (the operator
//! does not edit a Sandbox's template): it reads them from the Agent's Lease, named after the
//! Sandbox, and renews and reports as its attempt (`AGENT_HOLDER`), so that a restart hands the
//! next attempt its checkpoint, and the heartbeat and reports of each attempt count for it alone.

use agent_supervisor::api::{FailureReason, Phase};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use kube::api::{LogParams, PostParams};
use serde_json::json;

use crate::sandboxes::{REAL, sandboxes, setup};
use crate::support::eventually;

const PYTHON_IMAGE: &str = "localhost/agent-python:dev";

/// Attempt 1 reports progress 1 and a checkpoint, waits until it is on the Lease (its pod may
/// start before the operator adopts it, and the SDK finds its identity then), and crashes; any
/// later attempt says what it was handed, reports progress 2 and runs on, renewing its heartbeat.
const AGENT: &str = r#"
import time
from agent_supervisor import Supervisor
with Supervisor.from_env() as sup:
    print(f"handed restart_count={sup.restart_count} checkpoint={sup.checkpoint} "
          f"supervised={sup.supervised}", flush=True)
    if sup.restart_count == 0:
        sup.report(progress=1, checkpoint="step-1")
        # A first pod may start before the operator adopts it: its report waits for that.
        assert sup.flush(60), "the report reached the Lease"
        raise RuntimeError("search tool timed out")
    sup.report(progress=2)
    while True:
        time.sleep(1)
"#;

/// How long the heartbeat may go unrenewed: short, so that a renewal not counted for the
/// attempt would end it within the test. Attempt 1's pod starts before the operator adopts it
/// (under load, seconds before): its grace counts from its adoption.
const TIMEOUT_SECONDS: i64 = 6;

#[tokio::test]
async fn the_sdk_in_a_sandbox_gets_its_values_and_renews_through_the_lease() {
    let (ns, operator) = setup().await;
    let spec = json!({
        "nodeSelector": { "supervisor.dev/node": "real" },
        "tolerations": [{ "key": "supervisor.dev/node", "operator": "Exists" }],
        "terminationGracePeriodSeconds": 2,
        "restartPolicy": "Never",
        // The Sandbox's controller turns the token off unless the template asks for it.
        "automountServiceAccountToken": true,
        "containers": [{
            "name": "agent", "image": PYTHON_IMAGE, "imagePullPolicy": "Never",
            "command": ["python3", "-c", AGENT],
        }],
    });
    let sandbox: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "metadata": { "name": "box" },
        "spec": { "podTemplate": { "spec": spec } },
    }))
    .expect("a Sandbox");
    sandboxes(&ns)
        .create(&PostParams::default(), &sandbox)
        .await
        .expect("create the Sandbox");
    ns.create_policy(
        "quick",
        json!({ "backoff": { "type": "Linear", "initialDelay": "1s", "jitter": 0.0 } }),
    )
    .await;
    ns.create_agent(
        "researcher",
        json!({ "sandboxRef": { "name": "box" }, "restartPolicyRef": { "name": "quick" },
                "heartbeat": { "timeout": format!("{TIMEOUT_SECONDS}s") } }),
    )
    .await;

    // Attempt 1's crash recorded with its exception; attempt 2 running, its progress (reported
    // on the Lease only: it has not ended) recorded.
    let status = ns
        .wait_status_for(
            REAL,
            "researcher",
            "attempt 2's progress from the Lease",
            |s| s.attempt == 2 && s.progress.as_ref().is_some_and(|p| p.value == 2),
        )
        .await;
    let first = status
        .restart_history
        .iter()
        .find(|r| r.attempt == 1)
        .expect("attempt 1's record");
    assert_eq!(first.reason, Some(FailureReason::Error), "{first:?}");
    assert_eq!(
        first.message.as_deref(),
        Some("RuntimeError: search tool timed out"),
        "{first:?}"
    );
    assert!(
        status.checkpoints.iter().any(|c| c.reference == "step-1"),
        "{:?}",
        status.checkpoints
    );

    // Attempt 2 was handed what an Agent's own pod has in its environment.
    let pods = ns.api::<Pod>();
    let log = eventually(REAL, "attempt 2 says what it was handed", || async {
        let log = pods.logs("box", &LogParams::default()).await.ok()?;
        log.contains("handed").then_some(log)
    })
    .await;
    assert!(
        log.contains("handed restart_count=1 checkpoint=step-1 supervised=True"),
        "{log}"
    );

    // It renews as its attempt, and stays running past its heartbeat timeout.
    let leases = ns.api::<Lease>();
    let pod = pods.get("box").await.expect("attempt 2's pod");
    let adopted = kube::ResourceExt::annotations(&pod).get("supervisor.dev/adopted-at");
    assert!(
        adopted.is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()),
        "attempt 2's pod says when it was adopted: {adopted:?}"
    );
    let started = pod.status.and_then(|s| s.start_time).expect("started").0;
    let lease = eventually(REAL, "renewals past the heartbeat timeout", || async {
        let lease = leases.get("box").await.ok()?;
        let renewed = lease.spec.as_ref()?.renew_time.as_ref()?.0;
        ((renewed - started).get_seconds() > 2 * TIMEOUT_SECONDS).then_some(lease)
    })
    .await;
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("box#2"));
    let status = ns.decided_again("researcher").await;
    assert_eq!(
        (status.attempt, status.phase),
        (2, Some(Phase::Running)),
        "{status:?}"
    );
    operator.stop().await;
}
