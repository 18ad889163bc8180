//! Agents written with the Python SDK, in real containers of `localhost/agent-python:dev`: the
//! SDK renews the heartbeat Lease with the pod's own projected token and reports progress,
//! checkpoints and spend; the LangGraph example resumes at the node it crashed in.

use std::time::Duration;

use agent_supervisor::api::{Phase, ShutdownType};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::install;
use crate::support::{self, TestNamespace, eventually};

const PYTHON_IMAGE: &str = "localhost/agent-python:dev";
const REAL: Duration = Duration::from_secs(120);

/// A pod template for one of the SDK's examples (`/examples/<name>/agent.py` in the image).
fn example(name: &str, env: Value) -> Value {
    json!({ "spec": {
        "nodeSelector": { "supervisor.dev/node": "real" },
        "tolerations": [{ "key": "supervisor.dev/node", "operator": "Exists" }],
        "securityContext": { "fsGroup": 65532 },
        "containers": [{
            "name": "agent", "image": PYTHON_IMAGE, "imagePullPolicy": "Never",
            "command": ["python3", format!("/examples/{name}/agent.py")], "env": env,
        }],
    } })
}

/// The log of pod `name` once it has ended (from the kubelet, through the API server).
async fn log_of(ns: &TestNamespace, name: &str) -> String {
    let pods = ns.api::<Pod>();
    eventually(REAL, &format!("pod {name} ended"), || {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await.ok()?;
            let phase = pod.status?.phase?;
            matches!(phase.as_str(), "Succeeded" | "Failed").then_some(())
        }
    })
    .await;
    pods.logs(name, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("the log of pod {name}: {e}"))
}

#[tokio::test]
async fn sdk_agents_in_real_containers_report_on_their_lease_and_resume_a_langgraph_thread() {
    let release = TestNamespace::new().await;
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    install::real_node(&ns.client).await;
    install::install_chart(&release, &ns.name).await;

    // The python example: three model calls of $0.002 with $0.007 of credits, then out of
    // credits: an economic shutdown, every step reported.
    let env = json!([
        { "name": "STEPS", "value": "10" }, { "name": "STEP_SECONDS", "value": "0.5" },
        { "name": "CREDITS", "value": "0.007" }, { "name": "CALLS_PER_MINUTE", "value": "100" },
    ]);
    ns.create_agent(
        "python-agent",
        json!({ "heartbeat": { "timeout": "30s" }, "template": example("python-agent", env) }),
    )
    .await;
    // The LangGraph example on a volume claim the real node keeps: a hostPath volume, writable
    // by the image's user.
    let dir = std::env::temp_dir().join(format!("agent-supervisor-{}", ns.name));
    std::fs::create_dir_all(&dir).expect("make the volume's directory");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": format!("{}-checkpoints", ns.name) },
        "spec": {
            "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
            "hostPath": { "path": dir, "type": "Directory" },
            "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": { "namespace": ns.name, "name": "langgraph-agent-checkpoints" },
        }
    }))
    .expect("a PersistentVolume");
    Api::<PersistentVolume>::all(ns.client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .expect("create the PersistentVolume");
    let mut template = example(
        "langgraph-agent",
        json!([
            { "name": "CHECKPOINT_DB", "value": "/var/lib/agent/checkpoints.sqlite" },
            { "name": "CRASH_IN", "value": "research" }, { "name": "NODE_SECONDS", "value": "0.5" },
        ]),
    );
    template["spec"]["containers"][0]["volumeMounts"] =
        json!([{ "name": "checkpoints", "mountPath": "/var/lib/agent" }]);
    ns.create_agent(
        "langgraph-agent",
        json!({
            "heartbeat": { "timeout": "30s" },
            "volumeClaimTemplates": [{ "metadata": { "name": "checkpoints" }, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } },
            } }],
            "template": template,
        }),
    )
    .await;

    let python = ns
        .wait_status_for(REAL, "python-agent", "an economic shutdown", |s| {
            s.phase == Some(Phase::Shutdown)
        })
        .await;
    let shutdown = python.shutdown.clone().expect("status.shutdown");
    assert_eq!(shutdown.kind, ShutdownType::Economic, "{python:?}");
    let progress = python.progress.as_ref().expect("progress reported");
    assert_eq!(progress.value, 3, "three steps done: {python:?}");
    assert_eq!(
        python.checkpoints.first().map(|c| c.reference.as_str()),
        Some("step-3")
    );
    let spend = python.spend.as_ref().expect("spend reported");
    assert_eq!(spend.cost.as_deref(), Some("0.006"), "{python:?}");
    assert_eq!(spend.tokens, Some(3000), "{python:?}");
    assert_eq!(python.restart_count, 0, "{python:?}");
    // The Lease was held and renewed by the pod itself, with its own token.
    let lease = ns
        .api::<Lease>()
        .get("python-agent")
        .await
        .expect("the heartbeat Lease");
    let spec = lease.spec.expect("a Lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("python-agent-1"));
    let renewed = spec.renew_time.expect("renewed").0;
    let acquired = spec.acquire_time.expect("acquired").0;
    assert!(
        renewed > acquired,
        "renewed after it was taken: {acquired} .. {renewed}"
    );

    let graph = ns
        .wait_status_for(
            REAL,
            "langgraph-agent",
            "the thread done after one crash",
            |s| s.phase == Some(Phase::Shutdown),
        )
        .await;
    assert_eq!(graph.restart_count, 1, "{graph:?}");
    // The uncaught exception ends the process with 1; the SDK writes it as the failure's reason
    // in its last words, and its progress, reported on the Lease, is in the record.
    let crash = &graph.restart_history[0];
    assert_eq!(crash.exit_code, Some(1), "{crash:?}");
    assert_eq!(
        crash.message.as_deref(),
        Some("RuntimeError: research: the search tool timed out"),
        "{crash:?}"
    );
    assert_eq!(
        crash.reason,
        Some(agent_supervisor::api::FailureReason::Error),
        "{crash:?}"
    );
    assert!(
        crash.progress.is_some(),
        "the crashed attempt's progress: {crash:?}"
    );
    let resumed = graph
        .resumed_from
        .clone()
        .expect("the second attempt resumed");
    // Both attempts' pods are kept for their logs (the one before the current one always is).
    let first = log_of(&ns, "langgraph-agent-1").await;
    let second = log_of(&ns, "langgraph-agent-2").await;
    assert!(first.contains("node plan: running"), "{first}");
    assert!(
        first.contains("RuntimeError: research: the search tool timed out"),
        "{first}"
    );
    assert!(
        second.contains(&format!("from checkpoint {resumed}, at node research")),
        "{second}"
    );
    assert!(
        !second.contains("node plan: running"),
        "plan ran again:\n{second}"
    );
    assert!(second.contains("node review: running"), "{second}");
    eprintln!(
        "python-agent: {:?}\nlanggraph-agent resumed from {resumed}",
        python.spend
    );
    let _ = std::fs::remove_dir_all(&dir);
}
