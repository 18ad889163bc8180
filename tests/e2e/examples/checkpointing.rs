//! examples/checkpointing-agent.yaml: the agent reports its steps on its Lease, its first run
//! crashes at step 50, and the second resumes from the checkpoint of step 50. Under kwok nothing
//! runs in the pod: the test writes the Lease as the script would, and ends the pods as it does.

use agent_supervisor::api::Phase;

use super::{apply, setup};
use crate::support::{TestNamespace, env_of};

/// What the script does after each step: report it on the Lease, and renew it as `pod`.
async fn step_done(ns: &TestNamespace, pod: &str, step: u32) {
    ns.report_on_lease(
        "summarizer",
        pod,
        &step.to_string(),
        &format!("step-{step}"),
    )
    .await;
}

#[tokio::test]
async fn the_checkpointing_agent_resumes_where_its_first_run_crashed() {
    let (ns, _operator) = setup().await;
    apply(&ns, "checkpointing-agent.yaml").await;
    let first = ns.wait_running("summarizer-1").await;
    assert_eq!(
        env_of(&first, "AGENT_CHECKPOINT"),
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
    assert_eq!(env_of(&second, "AGENT_CHECKPOINT"), "step-50");
    assert_eq!(env_of(&second, "AGENT_PROGRESS"), "50");
    // The crash is written within the status interval.
    let status = ns
        .wait_status("summarizer", "the crash recorded", |s| {
            !s.restart_history.is_empty()
        })
        .await;
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
