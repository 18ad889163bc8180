//! Sandboxes that agent-sandbox's extensions make for a `SandboxClaim` (SandboxTemplate →
//! SandboxWarmPool → SandboxClaim), supervised as one made by hand: a cold start (a pool of 0:
//! the Sandbox and its pod named after the claim) and a warm one (the claim adopts a Sandbox
//! the pool made, which keeps the pool's generated name, as does its pod). The pod crashes once
//! it is supervised; its end is recorded, the Sandbox's controller makes the next pod, which is
//! adopted, and the claim and its Sandbox stay.

use agent_supervisor::api::{AGENT_LABEL, ATTEMPT_LABEL, FailureReason, Phase};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use crate::install::SHELL_IMAGE;
use crate::sandboxes::{REAL, operating_mode, sandboxes, setup};
use crate::support::{TestNamespace, eventually};

/// Waits until the operator has adopted its pod (the pod's labels, read through the downward
/// API, carry an attempt), then crashes as attempt 1; any later attempt keeps running.
const SCRIPT: &str = r#"until grep -q '^supervisor.dev/attempt=' /etc/pod/labels; do sleep 1; done
if grep -q '^supervisor.dev/attempt="1"' /etc/pod/labels; then
  echo 'search tool: quota exceeded' >/dev/termination-log; exit 3
fi
exec sleep 3600"#;

fn extension(ns: &TestNamespace, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("extensions.agents.x-k8s.io", "v1beta1", kind);
    Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk(&gvk))
}

async fn create(ns: &TestNamespace, kind: &str, metadata: Value, spec: Value) {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": kind,
        "metadata": metadata, "spec": spec,
    }))
    .expect("an agent-sandbox extension object");
    extension(ns, kind)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {kind} (agent-sandbox with --extensions?): {e}"));
}

/// A SandboxTemplate `name` whose pod runs `SCRIPT` on the real node, and a SandboxWarmPool
/// `name` of `replicas` from it. Each carries an annotation, to see what reaches the Sandbox.
async fn template_and_pool(ns: &TestNamespace, name: &str, replicas: u32) {
    let spec = json!({
        "nodeSelector": { "supervisor.dev/node": "real" },
        "tolerations": [{ "key": "supervisor.dev/node", "operator": "Exists" }],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 2,
        "volumes": [{ "name": "pod", "downwardAPI": { "items": [
            { "path": "labels", "fieldRef": { "fieldPath": "metadata.labels" } }] } }],
        "containers": [{
            "name": "agent", "image": SHELL_IMAGE, "imagePullPolicy": "Never",
            "command": ["sh", "-c", SCRIPT],
            "volumeMounts": [{ "name": "pod", "mountPath": "/etc/pod" }],
        }],
    });
    let from = |what: &str| json!({ "name": name, "annotations": { "example.com/from": what } });
    create(
        ns,
        "SandboxTemplate",
        from("template"),
        json!({ "networkPolicyManagement": "Unmanaged",
                "podTemplate": { "metadata": { "annotations": { "example.com/pod-from": "template" } },
                                 "spec": spec } }),
    )
    .await;
    let pool = json!({ "replicas": replicas, "sandboxTemplateRef": { "name": name } });
    create(ns, "SandboxWarmPool", from("pool"), pool).await;
}

/// Claims a Sandbox from pool `pool` and returns its name, once the claim has one.
async fn claim(ns: &TestNamespace, name: &str, pool: &str) -> String {
    let metadata = json!({ "name": name, "annotations": { "example.com/from": "claim" } });
    create(
        ns,
        "SandboxClaim",
        metadata,
        json!({ "warmPoolRef": { "name": pool } }),
    )
    .await;
    let claims = extension(ns, "SandboxClaim");
    eventually(REAL, "the claim's Sandbox", || async {
        let claim = claims.get(name).await.ok()?;
        claim.data["status"]["sandbox"]["name"]
            .as_str()
            .map(str::to_string)
    })
    .await
}

/// Supervises Sandbox `sandbox`, made for claim `claim`, with Agent `worker`: the pod's crash is
/// recorded, the Sandbox's controller makes the next pod, and it is adopted as attempt 2.
async fn supervised(ns: &TestNamespace, claim: &str, sandbox: &str) {
    let pods = ns.api::<Pod>();
    let first = eventually(REAL, "the Sandbox's pod", || async {
        pods.get_opt(sandbox).await.ok().flatten()
    })
    .await;
    assert!(
        !first.labels().contains_key(AGENT_LABEL),
        "{:?}",
        first.labels()
    );
    ns.create_policy(
        "quick",
        json!({ "backoff": { "type": "Linear", "initialDelay": "1s", "maxDelay": "1s", "jitter": 0.0 },
                "circuitBreaker": { "failureThreshold": 0 } }),
    )
    .await;
    ns.create_agent(
        "worker",
        json!({ "sandboxRef": { "name": sandbox }, "restartPolicyRef": { "name": "quick" } }),
    )
    .await;

    let status = ns
        .wait_status_for(
            REAL,
            "worker",
            "attempt 1's crash recorded, attempt 2 running",
            |s| {
                s.attempt == 2
                    && s.phase == Some(Phase::Running)
                    && s.restart_history.iter().any(|r| r.attempt == 1)
            },
        )
        .await;
    assert_eq!(status.restart_history.len(), 1, "{status:?}");
    let record = &status.restart_history[0];
    assert_eq!(record.exit_code, Some(3), "{record:?}");
    assert_eq!(record.reason, Some(FailureReason::Error), "{record:?}");
    assert_eq!(
        record.message.as_deref().map(str::trim),
        Some("search tool: quota exceeded")
    );
    let failure = status.last_failure.as_ref().expect("the last failure");
    assert_eq!(failure.pod_name.as_deref(), Some(sandbox), "{failure:?}");
    assert!(record.restarted_at.is_some(), "{record:?}");
    assert_eq!(status.pod_name.as_deref(), Some(sandbox), "{status:?}");

    // The next pod: made by the Sandbox's controller (same name, a new uid), adopted.
    let next = pods.get(sandbox).await.expect("attempt 2's pod");
    assert_ne!(next.uid(), first.uid(), "a new pod");
    let label = |key: &str| next.labels().get(key).cloned();
    assert_eq!(label(AGENT_LABEL).as_deref(), Some("worker"));
    assert_eq!(label(ATTEMPT_LABEL).as_deref(), Some("2"));
    let owner = next
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    assert_eq!(owner.map(|o| o.name.as_str()), Some(sandbox), "{owner:?}");
    // The template's pod annotation reaches the pod, beside the operator's.
    assert_eq!(
        next.annotations()
            .get("example.com/pod-from")
            .map(String::as_str),
        Some("template")
    );

    // The claim and its Sandbox stay, the Sandbox running and still the claim's.
    let claimed = extension(ns, "SandboxClaim")
        .get(claim)
        .await
        .expect("the claim");
    let found = sandboxes(ns).get(sandbox).await.expect("the Sandbox");
    let owner = found
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    assert_eq!(
        owner.map(|o| (o.kind.as_str(), o.uid.as_str())),
        Some(("SandboxClaim", claimed.uid().unwrap_or_default().as_str()))
    );
    assert_eq!(
        operating_mode(ns, sandbox).await.as_deref(),
        Some("Running")
    );
    // Neither the claim's nor the template's nor the pool's annotations reach the Sandbox: one
    // that a claim makes cannot be annotated for an Agent of its own by its claim.
    assert_eq!(
        found.annotations().get("example.com/from"),
        None,
        "{found:?}"
    );
}

#[tokio::test]
async fn a_sandbox_made_for_a_claim_is_supervised() {
    let (ns, operator) = setup().await;
    template_and_pool(&ns, "cold", 0).await;
    let sandbox = claim(&ns, "job", "cold").await;
    assert_eq!(
        sandbox, "job",
        "a cold start's Sandbox is named after its claim"
    );
    supervised(&ns, "job", &sandbox).await;
    operator.stop().await;
}

#[tokio::test]
async fn a_sandbox_a_claim_adopted_from_a_warm_pool_is_supervised() {
    let (ns, operator) = setup().await;
    template_and_pool(&ns, "warm", 1).await;
    // The pool's Sandbox running before the claim, so that the claim adopts it.
    let pods = ns.api::<Pod>();
    let warm = eventually(REAL, "the warm pool's pod running", || async {
        let list = pods.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    })
    .await;
    let sandbox = claim(&ns, "job", "warm").await;
    assert_eq!(
        sandbox,
        warm.name_any(),
        "the claim adopted the pool's Sandbox"
    );
    assert!(
        sandbox.starts_with("warm-"),
        "keeps its pool name: {sandbox}"
    );
    supervised(&ns, "job", &sandbox).await;
    operator.stop().await;
}
