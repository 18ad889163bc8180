//! The status writer: a busy agent's changes are written together within the interval, nothing
//! pending is lost on a graceful stop, and a successor rebuilds what was not written from the
//! pods, newest first.

use std::time::Duration;

use agent_supervisor::api::{
    AGENT_LABEL, AGENT_UID_LABEL, ATTEMPT_LABEL, Agent, FailureReason, Phase,
    TEMPLATE_HASH_ANNOTATION, TRIGGER_ANNOTATION, Trigger,
};
use agent_supervisor::controller::manifests;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::support::{self, Operator, Recorder, TestNamespace};

/// Long enough that a test's crashes all come within one interval, however loaded the machine:
/// what is not written at once waits for it (or for a graceful stop).
const LONG: Duration = Duration::from_secs(300);

/// Every status written, as `versions` recorded them, once it holds the one that recorded
/// `restarts` restarts: the read that found that status may run ahead of the recording's watch.
async fn written_statuses(
    versions: &Recorder<Agent>,
    restarts: u32,
) -> Vec<agent_supervisor::api::AgentStatus> {
    versions
        .wait_for(
            &format!("a status with {restarts} restarts recorded"),
            |a| {
                a.status
                    .as_ref()
                    .is_some_and(|s| s.restart_count == restarts)
            },
        )
        .await;
    versions
        .versions()
        .into_iter()
        .filter_map(|a| a.status)
        .collect()
}

/// A namespace and an operator whose status interval is `interval`.
async fn with_interval(interval: Duration) -> (TestNamespace, Operator) {
    crate::setup_with(|config| config.status_interval = interval).await
}

#[tokio::test]
async fn a_new_agent_shows_its_phase_and_pod_within_its_interval() {
    let (ns, _operator) = with_interval(Duration::from_secs(2)).await;
    ns.create_agent("fresh", json!({})).await;
    // Its pod waits for kwok (or a scheduler) here: the status says so, not nothing.
    let status = ns
        .wait_status("fresh", "a phase recorded", |s| s.phase.is_some())
        .await;
    assert_eq!(status.pod_name.as_deref(), Some("fresh-1"));
    assert!(matches!(
        status.phase,
        Some(Phase::Pending | Phase::Running)
    ));
}

#[tokio::test]
async fn crashes_in_a_row_are_written_together_and_each_is_recorded() {
    let (ns, _operator) = with_interval(Duration::from_secs(30)).await;
    let versions = ns.record_agent("looper").await;
    ns.looper().await;
    ns.crash_looper(1..=3).await;
    ns.wait_running("looper-4").await;
    let status = ns
        .wait_status_for(
            Duration::from_secs(90),
            "looper",
            "the three crashes recorded",
            |s| s.restart_count == 3,
        )
        .await;
    assert_eq!(
        (status.attempt, status.pod_name.as_deref()),
        (4, Some("looper-4"))
    );
    let history: Vec<_> = status
        .restart_history
        .iter()
        .map(|r| (r.attempt, r.trigger, r.exit_code, r.restarted_at.is_some()))
        .collect();
    assert_eq!(
        history,
        [
            (3, Trigger::Failure, Some(3), true),
            (2, Trigger::Failure, Some(2), true),
            (1, Trigger::Failure, Some(1), true)
        ]
    );
    assert_eq!(status.consecutive_failures, 3);
    // The first crash written at once, the next two together: no status ever said attempt 3.
    let written: Vec<u32> = written_statuses(&versions, 3)
        .await
        .iter()
        .map(|s| s.attempt)
        .collect();
    assert!(
        written.contains(&2) && !written.contains(&3),
        "attempts the status recorded, in order: {written:?}"
    );
}

#[tokio::test]
async fn what_is_pending_is_written_when_the_operator_stops() {
    let (ns, operator) = with_interval(LONG).await;
    ns.looper().await;
    ns.crash_looper(1..=2).await;
    ns.wait_running("looper-3").await;
    // Both restarts were made; the first was written at once, and the interval is long: the
    // second's record is pending.
    let before = ns.status("looper").await;
    assert_eq!(before.restart_count, 1, "{before:?}");
    operator.stop().await;
    let status = ns.status("looper").await;
    assert_eq!(
        (status.restart_count, status.attempt),
        (2, 3),
        "written before the operator stopped: {status:?}"
    );
    let failures: Vec<_> = status
        .restart_history
        .iter()
        .map(|r| (r.attempt, r.exit_code))
        .collect();
    assert_eq!(failures, [(2, Some(2)), (1, Some(1))]);
}

/// Leadership lost with the Lease still holding for a while: the reconciles stop at once, and
/// what was pending is written before the Lease expires; lost to another holder (no time
/// left), nothing more is written.
#[tokio::test]
async fn what_is_pending_is_written_when_leadership_is_lost_while_the_lease_holds() {
    for time_left in [Some(Duration::from_secs(20)), None] {
        let ns = TestNamespace::new().await;
        support::install_crds(&ns.client).await;
        let config = agent_supervisor::controller::Config {
            namespaces: vec![ns.name.clone()],
            status_interval: LONG,
            ..Default::default()
        };
        let (lose, lost) = tokio::sync::oneshot::channel::<Option<tokio::time::Instant>>();
        let leader = tokio::spawn(agent_supervisor::controller::run_leading(
            Operator::admin_client().await,
            config,
            futures::future::pending(),
            async move { lost.await.ok().flatten() },
        ));
        ns.looper().await;
        ns.crash_looper(1..=2).await;
        ns.wait_running("looper-3").await;
        let before = ns.status("looper").await;
        assert_eq!(before.restart_count, 1, "{before:?}");
        lose.send(time_left.map(|left| tokio::time::Instant::now() + left))
            .expect("the leader listens");
        // It ends though never told to stop: its controllers are gone, and act no more.
        let ended = leader.await.expect("the leader's task");
        assert_eq!(ended, agent_supervisor::controller::Ended::Lost);
        let status = ns.status("looper").await;
        let want = if time_left.is_some() { 2 } else { 1 };
        assert_eq!(
            status.restart_count, want,
            "lease left {time_left:?}: {status:?}"
        );
    }
}

#[tokio::test]
async fn a_successor_adopts_the_newest_pod_never_an_older_attempt_beside_it() {
    let (ns, operator) = with_interval(LONG).await;
    let pods = ns.record_pods().await;
    ns.looper().await;
    ns.crash_looper(1..=3).await;
    ns.wait_running("looper-4").await;
    let written = ns
        .wait_status("looper", "the first crash written", |s| s.attempt == 2)
        .await;
    assert_eq!(written.restart_count, 1, "nothing since written");
    // The operator dies with attempts 3 and 4 unwritten, and someone removes attempt 3's pod.
    operator.kill().await;
    ns.api::<Pod>()
        .delete("looper-3", &DeleteParams::default())
        .await
        .expect("delete attempt 3's pod");
    ns.wait_gone("looper-3").await;
    let _successor = Operator::start(&ns.name).await;
    let status = ns
        .wait_status("looper", "attempt 4 adopted", |s| s.attempt == 4)
        .await;
    assert_eq!(status.pod_name.as_deref(), Some("looper-4"));
    // Every restart counted: attempt 2's end read from its pod, attempt 3's from its successor.
    assert_eq!(status.restart_count, 3, "{status:?}");
    let ends: Vec<_> = status
        .restart_history
        .iter()
        .map(|r| (r.attempt, r.exit_code, r.reason))
        .collect();
    assert_eq!(
        ends[..2],
        [
            (3, None, Some(FailureReason::Unknown)),
            (2, Some(2), Some(FailureReason::Error))
        ]
    );
    // Attempt 3 was never made again, nor anything else: one live pod all along.
    let created: Vec<String> = pods
        .all()
        .into_iter()
        .filter_map(|(_, p)| p.metadata.name)
        .collect();
    assert!(
        created
            .iter()
            .all(|n| ["looper-1", "looper-2", "looper-3", "looper-4"].contains(&n.as_str())),
        "pods seen: {created:?}"
    );
    let live = ns
        .api::<Pod>()
        .list(&Default::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Pending" | "Running")
            )
        })
        .count();
    assert_eq!(live, 1);
}

#[tokio::test]
async fn a_first_pod_removed_while_its_record_waited_is_never_made_again() {
    // What an operator killed before its first write leaves when someone removes the first pod
    // meanwhile: nothing written for the agent, attempt 1 gone, attempt 2 made for its crash.
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let pods = ns.record_pods().await;
    let agent = ns.create_agent("orphan", json!({})).await;
    let mut spec = serde_json::to_value(agent.spec.template.get().spec.expect("a pod spec"))
        .expect("a pod spec serializes");
    spec["restartPolicy"] = json!("Never");
    let uid = agent.metadata.uid.clone().expect("a uid");
    let second: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": "orphan-2",
            "labels": { AGENT_LABEL: "orphan", ATTEMPT_LABEL: "2", AGENT_UID_LABEL: uid },
            "annotations": {
                TEMPLATE_HASH_ANNOTATION: manifests::template_hash(&agent),
                TRIGGER_ANNOTATION: "Failure",
            },
            "ownerReferences": [manifests::owner_reference(&agent)],
        },
        "spec": spec,
    }))
    .expect("a valid pod");
    ns.api::<Pod>()
        .create(&PostParams::default(), &second)
        .await
        .expect("create attempt 2");
    ns.wait_running("orphan-2").await;
    assert_eq!(ns.status("orphan").await.attempt, 0, "nothing written yet");

    let _operator = Operator::start(&ns.name).await;
    let status = ns
        .wait_status("orphan", "attempt 2 adopted and running", |s| {
            s.attempt == 2 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(status.pod_name.as_deref(), Some("orphan-2"));
    let made: Vec<String> = pods
        .all()
        .into_iter()
        .filter_map(|(_, p)| p.metadata.name)
        .filter(|name| name != "orphan-2")
        .collect();
    assert!(made.is_empty(), "pods made beside attempt 2: {made:?}");
}

#[tokio::test]
async fn what_is_pending_for_an_agent_goes_when_it_is_deleted() {
    let metrics = std::sync::Arc::new(agent_supervisor::controller::metrics::Metrics::default());
    let pending = metrics.status_pending.clone();
    let (ns, _operator) = crate::setup_with(|config| {
        config.status_interval = LONG;
        config.metrics = metrics;
    })
    .await;
    ns.looper().await;
    let names = ["a0", "a1", "a2"];
    for name in names {
        ns.create_agent(name, json!({ "restartPolicyRef": { "name": "immediate" } }))
            .await;
    }
    for name in names.into_iter().chain(["looper"]) {
        for attempt in 1..=2 {
            let pod = format!("{name}-{attempt}");
            ns.wait_running(&pod).await;
            ns.terminate(&pod, 1, "Error", "again").await;
        }
        ns.wait_running(&format!("{name}-3")).await;
    }
    // Each first crash was written at once; each second waits for the (long) interval.
    support::eventually(Duration::from_secs(60), "four statuses pending", || async {
        (pending.get() == 4).then_some(())
    })
    .await;
    let agents = ns.api::<Agent>();
    for name in names.into_iter().chain(["looper"]) {
        agents
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete the agent");
    }
    // Deleted Agents are never reconciled: the watch tells the operator to forget them, long
    // before any interval could.
    support::eventually(Duration::from_secs(60), "nothing pending", || async {
        (pending.get() == 0).then_some(())
    })
    .await;
}
