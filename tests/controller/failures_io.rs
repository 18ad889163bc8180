//! Partial failures of the IO shell: a restart whose status write was lost, an Agent the operator
//! cannot decode, and conditions written by someone else.

use agent_supervisor::api::{
    AGENT_LABEL, ATTEMPT_LABEL, Agent, HANDLED_RESTART_ANNOTATION, Phase,
    RESTART_REQUESTED_ANNOTATION, TEMPLATE_HASH_ANNOTATION, TRIGGER_ANNOTATION, Trigger,
};
use agent_supervisor::controller::manifests;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::fast_policy;
use crate::support::{self, Operator, TestNamespace};

/// A namespace with the CRDs installed and no operator yet.
pub(crate) async fn namespace() -> TestNamespace {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    ns
}

#[tokio::test]
async fn a_manual_restart_whose_status_write_was_lost_is_adopted_never_repeated() {
    let ns = namespace().await;
    let operator = Operator::start(&ns.name).await;
    ns.create_policy("p", fast_policy("1s")).await;
    ns.create_agent("x", json!({ "restartPolicyRef": { "name": "p" } }))
        .await;
    ns.wait_running("x-1").await;
    ns.wait_status("x", "phase Running", |s| {
        s.phase == Some(Phase::Running) && s.attempt == 1
    })
    .await;
    operator.kill().await;

    // What a restart on request leaves behind when the operator stops right after creating the
    // replacement: the request not yet marked handled, attempt 1 gone, attempt 2 created (as the
    // operator creates it), and the status still at attempt 1.
    let agents = ns.api::<Agent>();
    let patch = json!({ "metadata": { "annotations": { RESTART_REQUESTED_ANNOTATION: "v1" } } });
    let agent = agents
        .patch("x", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("request a restart");
    let pods = ns.api::<Pod>();
    pods.delete("x-1", &DeleteParams::default())
        .await
        .expect("delete attempt 1");
    ns.wait_gone("x-1").await;
    let mut spec = serde_json::to_value(agent.spec.template.get().spec.expect("a pod spec"))
        .expect("a pod spec serializes");
    spec["restartPolicy"] = json!("Never");
    let replacement: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "x-2",
            "labels": { AGENT_LABEL: "x", ATTEMPT_LABEL: "2" },
            "annotations": {
                TEMPLATE_HASH_ANNOTATION: manifests::template_hash(&agent),
                TRIGGER_ANNOTATION: "Manual",
                HANDLED_RESTART_ANNOTATION: "v1",
            },
            "ownerReferences": [manifests::owner_reference(&agent)],
        },
        "spec": spec,
    }))
    .expect("a valid pod");
    pods.create(&PostParams::default(), &replacement)
        .await
        .expect("create attempt 2");
    let before = ns.status("x").await;
    assert_eq!(
        (before.attempt, before.handled_restart_request.as_deref()),
        (1, None),
        "the status has not seen the restart"
    );

    let _operator = Operator::start(&ns.name).await;
    let adopted = ns
        .wait_status("x", "attempt 2 adopted, request v1 handled", |s| {
            s.attempt == 2 && s.handled_restart_request.as_deref() == Some("v1")
        })
        .await;
    assert_eq!(adopted.pod_name.as_deref(), Some("x-2"));
    ns.wait_running("x-2").await;
    let running = ns
        .wait_status("x", "phase Running on attempt 2", |s| {
            s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(running.attempt, 2, "the restart was not repeated");
    assert_eq!(running.restart_count, 1);
    assert_eq!(
        running.restart_history.len(),
        1,
        "one restart, recorded once"
    );
    let record = running
        .restart_history
        .first()
        .expect("the restart is in the history");
    assert_eq!(record.trigger, Trigger::Manual);
    assert_eq!(record.attempt, 1);
    assert!(record.restarted_at.is_some(), "restartedAt recorded");
    assert!(
        pods.get_opt("x-3").await.expect("read pod x-3").is_none(),
        "a second pod was created for the same request"
    );
    let adopted_pod = pods.get("x-2").await.expect("pod x-2 exists");
    assert!(
        adopted_pod.metadata.deletion_timestamp.is_none(),
        "the adopted pod is being deleted"
    );
}

#[tokio::test]
async fn an_agent_the_operator_cannot_decode_stalls_nothing_else() {
    let ns = namespace().await;
    ns.create_agent("bad", json!({})).await;
    // Valid for the schema (an integer ≥ 0), too large for the operator's u32.
    let agents: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::erase::<Agent>(&()),
    );
    let patch = json!({ "status": { "restartCount": 5_000_000_000u64 } });
    let stored = agents
        .patch_status("bad", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the API server takes the status");
    assert_eq!(
        stored.data["status"]["restartCount"],
        json!(5_000_000_000u64)
    );

    let operator = Operator::start(&ns.name).await;
    ns.create_agent("good", json!({})).await;
    ns.wait_running("good-1").await;
    ns.wait_status("good", "phase Running", |s| s.phase == Some(Phase::Running))
        .await;
    let note = ns.wait_event("bad", "InvalidObject").await;
    assert!(
        note.contains("5000000000"),
        "the Event says what is wrong: {note}"
    );
    assert!(operator.is_running(), "the operator stopped");
    assert!(
        ns.api::<Pod>()
            .get_opt("bad-1")
            .await
            .expect("read pod bad-1")
            .is_none(),
        "the undecodable Agent was acted on"
    );
}

/// A third party's condition on an Agent, applied under its own field manager.
async fn apply_external_check(ns: &TestNamespace, agent: &str, present: bool) -> Agent {
    let conditions = if present {
        json!([{
            "type": "ExternalCheck", "status": "True", "reason": "Passed",
            "message": "checked by someone else", "lastTransitionTime": jiff::Timestamp::now().to_string(),
        }])
    } else {
        json!([])
    };
    let patch = json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
        "metadata": { "name": agent },
        "status": { "conditions": conditions },
    });
    ns.api::<Agent>()
        .patch_status(
            agent,
            &PatchParams::apply("external-checker"),
            &Patch::Apply(&patch),
        )
        .await
        .expect("apply the third party's status")
}

fn has_condition(agent: &Agent, type_: &str) -> bool {
    agent
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == type_))
}

#[tokio::test]
async fn a_condition_written_by_someone_else_stays_theirs_to_remove() {
    let ns = namespace().await;
    let _operator = Operator::start(&ns.name).await;
    ns.create_policy("slow", fast_policy("30s")).await;
    ns.create_agent("checked", json!({ "restartPolicyRef": { "name": "slow" } }))
        .await;
    ns.wait_running("checked-1").await;
    ns.wait_status("checked", "phase Running", |s| {
        s.phase == Some(Phase::Running)
    })
    .await;

    let applied = apply_external_check(&ns, "checked", true).await;
    assert!(has_condition(&applied, "ExternalCheck"));
    // The operator writes the status after it: a crash, and a restart 30s away.
    ns.terminate("checked-1", 1, "Error", "boom").await;
    ns.wait_status("checked", "phase BackingOff", |s| {
        s.phase == Some(Phase::BackingOff)
    })
    .await;
    let agent = ns.api::<Agent>().get_status("checked").await.expect("read");
    assert!(
        has_condition(&agent, "ExternalCheck"),
        "the operator removed someone else's condition"
    );

    let removed = apply_external_check(&ns, "checked", false).await;
    assert!(
        !has_condition(&removed, "ExternalCheck"),
        "the third party cannot remove its own condition: the operator co-owns it"
    );
    assert!(
        has_condition(&removed, "Ready"),
        "the operator's own conditions stay"
    );
    assert_eq!(
        removed.status.and_then(|s| s.phase),
        Some(Phase::BackingOff)
    );
}
