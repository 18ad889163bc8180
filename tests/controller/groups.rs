//! Supervision groups: the strategies, the start order, and who belongs to which group.

use agent_supervisor::api::{AgentStatus, GroupTrigger, Phase, Trigger};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::support::TestNamespace;
use crate::support::groups::condition;
use crate::{fast_policy, setup};

/// Creates the agents, each with the policy `fast` (exponential from `initial_delay`, no
/// jitter, breaker off).
pub(crate) async fn agents(ns: &TestNamespace, names: &[&str], initial_delay: &str) {
    ns.create_policy("fast", fast_policy(initial_delay)).await;
    for name in names {
        ns.create_agent(name, json!({ "restartPolicyRef": { "name": "fast" } }))
            .await;
    }
}

fn members(names: &[&str]) -> serde_json::Value {
    names.iter().map(|n| json!({ "agent": n })).collect()
}

pub(crate) async fn running_attempt(ns: &TestNamespace, agent: &str, attempt: u32) -> AgentStatus {
    ns.wait_status(agent, &format!("attempt {attempt} running"), |s| {
        s.attempt == attempt && s.phase == Some(Phase::Running)
    })
    .await
}

/// The names of the namespace's pods, sorted; with `live_only`, only those neither finished
/// nor being deleted.
pub(crate) async fn pod_names(ns: &TestNamespace, live_only: bool) -> Vec<String> {
    let mut names: Vec<String> = ns
        .api::<Pod>()
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| {
            let finished = matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            );
            !live_only || (p.metadata.deletion_timestamp.is_none() && !finished)
        })
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// A sibling the group restarted: one restart, recorded with trigger `Group`, counted toward
/// none of its own limits.
fn restarted_by_group(status: &AgentStatus, name: &str) {
    assert_eq!(status.restart_count, 1, "{name}: one restart");
    assert_eq!(status.restart_history.len(), 1, "{name}: one history entry");
    let record = &status.restart_history[0];
    assert_eq!(record.trigger, Trigger::Group, "{name}: trigger");
    assert_eq!(record.reason, None, "{name}: no failure of its own");
    assert_eq!(record.attempt, 1);
    assert!(record.restarted_at.is_some());
    assert_eq!(status.consecutive_failures, 0, "{name}: not its failure");
    assert!(
        status.recent_restarts.is_empty(),
        "{name}: not counted toward its restart limit"
    );
}

#[tokio::test]
async fn one_for_all_restarts_every_member_with_the_crashed_one() {
    let (ns, _operator) = setup().await;
    agents(&ns, &["alpha", "beta", "gamma"], "2s").await;
    ns.create_group(
        "trio",
        json!({ "strategy": "OneForAll", "members": members(&["alpha", "beta", "gamma"]) }),
    )
    .await;
    ns.wait_group_running("trio").await;
    assert_eq!(
        ns.status("alpha").await.group.map(|g| g.name).as_deref(),
        Some("trio")
    );

    ns.terminate("beta-1", 1, "Error", "tool call failed").await;
    for agent in ["alpha", "beta", "gamma"] {
        running_attempt(&ns, agent, 2).await;
    }
    let beta = ns.status("beta").await;
    assert_eq!(beta.restart_count, 1);
    assert_eq!(beta.restart_history[0].trigger, Trigger::Failure);
    assert_eq!(beta.consecutive_failures, 1);
    let failed_at = beta.restart_history[0]
        .failed_at
        .clone()
        .expect("failedAt")
        .0;
    for sibling in ["alpha", "gamma"] {
        let status = ns.status(sibling).await;
        restarted_by_group(&status, sibling);
        // Restarted together with beta, when beta's own restart was due: not before.
        let restarted = status.restart_history[0].restarted_at.clone().unwrap().0;
        assert!(
            restarted >= failed_at + jiff::SignedDuration::from_secs(2),
            "{sibling} restarted at {restarted}, before beta's restart was due (failed {failed_at} + 2s)"
        );
    }

    let group = ns.wait_group_running("trio").await;
    assert_eq!(group.restart_count, 1);
    let record = &group.restart_history[0];
    assert_eq!(record.member.as_deref(), Some("beta"));
    assert_eq!(record.reason.as_deref(), Some("Error"));
    assert_eq!(record.restarted, ["alpha", "beta", "gamma"]);
    assert_eq!(record.trigger, GroupTrigger::Failure);
    let note = ns.wait_group_event("trio", "GroupRestart").await;
    assert!(note.contains("beta crashed (Error)"), "{note}");
    // Nobody was restarted twice: no third attempt exists.
    let pods = pod_names(&ns, false).await;
    assert!(!pods.iter().any(|p| p.ends_with("-3")), "{pods:?}");
}

#[tokio::test]
async fn rest_for_one_restarts_the_crashed_member_and_those_after_it() {
    let (ns, _operator) = setup().await;
    // The group first, its agents right after, as one `kubectl apply` would.
    ns.create_group(
        "crew",
        json!({ "strategy": "RestForOne", "members": members(&["planner", "tools", "worker"]) }),
    )
    .await;
    agents(&ns, &["planner", "tools", "worker"], "2s").await;
    ns.wait_group_running("crew").await;

    ns.terminate("tools-1", 1, "Error", "too many open files")
        .await;
    running_attempt(&ns, "tools", 2).await;
    running_attempt(&ns, "worker", 2).await;
    restarted_by_group(&ns.status("worker").await, "worker");
    let group = ns.wait_group_running("crew").await;
    assert_eq!(group.restart_history[0].restarted, ["tools", "worker"]);
    // The member before the crashed one kept running its first pod.
    let planner = ns.status("planner").await;
    assert_eq!(planner.attempt, 1);
    assert_eq!(planner.restart_count, 0);
    assert!(planner.restart_history.is_empty());
    assert!(
        !pod_names(&ns, false)
            .await
            .contains(&"planner-2".to_string())
    );
    let missing: Vec<_> = ns
        .group_events("crew")
        .await
        .into_iter()
        .filter(|(reason, note)| reason == "MembersResolved" && note.contains("does not exist"))
        .collect();
    assert!(
        missing.is_empty(),
        "members created with the group were reported missing: {missing:?}"
    );
}

#[tokio::test]
async fn one_for_one_restarts_only_the_crashed_member_and_counts_it() {
    let metrics = std::sync::Arc::new(agent_supervisor::controller::metrics::Metrics::default());
    let (ns, _operator) = crate::setup_with(|config| config.metrics = metrics.clone()).await;
    agents(&ns, &["left", "right"], "2s").await;
    ns.create_group("pair", json!({ "members": members(&["left", "right"]) }))
        .await;
    ns.wait_group_running("pair").await;

    ns.terminate("right-1", 1, "Error", "boom").await;
    running_attempt(&ns, "right", 2).await;
    let group = ns
        .wait_group("pair", "one restart recorded", |s| s.restart_count == 1)
        .await;
    assert_eq!(group.restart_history[0].restarted, ["right"]);
    assert_eq!(group.recent_restarts.len(), 1);
    let left = ns.status("left").await;
    assert_eq!((left.attempt, left.restart_count), (1, 0));
    let exported = metrics.encode();
    assert!(
        exported.contains("agent_supervisor_group_restarts_total{trigger=\"Failure\"} 1"),
        "{exported}"
    );
    assert!(
        exported.contains("agent_supervisor_group_escalations_total 0"),
        "{exported}"
    );
}

#[tokio::test]
async fn sequential_start_creates_each_pod_once_the_member_before_runs() {
    let (ns, _operator) = setup().await;
    // Applied as a file lists them, the group first: the operator has seen it by the time its
    // members' first starts are decided (an Agent that started before its group was seen joins
    // it running, and the order applies from its next start).
    ns.create_group(
        "crew",
        json!({ "startOrder": "Sequential", "members": members(&["planner", "tools"]) }),
    )
    .await;
    // The planner's pod cannot be scheduled until a node carries this namespace's label.
    let label = "supervisor.dev/test-node";
    ns.create_agent(
        "planner",
        json!({ "template": { "spec": {
            "nodeSelector": { label: ns.name },
            "containers": [{ "name": "agent", "image": "example.invalid/agent:1" }],
        }}}),
    )
    .await;
    ns.create_agent("tools", json!({})).await;

    let group = ns
        .wait_group("crew", "tools waiting for the planner", |s| {
            s.members
                .iter()
                .any(|m| m.name == "tools" && m.waiting_for.as_deref() == Some("planner"))
        })
        .await;
    assert_eq!(group.ready.as_deref(), Some("0/2"));
    let tools = ns
        .wait_status("tools", "held by its group for the planner", |s| {
            // Before the group's status lists it, the agent is held "waiting for group crew to
            // take it in"; once listed, the hold names the member it waits for.
            s.conditions.iter().any(|c| {
                c.type_ == "Ready" && c.reason == "WaitingForGroup" && c.message.contains("planner")
            })
        })
        .await;
    let ready = tools
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert!(ready.message.contains("group crew"), "{}", ready.message);
    // Asked again, the operator still holds it.
    let again = ns.decided_again("tools").await;
    assert_eq!(again.attempt, 0, "tools must wait: {again:?}");
    assert_eq!(
        pod_names(&ns, false).await,
        ["planner-1"],
        "tools must wait"
    );

    // Let the planner run: then, and only then, the tool server's pod is created.
    let nodes = ns.client.clone();
    let nodes: kube::Api<Node> = kube::Api::all(nodes);
    let node = nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items[0]
        .metadata
        .name
        .clone()
        .expect("a node name");
    let add = json!({ "metadata": { "labels": { label: ns.name } } });
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(&add))
        .await
        .expect("label the node");
    let planner_pod = ns.wait_running("planner-1").await;
    let tools_pod = ns.wait_running("tools-1").await;
    let remove = json!({ "metadata": { "labels": { label: null } } });
    nodes
        .patch(&node, &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .expect("unlabel the node");
    let planner_ran = planner_pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.clone())
        .expect("planner started")
        .0;
    let tools_created = tools_pod.metadata.creation_timestamp.unwrap().0;
    assert!(
        tools_created >= planner_ran,
        "tools-1 created at {tools_created}, before the planner ran at {planner_ran}"
    );
    ns.wait_group_running("crew").await;
}

#[tokio::test]
async fn conflicts_and_missing_members_are_reported_and_the_rest_supervised() {
    let (ns, _operator) = setup().await;
    agents(&ns, &["shared"], "2s").await;
    ns.create_group(
        "first",
        json!({ "members": [{ "agent": "shared" }, { "agent": "ghost" }] }),
    )
    .await;
    // Created later: the older group keeps the member.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    ns.create_group("second", json!({ "members": [{ "agent": "shared" }] }))
        .await;

    let first = ns
        .wait_group("first", "ghost reported missing", |s| {
            condition(s, "MembersResolved").is_some_and(|c| c.0 == "False")
        })
        .await;
    let (_, reason, message) = condition(&first, "MembersResolved").unwrap();
    assert_eq!(reason, "NotFound");
    assert!(message.contains("ghost"), "{message}");
    let second = ns
        .wait_group("second", "shared reported taken", |s| {
            condition(s, "MembersResolved").is_some_and(|c| c.1 == "Conflict")
        })
        .await;
    let (status, _, message) = condition(&second, "MembersResolved").unwrap();
    assert_eq!(status, "False");
    assert!(message.contains("belongs to group first"), "{message}");
    let shared = ns
        .wait_status("shared", "running under first", |s| {
            s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(shared.group.map(|g| g.name).as_deref(), Some("first"));

    // The missing member appears: it is supervised from then on.
    ns.create_agent("ghost", json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;
    ns.wait_group("first", "all members found", |s| {
        condition(s, "MembersResolved").is_some_and(|c| c.0 == "True")
    })
    .await;
    let ghost = ns
        .wait_status("ghost", "in group first", |s| s.group.is_some())
        .await;
    assert_eq!(ghost.group.unwrap().name, "first");
}

#[tokio::test]
async fn a_cycle_of_groups_is_refused_at_the_youngest_group() {
    let (ns, _operator) = setup().await;
    ns.create_group("outer", json!({ "members": [{ "group": "inner" }] }))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    ns.create_group("inner", json!({ "members": [{ "group": "outer" }] }))
        .await;
    let inner = ns
        .wait_group("inner", "its claim on outer refused", |s| {
            condition(s, "MembersResolved").is_some_and(|c| c.1 == "Cycle")
        })
        .await;
    assert_eq!(inner.group.map(|g| g.name).as_deref(), Some("outer"));
    let outer = ns
        .wait_group("outer", "resolved", |s| {
            condition(s, "MembersResolved").is_some_and(|c| c.0 == "True")
        })
        .await;
    assert_eq!(outer.group, None, "outer is the root");
}

#[tokio::test]
async fn a_suspended_member_is_left_out_of_group_restarts() {
    let (ns, _operator) = setup().await;
    agents(&ns, &["active"], "2s").await;
    ns.create_agent(
        "resting",
        json!({ "restartPolicyRef": { "name": "fast" }, "suspend": true }),
    )
    .await;
    ns.create_group(
        "mixed",
        json!({ "strategy": "OneForAll", "members": members(&["active", "resting"]) }),
    )
    .await;
    running_attempt(&ns, "active", 1).await;
    ns.terminate("active-1", 1, "Error", "boom").await;
    running_attempt(&ns, "active", 2).await;
    let group = ns
        .wait_group("mixed", "one restart", |s| s.restart_count == 1)
        .await;
    assert_eq!(group.restart_history[0].restarted, ["active"]);
    let resting = ns.status("resting").await;
    assert_eq!(resting.phase, Some(Phase::Suspended));
    assert!(resting.restart_history.is_empty());
    assert_eq!(resting.attempt, 0);
}
