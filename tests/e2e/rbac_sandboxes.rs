//! The chart's RBAC with `sandboxes.enabled=true` is exactly enough: the operator, run under the
//! chart's ServiceAccount, makes the Agent for an annotated Sandbox, adopts the Sandbox's pod
//! (made by agent-sandbox's own controller, run by kwok), restarts it after a crash, suspends and
//! resumes the Sandbox, and deletes the Agent when the annotation goes, without a single refused
//! request; and its identity can neither create nor delete Sandboxes.

use agent_supervisor::api::{AGENT_LABEL, ATTEMPT_LABEL, Agent, FailureReason, Phase};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::process::{OperatorProcess, RELEASE, install_chart_with, token_kubeconfig};
use crate::rbac::{assert_forbidden, operator_client};
use crate::support::{self, TestNamespace, kubelet::REACT};

const BOX: &str = "box";

fn sandboxes(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox");
    Api::namespaced_with(client, namespace, &ApiResource::from_gvk(&gvk))
}

/// A Sandbox annotated for the operator (under `policy`), its pod template restartPolicy Never
/// (no toleration of the real node's taint: its pods run on kwok's nodes).
fn sandbox(name: &str, policy: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "metadata": { "name": name, "annotations": { "supervisor.dev/restart-policy": policy } },
        "spec": { "podTemplate": { "spec": {
            "restartPolicy": "Never",
            "containers": [{ "name": "agent", "image": "example.invalid/agent:1" }],
        } } },
    }))
    .expect("a Sandbox")
}

/// Waits for the Sandbox's pod of `attempt`, adopted (the operator's labels) and running, and
/// not the pod `before` (the name repeats: attempts are told apart by uid).
async fn adopted(ns: &TestNamespace, attempt: u32, before: Option<&str>) -> Pod {
    let pods = ns.api::<Pod>();
    let what = format!("the Sandbox's pod of attempt {attempt}, adopted and running");
    support::eventually(REACT, &what, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get_opt(BOX).await.ok()??;
            let labels = pod.labels();
            let ok = labels.get(AGENT_LABEL).map(String::as_str) == Some(BOX)
                && labels.get(ATTEMPT_LABEL) == Some(&attempt.to_string())
                && pod.uid().as_deref() != before
                && pod.status.as_ref()?.phase.as_deref() == Some("Running");
            ok.then_some(pod)
        }
    })
    .await
}

/// Waits until the Sandbox's `spec.operatingMode` is `mode`.
async fn operating_mode(sandboxes: &Api<DynamicObject>, mode: &str) -> DynamicObject {
    support::eventually(REACT, &format!("the Sandbox {mode}"), || async {
        let sandbox = sandboxes.get(BOX).await.ok()?;
        (sandbox.data["spec"]["operatingMode"].as_str() == Some(mode)).then_some(sandbox)
    })
    .await
}

async fn suspend(agents: &Api<Agent>, suspend: bool) {
    let patch = json!({ "spec": { "suspend": suspend } });
    agents
        .patch(BOX, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch the Agent's suspend");
}

#[tokio::test]
async fn the_operator_supervises_sandboxes_under_the_charts_namespaced_rbac() {
    let release = TestNamespace::new().await;
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    install_chart_with(&release.name, &[&ns.name], &["sandboxes.enabled=true"]);
    let kubeconfig = token_kubeconfig(&release, &release.name, RELEASE).await;
    let mut operator = OperatorProcess::start(
        &kubeconfig,
        "rbac-sandboxes-test",
        &[
            &format!("--namespaces={}", ns.name),
            &format!("--leader-election-namespace={}", release.name),
            "--sandboxes=true",
        ],
    );
    operator.ready().await;

    ns.create_policy("p", json!({ "backoff": { "type": "Immediate" } }))
        .await;
    let admin_sandboxes = sandboxes(ns.client.clone(), &ns.name);
    let made = admin_sandboxes
        .create(&PostParams::default(), &sandbox(BOX, "p"))
        .await
        .expect("create the Sandbox (is agent-sandbox installed? AGENT_SANDBOX=1)");

    // (1) Its Agent is made for it: named after it, naming it, owned by it (agents: create).
    let agents = ns.api::<Agent>();
    let agent = support::eventually(REACT, "the Agent made for the Sandbox", || async {
        agents.get_opt(BOX).await.ok()?
    })
    .await;
    let sandbox_ref = agent.spec.sandbox_ref.as_ref().map(|r| r.name.as_str());
    assert_eq!(sandbox_ref, Some(BOX), "{:?}", agent.spec);
    let policy = agent
        .spec
        .restart_policy_ref
        .as_ref()
        .map(|r| r.name.as_str());
    assert_eq!(policy, Some("p"), "{:?}", agent.spec);
    let owner = &agent.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("Sandbox", made.uid().as_ref())
    );

    // (2) Its pod, made by agent-sandbox's controller, is adopted (pods: patch).
    let first = adopted(&ns, 1, None).await;
    assert_eq!(
        first
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .map(|n| n.starts_with("kwok-")),
        Some(true),
        "the Sandbox's pod runs on a kwok node"
    );
    ns.wait_status(BOX, "attempt 1 running", |s| {
        s.attempt == 1 && s.phase == Some(Phase::Running)
    })
    .await;

    // (3) A crash is recorded; the ended pod is deleted (pods: delete) and the Sandbox's
    // controller makes the next, adopted as attempt 2.
    ns.terminate(BOX, 1, "Error", "boom").await;
    let second = adopted(&ns, 2, first.uid().as_deref()).await;
    let status = ns
        .wait_status(BOX, "a restart", |s| s.restart_count == 1 && s.attempt == 2)
        .await;
    assert_eq!(status.last_failure.unwrap().reason, FailureReason::Error);
    ns.wait_event(BOX, "Crashed").await;

    // (4) Suspended: the Sandbox's operatingMode follows (sandboxes: patch); resumed: back to
    // Running, and the next pod adopted as attempt 3.
    suspend(&agents, true).await;
    let suspended = operating_mode(&admin_sandboxes, "Suspended").await;
    assert_eq!(
        suspended
            .annotations()
            .get("supervisor.dev/suspended-by-operator")
            .map(String::as_str),
        Some("true")
    );
    ns.wait_status(BOX, "Suspended", |s| s.phase == Some(Phase::Suspended))
        .await;
    suspend(&agents, false).await;
    operating_mode(&admin_sandboxes, "Running").await;
    adopted(&ns, 3, second.uid().as_deref()).await;
    ns.wait_status(BOX, "attempt 3 running", |s| {
        s.attempt == 3 && s.phase == Some(Phase::Running)
    })
    .await;

    // (5) The annotation removed: the Agent is deleted (agents: delete).
    let patch = json!({ "metadata": { "annotations": { "supervisor.dev/restart-policy": null } } });
    admin_sandboxes
        .patch(BOX, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("remove the annotation");
    support::eventually(REACT, "the Agent deleted with the annotation", || async {
        matches!(agents.get_opt(BOX).await, Ok(None)).then_some(())
    })
    .await;

    // Nothing the operator asked for was refused (and its log is really there to read).
    let log = operator.log_text();
    assert!(
        log.contains("connected") && log.contains("leading") && log.contains("made its Agent"),
        "the operator's log:\n{log}"
    );
    // (Whole words: the log's microsecond timestamps contain "403" now and then; its colour
    // codes, as in `\x1b[0m403`, are taken out first, lest they hide a word.)
    let plain: String = log
        .split('\x1b')
        .map(|p| {
            p.split_once('m')
                .filter(|_| p.starts_with('['))
                .map_or(p, |p| p.1)
        })
        .collect();
    let words: Vec<&str> = plain.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    for refused in ["forbidden", "Forbidden", "403"] {
        assert!(
            !words.contains(&refused),
            "the operator was refused something ({refused}):\n{log}"
        );
    }

    // Sandboxes are someone else's to make and remove: the operator's identity can do neither.
    let as_operator = sandboxes(operator_client(&kubeconfig).await, &ns.name);
    as_operator
        .get(BOX)
        .await
        .expect("the operator reads Sandboxes");
    assert_forbidden(
        as_operator
            .create(&PostParams::default(), &sandbox("other", "p"))
            .await
            .map(|_| ()),
        "create a Sandbox",
    );
    assert_forbidden(
        as_operator
            .delete(BOX, &DeleteParams::default())
            .await
            .map(|_| ()),
        "delete a Sandbox",
    );
}
