//! A Sandbox annotated `supervisor.dev/restart-policy` gets an Agent made for it, named after it
//! and owned by it: kept as the annotation says (repointed, made again, deleted with the
//! annotation) and gone with the Sandbox.

use agent_supervisor::api::{Agent, Phase};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::sandboxes::{REAL, create_sandbox, sandboxes, setup};
use crate::support::{TestNamespace, eventually};

const ANNOTATION: &str = "supervisor.dev/restart-policy";

async fn annotate(ns: &TestNamespace, sandbox: &str, policy: Option<&str>) {
    let patch = json!({ "metadata": { "annotations": { ANNOTATION: policy } } });
    sandboxes(ns)
        .patch(sandbox, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate the Sandbox");
}

/// Waits for the Agent `name` to be as `check` says, and returns it.
async fn agent_when(
    agents: &Api<Agent>,
    name: &str,
    what: &str,
    check: impl Fn(&Agent) -> bool,
) -> Agent {
    eventually(REAL, &format!("Agent {name}: {what}"), || async {
        agents
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .filter(|a| check(a))
    })
    .await
}

async fn gone(agents: &Api<Agent>, name: &str, what: &str) {
    eventually(REAL, &format!("Agent {name} {what}"), || async {
        matches!(agents.get_opt(name).await, Ok(None)).then_some(())
    })
    .await;
}

fn policy(agent: &Agent) -> Option<&str> {
    agent
        .spec
        .restart_policy_ref
        .as_ref()
        .map(|r| r.name.as_str())
}

#[tokio::test]
async fn an_annotated_sandbox_gets_its_agent_kept_as_annotated_and_gone_with_it() {
    let (ns, operator) = setup().await;
    ns.create_policy(
        "steady",
        json!({ "backoff": { "type": "Linear", "initialDelay": "1s" } }),
    )
    .await;
    create_sandbox(&ns, "helper", "sleep 3600", Some("Never")).await;
    let sandbox_uid = sandboxes(&ns)
        .get("helper")
        .await
        .expect("the Sandbox")
        .uid()
        .expect("its uid");
    let agents = ns.api::<Agent>();

    // Annotated after it was made (as a SandboxClaim's user would): its Agent is made, names
    // it, uses the policy, is owned by it, and supervises its pod.
    annotate(&ns, "helper", Some("steady")).await;
    let made = agent_when(&agents, "helper", "made for the Sandbox", |_| true).await;
    assert_eq!(
        made.spec.sandbox_ref.as_ref().map(|r| r.name.as_str()),
        Some("helper")
    );
    assert_eq!(policy(&made), Some("steady"));
    assert!(made.spec.template.is_unset(), "{:?}", made.spec);
    let owner = &made.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Sandbox", sandbox_uid.as_str())
    );
    ns.wait_status_for(REAL, "helper", "its Sandbox's pod adopted, running", |s| {
        s.attempt == 1 && s.phase == Some(Phase::Running)
    })
    .await;

    // An empty value: the namespace's default policy.
    annotate(&ns, "helper", Some("")).await;
    agent_when(&agents, "helper", "repointed to the default", |a| {
        policy(a).is_none()
    })
    .await;

    // Deleted by someone while the annotation stays: made again.
    let first = made.uid().expect("uid");
    agents
        .delete("helper", &DeleteParams::default())
        .await
        .expect("delete the Agent");
    let again = agent_when(&agents, "helper", "made again", |a| {
        a.uid().as_ref() != Some(&first)
    })
    .await;
    assert_eq!(policy(&again), None);

    // The annotation removed: the Agent goes, and is not made again.
    annotate(&ns, "helper", None).await;
    gone(&agents, "helper", "deleted with the annotation").await;

    // Annotated again, then the Sandbox deleted: its Agent goes with it (garbage collection).
    annotate(&ns, "helper", Some("steady")).await;
    agent_when(&agents, "helper", "made once more", |a| {
        policy(a) == Some("steady")
    })
    .await;
    sandboxes(&ns)
        .delete("helper", &DeleteParams::foreground())
        .await
        .expect("delete the Sandbox");
    gone(&agents, "helper", "gone with its Sandbox").await;
    operator.stop().await;
}

#[tokio::test]
async fn an_agent_of_the_sandboxs_name_it_does_not_own_is_left_alone() {
    let (ns, operator) = setup().await;
    // Someone's own Agent named like the Sandbox, with a template of its own.
    ns.create_agent("taken", json!({})).await;
    create_sandbox(&ns, "taken", "sleep 3600", Some("Never")).await;
    annotate(&ns, "taken", Some("steady")).await;
    // A second annotated Sandbox, annotated after the first: once its Agent is made, the
    // operator has looked at the first (one queue, in order).
    create_sandbox(&ns, "later", "sleep 3600", Some("Never")).await;
    annotate(&ns, "later", Some("steady")).await;
    let agents = ns.api::<Agent>();
    agent_when(&agents, "later", "made", |_| true).await;
    let taken = agents.get("taken").await.expect("the Agent");
    assert!(!taken.spec.template.is_unset(), "{:?}", taken.spec);
    assert!(taken.spec.sandbox_ref.is_none(), "{:?}", taken.spec);
    assert!(taken.owner_references().is_empty());
    assert_eq!(policy(&taken), None);
    operator.stop().await;
}
