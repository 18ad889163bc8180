//! examples/checkpointing-agent.yaml: the agent reports its steps on its Lease, its first run
//! crashes at step 50, and the second resumes from the checkpoint of step 50. Under kwok nothing
//! runs in the pod: the test writes the Lease as the script would, and ends the pods as it does.

use agent_supervisor::api::{CHECKPOINT_ANNOTATION, PROGRESS_ANNOTATION, Phase};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{apply, setup};
use crate::support::TestNamespace;

/// What the script does after each step: report it on the Lease, and renew it as `pod`.
async fn step_done(ns: &TestNamespace, pod: &str, step: u32) {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        .to_string();
    let patch = json!({
        "metadata": { "annotations": {
            PROGRESS_ANNOTATION: step.to_string(),
            CHECKPOINT_ANNOTATION: format!("step-{step}"),
        }},
        "spec": { "holderIdentity": pod, "renewTime": now },
    });
    ns.api::<Lease>()
        .patch("summarizer", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the agent writes its Lease");
}

fn env(pod: &Pod, name: &str) -> String {
    let container = &pod.spec.as_ref().expect("a spec").containers[0];
    let var = container.env.iter().flatten().find(|v| v.name == name);
    var.and_then(|v| v.value.clone()).unwrap_or_default()
}

#[tokio::test]
async fn the_checkpointing_agent_resumes_where_its_first_run_crashed() {
    let (ns, _operator) = setup().await;
    apply(&ns, "checkpointing-agent.yaml").await;
    let first = ns.wait_running("summarizer-1").await;
    assert_eq!(
        env(&first, "AGENT_CHECKPOINT"),
        "",
        "the first run starts from scratch"
    );
    for step in [10, 30, 50] {
        step_done(&ns, "summarizer-1", step).await;
    }
    ns.wait_status("summarizer", "the checkpoint of step 50", |s| {
        s.checkpoints
            .first()
            .is_some_and(|c| c.reference == "step-50" && c.progress == Some(50))
    })
    .await;
    ns.terminate("summarizer-1", 1, "Error", "crashing at step 50")
        .await;

    let second = ns.wait_running("summarizer-2").await;
    assert_eq!(env(&second, "AGENT_CHECKPOINT"), "step-50");
    assert_eq!(env(&second, "AGENT_PROGRESS"), "50");
    let status = ns.status("summarizer").await;
    let record = &status.restart_history[0];
    assert_eq!(
        (record.checkpoint.as_deref(), record.progress),
        (None, Some(50))
    );

    // It finishes the other 50 steps and exits 0: done, and left alone.
    step_done(&ns, "summarizer-2", 100).await;
    ns.terminate("summarizer-2", 0, "Completed", "all 100 steps done")
        .await;
    let done = ns
        .wait_status("summarizer", "shut down when done", |s| {
            s.phase == Some(Phase::Shutdown)
        })
        .await;
    assert_eq!(done.progress.map(|p| p.value), Some(100));
}
