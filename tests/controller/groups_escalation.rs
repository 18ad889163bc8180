//! Supervision groups giving up, escalating up the tree, shutting down, and surviving an
//! operator killed in the middle of a group restart.

use agent_supervisor::api::{GroupPhase, GroupTrigger, Phase, ShutdownType, Trigger};
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::groups::{agents, pod_names, running_attempt};
use crate::setup;
use crate::support::Operator;
use crate::support::groups::condition;

#[tokio::test]
async fn a_give_up_escalates_through_two_levels_and_the_root_restarts_the_subtree() {
    let (ns, _operator) = setup().await;
    agents(&ns, &["scout"], "1s").await;
    ns.create_group(
        "leaf",
        json!({ "maxRestarts": 0, "members": [{ "agent": "scout" }] }),
    )
    .await;
    ns.create_group(
        "mid",
        json!({ "maxRestarts": 0, "members": [{ "group": "leaf" }] }),
    )
    .await;
    ns.create_group(
        "root",
        json!({ "maxRestarts": 5, "members": [{ "group": "mid" }] }),
    )
    .await;
    ns.wait_group_running("root").await;

    ns.terminate("scout-1", 1, "Error", "lost the plot").await;
    // The leaf gives up at once (intensity 0), the mid group too, and the root restarts the mid
    // group, which restarts the leaf, which restarts the scout.
    running_attempt(&ns, "scout", 2).await;
    let root = ns.wait_group_running("root").await;
    assert_eq!(root.restart_count, 1);
    assert_eq!(root.restart_history.len(), 1);
    let record = &root.restart_history[0];
    assert_eq!(record.member.as_deref(), Some("mid"), "the parent of mid");
    assert_eq!(record.reason.as_deref(), Some("GroupGaveUp"));
    assert_eq!(record.trigger, GroupTrigger::Escalation);
    assert_eq!(record.restarted, ["mid"]);

    for (group, parent) in [("mid", "root"), ("leaf", "mid")] {
        let status = ns.wait_group_running(group).await;
        assert_eq!(
            status.incarnation, 2,
            "{group}: a new incarnation: {status:#?}"
        );
        assert!(status.gave_up.is_none());
        assert_eq!(status.recent_restarts, [], "{group}: count starts afresh");
        assert_eq!(
            condition(&status, "Escalated").map(|c| c.0).as_deref(),
            Some("False")
        );
        assert_eq!(status.restart_history.len(), 1, "{group}");
        assert_eq!(status.restart_history[0].trigger, GroupTrigger::Group);
        assert_eq!(status.group.as_ref().map(|g| g.name.as_str()), Some(parent));
        let escalated = ns.wait_group_event(group, "GroupEscalated").await;
        assert!(
            escalated.contains(&format!("escalating to group {parent}")),
            "{escalated}"
        );
    }
    let scout = ns.status("scout").await;
    assert_eq!(scout.restart_count, 1);
    assert_eq!(scout.restart_history[0].trigger, Trigger::Failure);
}

#[tokio::test]
async fn a_root_group_that_gives_up_stays_stopped_until_it_is_reset() {
    let (ns, _operator) = setup().await;
    agents(&ns, &["first", "second"], "1s").await;
    ns.create_group(
        "solo",
        json!({ "strategy": "OneForAll", "maxRestarts": 0,
                "members": [{ "agent": "first" }, { "agent": "second" }] }),
    )
    .await;
    ns.wait_group_running("solo").await;

    ns.terminate("first-1", 1, "Error", "boom").await;
    let group = ns
        .wait_group("solo", "escalated", |s| {
            s.phase == Some(GroupPhase::Escalated)
        })
        .await;
    let (status, reason, _) = condition(&group, "Escalated").unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "GaveUp"));
    let note = ns.wait_group_event("solo", "GroupEscalated").await;
    assert!(note.contains("reset-requested-at"), "{note}");
    for agent in ["first", "second"] {
        let status = ns
            .wait_status(agent, "stopped by its group", |s| {
                s.phase == Some(Phase::Stopped)
            })
            .await;
        let ready = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.reason, "GroupGaveUp", "{agent}");
    }
    ns.wait_gone("second-1").await;
    // Asked again, the operator restarts neither.
    for agent in ["first", "second"] {
        let again = ns.decided_again(agent).await;
        assert_eq!(again.phase, Some(Phase::Stopped), "{agent}");
    }
    assert_eq!(
        pod_names(&ns, true).await,
        Vec::<String>::new(),
        "nothing restarts"
    );
    assert_eq!(ns.status("first").await.attempt, 1);

    let reset = json!({ "metadata": { "annotations": {
        "supervisor.dev/reset-requested-at": "after-the-incident" } } });
    ns.api::<agent_supervisor::api::AgentGroup>()
        .patch("solo", &PatchParams::default(), &Patch::Merge(&reset))
        .await
        .expect("annotate the group");
    running_attempt(&ns, "first", 2).await;
    running_attempt(&ns, "second", 2).await;
    let group = ns.wait_group_running("solo").await;
    assert!(group.gave_up.is_none());
    assert_eq!(
        condition(&group, "Escalated").map(|c| c.0).as_deref(),
        Some("False")
    );
    assert_eq!(ns.status("first").await.restart_count, 1);
    assert_eq!(ns.status("second").await.restart_count, 1);
}

#[tokio::test]
async fn a_significant_member_shutting_down_shuts_the_group_down() {
    let (ns, _operator) = setup().await;
    agents(&ns, &["planner", "worker"], "1s").await;
    ns.create_group(
        "venture",
        json!({ "autoShutdown": "AnySignificant",
                "members": [{ "agent": "planner", "significant": true }, { "agent": "worker" }] }),
    )
    .await;
    ns.wait_group_running("venture").await;

    ns.terminate(
        "planner-1",
        0,
        "Completed",
        r#"{"shutdown":"economic","reason":"budget exhausted"}"#,
    )
    .await;
    let group = ns
        .wait_group("venture", "shut down", |s| {
            s.phase == Some(GroupPhase::Shutdown)
        })
        .await;
    let shutdown = group.shutdown.expect("the group's shutdown");
    assert_eq!(shutdown.kind, ShutdownType::Economic);
    assert!(
        shutdown
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("planner")),
        "{shutdown:?}"
    );
    ns.wait_group_event("venture", "GroupShutdown").await;

    let worker = ns
        .wait_status("worker", "shut down by its group", |s| s.shutdown.is_some())
        .await;
    let own = worker.shutdown.unwrap();
    assert_eq!(own.kind, ShutdownType::Economic);
    assert_eq!(own.source.as_deref(), Some("Group"));
    ns.wait_gone("worker-1").await;
    let planner = ns.status("planner").await.shutdown.expect("planner's own");
    assert_eq!(planner.source.as_deref(), Some("TerminationMessage"));
    assert_eq!(planner.reason.as_deref(), Some("budget exhausted"));
}

#[tokio::test]
async fn an_operator_killed_during_a_group_restart_finishes_it_exactly_once() {
    let (ns, operator) = setup().await;
    agents(&ns, &["a", "b", "c"], "4s").await;
    ns.create_group(
        "team",
        json!({ "strategy": "OneForAll",
                "members": [{ "agent": "a" }, { "agent": "b" }, { "agent": "c" }] }),
    )
    .await;
    ns.wait_group_running("team").await;

    ns.terminate("a-1", 1, "Error", "boom").await;
    // The group's order is written: the operator dies before the restart is due.
    ns.wait_group("team", "the restart ordered", |s| s.restart_count == 1)
        .await;
    operator.kill().await;
    let _operator = Operator::start(&ns.name).await;

    for agent in ["a", "b", "c"] {
        running_attempt(&ns, agent, 2).await;
    }
    let group = ns.wait_group_running("team").await;
    assert_eq!(group.restart_count, 1, "one group restart");
    assert_eq!(group.restart_history.len(), 1);
    for agent in ["a", "b", "c"] {
        let status = ns.status(agent).await;
        assert_eq!(status.restart_count, 1, "{agent} restarted once");
        assert_eq!(status.restart_history.len(), 1, "{agent}");
    }
    let live = pod_names(&ns, true).await;
    assert_eq!(live, ["a-2", "b-2", "c-2"], "one live pod per agent");
}
