//! The chart's RBAC is exactly enough: the operator, run under the chart's ServiceAccount,
//! supervises crashes, the breaker, heartbeats (making each one's identity) and shutdowns
//! without a single refused request, and its identity reads AgentGroups and writes only their
//! status — and in namespaced mode it can neither see nor touch agents or groups elsewhere.

use agent_supervisor::api::{
    Agent, AgentGroup, BreakerState, FailureReason, Phase, RestartPolicy, ShutdownType,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use crate::process::{OperatorProcess, RELEASE, install_chart, token_kubeconfig};
use crate::support::{self, TestNamespace};

#[tokio::test]
async fn the_operator_works_under_the_charts_namespaced_rbac_and_sees_nothing_else() {
    let release = TestNamespace::new().await;
    let watched = TestNamespace::new().await;
    let elsewhere = TestNamespace::new().await;
    support::install_crds(&watched.client).await;
    install_chart(&release.name, &[&watched.name]);
    let kubeconfig = token_kubeconfig(&release, &release.name, RELEASE).await;
    let mut operator = OperatorProcess::start(
        &kubeconfig,
        "rbac-test",
        &[
            &format!("--namespaces={}", watched.name),
            &format!("--leader-election-namespace={}", release.name),
            // As the chart runs it by default: its RBAC grants nothing on Sandboxes.
            "--sandboxes=false",
        ],
    );
    operator.ready().await;

    let ns = &watched;
    ns.create_policy(
        "p",
        json!({
            "backoff": { "type": "Immediate" },
            "circuitBreaker": { "failureThreshold": 2, "openDuration": "1h" },
        }),
    )
    .await;
    // Crash and restart.
    ns.create_agent("crash", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("crash-1").await;
    ns.terminate("crash-1", 1, "Error", "boom").await;
    ns.wait_running("crash-2").await;
    let status = ns
        .wait_status("crash", "a restart", |s| s.restart_count == 1)
        .await;
    assert_eq!(status.last_failure.unwrap().reason, FailureReason::Error);
    ns.wait_event("crash", "Crashed").await;
    // The breaker.
    ns.terminate("crash-2", 1, "Error", "boom").await;
    let open = ns
        .wait_status("crash", "CircuitOpen", |s| {
            s.phase == Some(Phase::CircuitOpen)
        })
        .await;
    assert_eq!(open.circuit_breaker.unwrap().state, BreakerState::Open);
    // A heartbeat: the Lease is created; silence is HeartbeatLost. Each pod runs only for the
    // 2s grace period: the pod watch sees it run, where a poll on a loaded machine may not.
    let pods = ns.record_pods().await;
    let ran = |name: &'static str| {
        move |p: &Pod| {
            p.metadata.name.as_deref() == Some(name)
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        }
    };
    ns.create_agent(
        "beat",
        json!({ "restartPolicyRef": { "name": "p" }, "heartbeat": { "timeout": "2s", "gracePeriod": "2s" } }),
    )
    .await;
    pods.wait_for("pod beat-1 to run", ran("beat-1")).await;
    let lost = ns
        .wait_status("beat", "HeartbeatLost", |s| s.last_failure.is_some())
        .await;
    assert_eq!(
        lost.last_failure.unwrap().reason,
        FailureReason::HeartbeatLost
    );
    pods.wait_for("pod beat-2 to run", ran("beat-2")).await;
    // Its identity, made under the chart's RBAC (Kubernetes lets the operator grant only what it
    // holds): the pod runs as a ServiceAccount of its own, bound to a Role on its Lease alone.
    let beat = ns.api::<Pod>().get("beat-2").await.expect("read beat-2");
    assert_eq!(
        beat.spec.and_then(|s| s.service_account_name).as_deref(),
        Some("beat")
    );
    let binding = ns
        .api::<RoleBinding>()
        .get("beat-heartbeat")
        .await
        .expect("the operator bound the agent's Role");
    assert_eq!(binding.role_ref.name, "beat-heartbeat");
    // A shutdown.
    ns.create_agent("spend", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("spend-1").await;
    ns.terminate(
        "spend-1",
        0,
        "Completed",
        r#"{"shutdown":"economic","reason":"out of credits"}"#,
    )
    .await;
    let shut = ns
        .wait_status("spend", "Shutdown", |s| s.phase == Some(Phase::Shutdown))
        .await;
    assert_eq!(shut.shutdown.unwrap().kind, ShutdownType::Economic);
    // The RestartPolicy's status.
    let policies: Api<RestartPolicy> = ns.api();
    support::eventually(support::kubelet::REACT, "the policy's status", || {
        let policies = policies.clone();
        async move { (policies.get_status("p").await.ok()?.status?.agents == 3).then_some(()) }
    })
    .await;
    // Deleting an agent deletes its pods (through the garbage collector).
    ns.api::<Agent>()
        .delete("crash", &DeleteParams::background())
        .await
        .expect("delete agent");

    // Nothing the operator asked for was refused (and its log is really there to read).
    let log = operator.log_text();
    assert!(
        log.contains("connected") && log.contains("leading"),
        "the operator's log:\n{log}"
    );
    // (Whole words: the log's microsecond timestamps contain "403" now and then.)
    let words: Vec<&str> = log.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    for refused in ["forbidden", "Forbidden", "403"] {
        assert!(
            !words.contains(&refused),
            "the operator was refused something ({refused}):\n{log}"
        );
    }

    // AgentGroups where it works: the operator's identity reads them and writes only their status.
    let as_operator = operator_client(&kubeconfig).await;
    let team: AgentGroup = serde_json::from_value(
        json!({ "metadata": { "name": "team" }, "spec": { "members": [{ "agent": "spend" }] } }),
    )
    .expect("a valid AgentGroup");
    ns.api::<AgentGroup>()
        .create(&Default::default(), &team)
        .await
        .expect("create a group");
    let groups: Api<AgentGroup> = Api::namespaced(as_operator.clone(), &ns.name);
    let listed = groups
        .list(&ListParams::default())
        .await
        .expect("the operator lists agent groups");
    assert_eq!(listed.items.len(), 1);
    let ready = json!({ "status": { "ready": "0/1" } });
    groups
        .patch_status("team", &PatchParams::default(), &Patch::Merge(&ready))
        .await
        .expect("the operator writes a group's status");
    let spec = json!({ "spec": { "strategy": "OneForAll" } });
    assert_forbidden(
        groups
            .patch("team", &PatchParams::default(), &Patch::Merge(&spec))
            .await
            .map(|_| ()),
        "write a group's spec",
    );

    // An agent elsewhere is invisible and untouchable with the operator's identity.
    elsewhere.create_agent("outsider", json!({})).await;
    let agents: Api<Agent> = Api::namespaced(as_operator.clone(), &elsewhere.name);
    assert_forbidden(
        agents.list(&ListParams::default()).await.map(|_| ()),
        "list agents elsewhere",
    );
    assert_forbidden(
        agents.get_status("outsider").await.map(|_| ()),
        "read an agent elsewhere",
    );
    let patch = json!({ "status": { "phase": "Stopped" } });
    assert_forbidden(
        agents
            .patch_status("outsider", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ()),
        "write an agent's status elsewhere",
    );
    let pods: Api<Pod> = Api::namespaced(as_operator.clone(), &elsewhere.name);
    assert_forbidden(
        pods.list(&ListParams::default()).await.map(|_| ()),
        "list pods elsewhere",
    );
    assert_forbidden(
        pods.delete("outsider-1", &DeleteParams::default())
            .await
            .map(|_| ()),
        "delete a pod elsewhere",
    );
    let groups: Api<AgentGroup> = Api::namespaced(as_operator.clone(), &elsewhere.name);
    assert_forbidden(
        groups.list(&ListParams::default()).await.map(|_| ()),
        "list agent groups elsewhere",
    );
    let all: Api<Agent> = Api::all(as_operator);
    assert_forbidden(
        all.list(&ListParams::default()).await.map(|_| ()),
        "list agents cluster-wide",
    );
    // And no pod was started there.
    let outside = elsewhere
        .api::<Pod>()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        outside.items.is_empty(),
        "the operator acted outside its namespaces"
    );
}

pub(crate) async fn operator_client(kubeconfig: &std::path::Path) -> Client {
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    Client::try_from(config).unwrap()
}

pub(crate) fn assert_forbidden(result: Result<(), kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}
