//! Every file in examples/ applied as it is, doing what its comment says.

mod budget;
mod checkpointing;
mod outage;
mod sandbox;
mod sdk;
mod team;

use std::path::PathBuf;
use std::time::Duration;

use agent_supervisor::api::{
    Agent, BreakerState, FailureReason, Phase, RestartPolicy, ShutdownType,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{self, Operator, TestNamespace, eventually};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples")
}

async fn apply(ns: &TestNamespace, file: &str) {
    let out = support::kubectl()
        .args(["apply", "-n", &ns.name, "-f"])
        .arg(examples().join(file))
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl apply {file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn setup() -> (TestNamespace, Operator) {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let operator = Operator::start(&ns.name).await;
    (ns, operator)
}

#[tokio::test]
async fn every_example_is_covered_here() {
    let covered = [
        "agent-team.yaml", // tested in tests/e2e/examples/team.rs
        "basic-agent.yaml",
        "budget.yaml",              // tested in tests/e2e/examples/budget.rs
        "checkpointing-agent.yaml", // tested in tests/e2e/examples/checkpointing.rs
        "crashing-agent.yaml",
        "heartbeat-agent.yaml",
        // Built by no test here (no container runtime): it installs the SDK as hack/sdk.sh does.
        "langgraph-agent/Dockerfile",
        "langgraph-agent/agent.py", // run by sdk/python/tests/test_examples.py and `make demo`
        "langgraph-agent/agent.yaml", // tested in tests/e2e/examples/sdk.rs
        "memory-agent.yaml",
        "outage.yaml", // tested in tests/e2e/examples/outage.rs
        "policy-exponential.yaml",
        "policy-linear.yaml",
        "policy-never.yaml",
        "python-agent/Dockerfile",
        "python-agent/agent.py",   // run by sdk/python/tests/test_examples.py
        "python-agent/agent.yaml", // tested in tests/e2e/examples/sdk.rs
        "sandbox-agent.yaml",      // tested in tests/e2e/examples/sandbox.rs
        "shutdown-economic.yaml",
        "shutdown-voluntary.yaml",
    ];
    // Every file, and every file of each folder (an agent's program, image and manifest).
    let mut files = Vec::new();
    for entry in std::fs::read_dir(examples()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            for inner in std::fs::read_dir(entry.path()).unwrap() {
                let inner = inner.unwrap().file_name().to_string_lossy().into_owned();
                if inner != "__pycache__" {
                    files.push(format!("{name}/{inner}"));
                }
            }
        } else {
            files.push(name);
        }
    }
    files.sort();
    assert_eq!(
        files, covered,
        "a new example needs a test in tests/e2e/examples.rs or a module of it in tests/e2e/examples/"
    );
}

#[tokio::test]
async fn the_basic_agent_runs() {
    let (ns, _operator) = setup().await;
    apply(&ns, "basic-agent.yaml").await;
    ns.wait_running("basic-1").await;
    ns.wait_status("basic", "Running and Ready", |s| {
        s.phase == Some(Phase::Running)
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
    .await;
}

#[tokio::test]
async fn the_policies_are_accepted() {
    let (ns, _operator) = setup().await;
    for file in [
        "policy-exponential.yaml",
        "policy-linear.yaml",
        "policy-never.yaml",
    ] {
        apply(&ns, file).await;
    }
    let policies: Api<RestartPolicy> = ns.api();
    for name in ["exponential", "linear", "never"] {
        eventually(
            support::kubelet::REACT,
            &format!("policy {name} Accepted"),
            || {
                let policies = policies.clone();
                async move {
                    let status = policies.get_status(name).await.ok()?.status?;
                    status
                        .conditions
                        .iter()
                        .any(|c| c.type_ == "Accepted" && c.status == "True")
                        .then_some(())
                }
            },
        )
        .await;
    }
    let exponential = policies.get("exponential").await.unwrap().spec;
    assert_eq!(exponential.circuit_breaker.failure_threshold, 4);
    assert_eq!(exponential.rules.len(), 2);
}

#[tokio::test]
async fn the_crashing_agent_backs_off_and_trips_the_breaker() {
    let (ns, _operator) = setup().await;
    apply(&ns, "crashing-agent.yaml").await;
    let status = eventually(Duration::from_secs(90), "the breaker to open", || async {
        let status = ns.status("crasher").await;
        (status.circuit_breaker.as_ref()?.state == BreakerState::Open).then_some(status)
    })
    .await;
    assert_eq!(status.phase, Some(Phase::CircuitOpen));
    assert_eq!(status.consecutive_failures, 3);
    let failure = status.last_failure.unwrap();
    assert_eq!(
        (failure.reason, failure.exit_code),
        (FailureReason::Error, Some(1))
    );
    assert_eq!(
        failure.message.as_deref(),
        Some("llm client: connection reset by peer")
    );
    assert!(
        status.restart_history.len() >= 3,
        "history: {:?}",
        status.restart_history
    );
    // Backoff grew between the restarts: 2s, then 4s (±10% jitter).
    let delays: Vec<u64> = status
        .restart_history
        .iter()
        .rev()
        .filter_map(|r| r.backoff)
        .map(|b| b.as_millis())
        .collect();
    assert!(
        (1_800..=2_200).contains(&delays[0]) && (3_600..=4_400).contains(&delays[1]),
        "delays {delays:?}"
    );
}

async fn assert_shutdown(file: &str, agent: &str, kind: ShutdownType, reason: &str) {
    let (ns, _operator) = setup().await;
    let versions = ns.record_agent(agent).await;
    apply(&ns, file).await;
    let status = eventually(
        Duration::from_secs(60),
        &format!("{agent} to shut down"),
        || async {
            let status = ns.status(agent).await;
            (status.phase == Some(Phase::Shutdown)).then_some(status)
        },
    )
    .await;
    let shutdown = status.shutdown.unwrap();
    assert_eq!(
        (shutdown.kind, shutdown.reason.as_deref()),
        (kind, Some(reason))
    );
    assert_eq!(shutdown.source.as_deref(), Some("TerminationMessage"));
    // Never restarted: wait until a restart by the default policy (10s backoff, jitter 25%,
    // rounded up to a whole second) would be due, then have the operator decide again (a
    // template change, acknowledged with observedGeneration) and look at every version of the
    // agent since it was applied.
    let due = shutdown.at.expect("shutdown.at recorded").0 + jiff::SignedDuration::from_secs(15);
    let wait = jiff::Timestamp::now().duration_until(due);
    if let Ok(wait) = Duration::try_from(wait) {
        tokio::time::sleep(wait).await;
    }
    let patch = json!({ "spec": { "template": { "metadata": { "annotations": { "test.supervisor.dev/poke": "1" } } } } });
    let generation = ns
        .api::<Agent>()
        .patch(agent, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("poke the agent")
        .metadata
        .generation;
    let status = ns
        .wait_status(agent, "the poke observed", |s| {
            s.observed_generation >= generation
        })
        .await;
    assert_eq!(status.attempt, 1, "never restarted");
    assert_eq!(status.phase, Some(Phase::Shutdown));
    for version in versions.versions().into_iter().filter_map(|a| a.status) {
        assert!(
            version.attempt <= 1
                && version.next_restart_at.is_none()
                && version.phase != Some(Phase::BackingOff),
            "a restart was scheduled or made after the shutdown: {version:?}"
        );
    }
}

#[tokio::test]
async fn the_economic_shutdown_is_left_alone() {
    assert_shutdown(
        "shutdown-economic.yaml",
        "spender",
        ShutdownType::Economic,
        "budget exhausted",
    )
    .await;
}

#[tokio::test]
async fn the_voluntary_shutdown_is_left_alone() {
    assert_shutdown(
        "shutdown-voluntary.yaml",
        "finisher",
        ShutdownType::Voluntary,
        "task done",
    )
    .await;
}

#[tokio::test]
async fn the_heartbeat_agent_gets_its_lease_and_is_restarted_when_silent() {
    let (ns, _operator) = setup().await;
    apply(&ns, "heartbeat-agent.yaml").await;
    let pod = ns.wait_running("watcher-1").await;
    assert_eq!(
        pod.spec.unwrap().service_account_name.as_deref(),
        Some("watcher")
    );
    ns.api::<Lease>()
        .get("watcher")
        .await
        .expect("the Lease exists");
    // The agent's account may renew its Lease and nothing else.
    let can = |verb: &str, name: &str| {
        let out = support::kubectl()
            .args([
                "auth",
                "can-i",
                verb,
                &format!("leases.coordination.k8s.io/{name}"),
                "-n",
                &ns.name,
            ])
            .arg(format!("--as=system:serviceaccount:{}:watcher", ns.name))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    };
    assert!(
        can("update", "watcher") && can("patch", "watcher"),
        "the agent can renew its Lease"
    );
    assert!(
        !can("update", "other") && !can("delete", "watcher"),
        "and nothing more"
    );
    // Nothing renews it here: HeartbeatLost when the 30s grace period ends.
    let status = eventually(Duration::from_secs(90), "HeartbeatLost", || async {
        let status = ns.status("watcher").await;
        status
            .last_failure
            .as_ref()
            .is_some_and(|f| f.reason == FailureReason::HeartbeatLost)
            .then_some(status)
    })
    .await;
    assert!(status.attempt >= 2 || status.phase == Some(Phase::BackingOff));
}

#[tokio::test]
async fn the_memory_agent_keeps_its_claim() {
    let (ns, _operator) = setup().await;
    let volumes: Api<PersistentVolume> = Api::all(ns.client.clone());
    let name = format!("{}-archivist", ns.name);
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
            "hostPath": { "path": "/tmp/archivist" },
            "claimRef": { "namespace": ns.name, "name": "archivist-memory" },
        }
    }))
    .unwrap();
    volumes
        .create(&PostParams::default(), &volume)
        .await
        .expect("create volume");
    apply(&ns, "memory-agent.yaml").await;
    let pod = ns.wait_running("archivist-1").await;
    let claim = ns
        .api::<PersistentVolumeClaim>()
        .get("archivist-memory")
        .await
        .expect("the claim exists");
    assert_eq!(
        claim.metadata.owner_references.unwrap()[0].name,
        "archivist"
    );
    // Every attempt mounts the claim as the volume `memory`.
    let claim_of = |pod: k8s_openapi::api::core::v1::Pod| {
        let volumes = pod.spec.unwrap().volumes.unwrap();
        let volume = volumes.into_iter().find(|v| v.name == "memory").unwrap();
        volume.persistent_volume_claim.unwrap().claim_name
    };
    let spec = pod.spec.clone().unwrap();
    assert_eq!(claim_of(pod), "archivist-memory");
    let mount = &spec.containers[0].volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (mount.name.as_str(), mount.mount_path.as_str()),
        ("memory", "/var/lib/agent")
    );
    // A restart mounts the same claim.
    ns.terminate("archivist-1", 1, "Error", "crash").await;
    let pod = eventually(Duration::from_secs(60), "archivist-2", || async {
        let pod = ns
            .api::<k8s_openapi::api::core::v1::Pod>()
            .get_opt("archivist-2")
            .await
            .ok()??;
        Some(pod)
    })
    .await;
    assert_eq!(claim_of(pod), "archivist-memory");
    let _ = volumes.delete(&name, &DeleteParams::default()).await;
}
