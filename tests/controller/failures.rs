//! Steps that fail half-way: a replacement the API server refuses, a recorded kill never carried
//! out, a sidecar that outlives the agent, a policy that disappears.

use agent_supervisor::api::{Agent, FailureReason, Phase, Trigger};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::kubelet::REACT;
use crate::support::{Operator, eventually};
use crate::{fast_policy, setup};

async fn patch_agent(ns: &crate::support::TestNamespace, name: &str, patch: serde_json::Value) {
    ns.api::<Agent>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch agent");
}

fn ready_reason(status: &agent_supervisor::api::AgentStatus) -> Option<(String, String)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.reason.clone(), c.message.clone()))
}

#[tokio::test]
async fn a_rollout_the_api_server_refuses_keeps_the_running_pod_and_says_why() {
    let (ns, _operator) = setup().await;
    ns.create_policy("fast", fast_policy("1s")).await;
    ns.create_agent("refused", json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;
    ns.wait_running("refused-1").await;
    ns.wait_status("refused", "Running", |s| s.phase == Some(Phase::Running))
        .await;

    // Pod Security "baseline" now forbids host networking: a template asking for it is refused.
    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    let label =
        json!({ "metadata": { "labels": { "pod-security.kubernetes.io/enforce": "baseline" } } });
    namespaces
        .patch(&ns.name, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("label the namespace");
    patch_agent(
        &ns,
        "refused",
        json!({ "spec": { "template": { "spec": { "hostNetwork": true } } } }),
    )
    .await;

    let status = ns
        .wait_status("refused", "Ready says the replacement is refused", |s| {
            ready_reason(s).is_some_and(|(reason, _)| reason == "ReplacementRefused")
        })
        .await;
    let (_, message) = ready_reason(&status).unwrap();
    assert!(message.contains("refused-1 keeps running"), "{message}");
    assert!(message.contains("PodSecurity"), "{message}");
    let note = ns.wait_event("refused", "ReplacementRefused").await;
    assert!(note.contains("refused-2"), "{note}");
    let pods = ns.api::<Pod>();
    let pod = pods
        .get("refused-1")
        .await
        .expect("the running pod is kept");
    assert!(pod.metadata.deletion_timestamp.is_none(), "not deleted");
    assert!(pods.get_opt("refused-2").await.unwrap().is_none());
    assert_eq!(status.phase, Some(Phase::Running));
    assert_eq!(status.attempt, 1, "nothing was recorded as done");

    // A template the namespace allows: the rollout goes through, recorded as one.
    let allowed = json!({ "spec": { "template": { "spec": {
        "hostNetwork": null,
        "containers": [{ "name": "agent", "image": "example.invalid/agent:2" }],
    } } } });
    patch_agent(&ns, "refused", allowed).await;
    ns.wait_running("refused-2").await;
    let status = ns
        .wait_status("refused", "rolled out and Running", |s| {
            s.attempt == 2 && s.phase == Some(Phase::Running)
        })
        .await;
    assert_eq!(status.restart_history.len(), 1);
    assert_eq!(status.restart_history[0].trigger, Trigger::Rollout);
    assert_eq!(status.consecutive_failures, 0);
}

#[tokio::test]
async fn a_recorded_kill_that_never_happened_is_carried_out() {
    let (ns, operator) = setup().await;
    ns.create_agent("survivor", json!({})).await;
    ns.wait_running("survivor-1").await;
    ns.wait_status("survivor", "Running", |s| s.phase == Some(Phase::Running))
        .await;
    // The operator decided to give up on the agent and recorded it, then stopped before the
    // delete: the status says Stopped while the pod still runs.
    operator.kill().await;
    let stopped = json!({ "status": { "phase": "Stopped" } });
    ns.api::<Agent>()
        .patch_status("survivor", &PatchParams::default(), &Patch::Merge(&stopped))
        .await
        .expect("record the kill");
    let _operator = Operator::start(&ns.name).await;

    let pods = ns.api::<Pod>();
    eventually(REACT, "the recorded kill to be carried out", || {
        let pods = pods.clone();
        async move {
            let pod = pods.get_opt("survivor-1").await.ok()?;
            pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
                .then_some(())
        }
    })
    .await;
    let status = ns.status("survivor").await;
    assert_eq!(status.phase, Some(Phase::Stopped), "still given up");
    assert!(pods.get_opt("survivor-2").await.unwrap().is_none());
}

#[tokio::test]
async fn the_agent_container_ending_ends_the_attempt_while_a_sidecar_runs_on() {
    let (ns, _operator) = setup().await;
    ns.create_policy("fast", fast_policy("1s")).await;
    let template = json!({ "spec": { "containers": [
        { "name": "mesh-proxy", "image": "example.invalid/proxy:1" },
        { "name": "agent", "image": "example.invalid/agent:1" },
    ] } });
    ns.create_agent(
        "meshed",
        json!({ "restartPolicyRef": { "name": "fast" }, "agentContainer": "agent", "template": template }),
    )
    .await;
    ns.wait_running("meshed-1").await;
    ns.wait_status("meshed", "Running", |s| s.phase == Some(Phase::Running))
        .await;

    // The kubelet reports the agent's container ended; the proxy runs on, so the pod stays
    // Running (restartPolicy Never, a classic sidecar).
    let now = jiff::Timestamp::now().to_string();
    let patch = json!({ "status": {
        "phase": "Running",
        "containerStatuses": [
            { "name": "mesh-proxy", "image": "example.invalid/proxy:1", "imageID": "", "ready": true,
              "restartCount": 0, "state": { "running": { "startedAt": now } } },
            { "name": "agent", "image": "example.invalid/agent:1", "imageID": "", "ready": false,
              "restartCount": 0, "state": { "terminated": {
                  "exitCode": 3, "reason": "Error", "message": "agent: tool call failed",
                  "startedAt": now, "finishedAt": now } } },
        ],
    }});
    ns.api::<Pod>()
        .patch_status(
            "meshed-1",
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .expect("write pod status");

    let status = ns
        .wait_status("meshed", "the agent's exit recorded", |s| {
            s.last_failure.is_some()
        })
        .await;
    let failure = status.last_failure.unwrap();
    assert_eq!(failure.reason, FailureReason::Error);
    assert_eq!(failure.exit_code, Some(3));
    assert_eq!(failure.container.as_deref(), Some("agent"));
    assert_eq!(failure.message.as_deref(), Some("agent: tool call failed"));
    // The pod (and its proxy) is stopped, and the agent restarted.
    ns.wait_running("meshed-2").await;
    let old = ns.api::<Pod>().get_opt("meshed-1").await.unwrap();
    assert!(old.is_none_or(|p| p.metadata.deletion_timestamp.is_some()));
}

#[tokio::test]
async fn a_missing_policy_blocks_creates_only() {
    let (ns, _operator) = setup().await;
    ns.create_policy("fast", fast_policy("1s")).await;
    ns.create_agent("orphan", json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;
    ns.wait_running("orphan-1").await;
    ns.wait_status("orphan", "Running", |s| s.phase == Some(Phase::Running))
        .await;
    ns.api::<agent_supervisor::api::RestartPolicy>()
        .delete("fast", &Default::default())
        .await
        .expect("delete the policy");
    ns.wait_status("orphan", "PolicyResolved=False", |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "PolicyResolved" && c.status == "False")
    })
    .await;

    // A crash is still recorded; the restart waits for the policy.
    ns.terminate("orphan-1", 1, "Error", "boom").await;
    let status = ns
        .wait_status("orphan", "the crash recorded", |s| {
            s.last_failure.is_some() && s.phase == Some(Phase::BackingOff)
        })
        .await;
    assert_eq!(
        status.last_failure.unwrap().reason,
        FailureReason::Error,
        "recorded while the policy is missing"
    );
    let status = ns
        .wait_status("orphan", "Ready says the policy is missing", |s| {
            ready_reason(s).is_some_and(|(r, _)| r == "PolicyNotFound")
        })
        .await;
    assert_eq!(status.attempt, 1);
    assert!(ns.api::<Pod>().get_opt("orphan-2").await.unwrap().is_none());

    // The policy is back: the restart happens.
    ns.create_policy("fast", fast_policy("1s")).await;
    ns.wait_running("orphan-2").await;
    let status = ns
        .wait_status("orphan", "restarted", |s| s.restart_count == 1)
        .await;
    assert_eq!(status.restart_history[0].reason, Some(FailureReason::Error));
}

#[tokio::test]
async fn suspend_stops_the_pod_while_the_policy_is_missing() {
    let (ns, _operator) = setup().await;
    ns.create_policy("fast", fast_policy("1s")).await;
    ns.create_agent("paused", json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;
    ns.wait_running("paused-1").await;
    ns.api::<agent_supervisor::api::RestartPolicy>()
        .delete("fast", &Default::default())
        .await
        .expect("delete the policy");
    ns.wait_status("paused", "PolicyResolved=False", |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "PolicyResolved" && c.status == "False")
    })
    .await;
    patch_agent(&ns, "paused", json!({ "spec": { "suspend": true } })).await;
    ns.wait_status("paused", "Suspended", |s| s.phase == Some(Phase::Suspended))
        .await;
    let pods = ns.api::<Pod>();
    eventually(REACT, "the pod to be stopped", || {
        let pods = pods.clone();
        async move {
            let pod = pods.get_opt("paused-1").await.ok()?;
            pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
                .then_some(())
        }
    })
    .await;
}

/// Sets the namespace's quota `pods` (made if missing) to allow `pods` pods.
async fn set_pod_quota(ns: &crate::support::TestNamespace, pods: &str) {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let quotas = ns.api::<ResourceQuota>();
    let mut quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": { "name": "pods" }, "spec": { "hard": { "pods": pods } }
    }))
    .unwrap();
    match quotas.get_opt("pods").await.expect("read the quota") {
        Some(current) => {
            quota.metadata.resource_version = current.metadata.resource_version;
            quotas.replace("pods", &Default::default(), &quota).await
        }
        None => quotas.create(&Default::default(), &quota).await,
    }
    .expect("set the quota");
}

#[tokio::test]
async fn a_restart_over_quota_waits_for_room_and_retries_soon() {
    let (ns, _operator) = setup().await;
    set_pod_quota(&ns, "1").await;
    ns.create_agent("squeezed", json!({})).await;
    ns.wait_running("squeezed-1").await;
    ns.wait_status("squeezed", "Running", |s| s.phase == Some(Phase::Running))
        .await;

    // The replacement would be a second pod: over quota while the first still runs.
    patch_agent(
        &ns,
        "squeezed",
        json!({ "metadata": { "annotations": { "supervisor.dev/restart-requested-at": "1" } } }),
    )
    .await;
    let status = ns
        .wait_status("squeezed", "Ready says the replacement is refused", |s| {
            ready_reason(s).is_some_and(|(reason, _)| reason == "ReplacementRefused")
        })
        .await;
    assert!(
        ready_reason(&status).unwrap().1.contains("exceeded quota"),
        "{status:?}"
    );
    ns.wait_event("squeezed", "ReplacementRefused").await;
    let pod = ns.api::<Pod>().get("squeezed-1").await.expect("kept");
    assert!(pod.metadata.deletion_timestamp.is_none());
    assert_eq!(
        status.handled_restart_request, None,
        "not done, so not handled"
    );

    // Room is made: a quota refusal is retried within seconds, not treated as final.
    set_pod_quota(&ns, "2").await;
    ns.wait_running("squeezed-2").await;
    let status = ns
        .wait_status("squeezed", "the manual restart recorded", |s| {
            s.restart_count == 1 && s.attempt == 2
        })
        .await;
    assert_eq!(status.restart_history[0].trigger, Trigger::Manual);
    assert_eq!(status.handled_restart_request.as_deref(), Some("1"));
}

#[tokio::test]
async fn a_crash_whose_replacement_is_refused_is_recorded_and_restarted_once_allowed() {
    let (ns, _operator) = setup().await;
    set_pod_quota(&ns, "2").await;
    ns.create_policy("fast", fast_policy("1s")).await;
    ns.create_agent("crowded", json!({ "restartPolicyRef": { "name": "fast" } }))
        .await;
    ns.wait_running("crowded-1").await;
    // Someone else's pod takes the last place: the agent's next pod will be over quota.
    let filler: Pod = serde_json::from_value(json!({
        "metadata": { "name": "filler" },
        "spec": { "containers": [{ "name": "c", "image": "example.invalid/filler" }] },
    }))
    .unwrap();
    ns.api::<Pod>()
        .create(&Default::default(), &filler)
        .await
        .expect("create the filler pod");
    set_pod_quota(&ns, "1").await;
    ns.terminate("crowded-1", 3, "Error", "boom").await;

    // The crash is recorded all the same, and the status says why no restart follows.
    let status = ns
        .wait_status("crowded", "the crash recorded, the restart refused", |s| {
            s.restart_history.first().is_some_and(|r| r.attempt == 1)
                && ready_reason(s).is_some_and(|(reason, _)| reason == "ReplacementRefused")
        })
        .await;
    let (_, message) = ready_reason(&status).unwrap();
    assert!(message.contains("crowded-2"), "{message}");
    assert!(message.contains("exceeded quota"), "{message}");
    assert_eq!(status.restart_history[0].exit_code, Some(3));
    assert_eq!(status.phase, Some(Phase::BackingOff));
    assert_eq!(status.restart_count, 0, "no restart happened");
    let note = ns.wait_event("crowded", "ReplacementRefused").await;
    assert!(note.contains("exceeded quota"), "{note}");
    assert!(
        ns.api::<Pod>()
            .get_opt("crowded-2")
            .await
            .unwrap()
            .is_none()
    );

    // Room again: the restart follows within the retry's minute.
    set_pod_quota(&ns, "2").await;
    ns.wait_running("crowded-2").await;
    let status = ns
        .wait_status("crowded", "the restart recorded", |s| {
            s.restart_count == 1 && s.attempt == 2
        })
        .await;
    assert_eq!(status.restart_history[0].trigger, Trigger::Failure);
}
