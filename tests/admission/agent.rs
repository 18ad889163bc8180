//! Agents at admission: invalid specs and unusable names refused, shutdown free text bounded.

use agent_supervisor::api::Agent;
use kube::Api;
use serde_json::{Value, json};

use crate::{create_raw, setup};

#[tokio::test]
async fn invalid_agents_are_rejected() {
    let ns = setup().await;
    let agent = |spec: Value| json!({ "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent", "metadata": { "name": "a" }, "spec": spec });
    let template = json!({ "spec": { "containers": [{ "name": "agent", "image": "busybox" }] } });
    let cases = [
        (
            json!({}),
            vec![
                "spec",
                "give exactly one of template (a pod the operator makes) and sandboxRef",
            ],
        ),
        (
            json!({ "template": template, "sandboxRef": { "name": "box" } }),
            vec!["spec", "give exactly one of template"],
        ),
        (
            json!({ "sandboxRef": { "name": "box" }, "volumeClaimTemplates": [{ "metadata": { "name": "data" }, "spec": {} }] }),
            vec![
                "spec.volumeClaimTemplates",
                "the Sandbox's own volumeClaimTemplates",
            ],
        ),
        (
            json!({ "sandboxRef": { "name": "" } }),
            vec!["spec.sandboxRef.name"],
        ),
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

#[tokio::test]
async fn a_sandbox_agent_is_accepted_and_its_sandbox_ref_never_changes() {
    let ns = setup().await;
    let agents: Api<Agent> = Api::namespaced(ns.client.clone(), &ns.name);
    let agent = json!({ "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent", "metadata": { "name": "boxed" }, "spec": { "sandboxRef": { "name": "box" } } });
    create_raw::<Agent>(&ns, agent)
        .await
        .expect("an Agent with sandboxRef alone is accepted");
    let made = agents.get("boxed").await.expect("read back");
    assert_eq!(
        made.spec.sandbox_ref.map(|r| r.name).as_deref(),
        Some("box")
    );
    assert!(made.spec.template.is_unset(), "no template of its own");
    let template = json!({ "spec": { "containers": [{ "name": "agent", "image": "busybox" }] } });
    for (patch, field) in [
        (
            json!({ "spec": { "sandboxRef": { "name": "other" } } }),
            "spec.sandboxRef",
        ),
        (
            json!({ "spec": { "sandboxRef": null, "template": template } }),
            "spec.sandboxRef",
        ),
    ] {
        let refused = agents
            .patch(
                "boxed",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .expect_err("a changed sandboxRef is refused");
        let message = refused.to_string();
        assert!(message.contains(field), "{patch}: {message}");
        assert!(
            message.contains("sandboxRef cannot be added, removed or changed"),
            "{message}"
        );
    }
}
