//! Objects into facts (`controller::facts`): real `Pod` and `Lease` objects read as the plain
//! facts the core decides on, then classified as the core would.

use super::*;
use agent_supervisor::controller::facts::{lease_facts, pod_facts};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn pod_from(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).expect("a valid Pod")
}

fn metadata(extra: serde_json::Value) -> serde_json::Value {
    let mut meta = json!({
        "name": "researcher-3",
        "namespace": "agents",
        "creationTimestamp": "2025-06-01T12:00:00Z",
        "labels": { "supervisor.dev/agent": "researcher", "supervisor.dev/attempt": "3" },
        "annotations": { "supervisor.dev/template-hash": "h1" }
    });
    if let (Some(meta), Some(extra)) = (meta.as_object_mut(), extra.as_object()) {
        meta.extend(extra.clone());
    }
    meta
}

fn spec() -> serde_json::Value {
    json!({
        "restartPolicy": "Never",
        "initContainers": [{ "name": "fetch-memory", "image": "example.invalid/init:1" }],
        "containers": [
            { "name": "agent", "image": "example.invalid/agent:1" },
            { "name": "sidecar", "image": "example.invalid/sidecar:1" }
        ]
    })
}

#[test]
fn from_pod_reads_an_oom_killed_pod() {
    let pod = pod_from(json!({
        "metadata": metadata(json!({})),
        "spec": spec(),
        "status": {
            "phase": "Failed",
            "conditions": [
                { "type": "Ready", "status": "False", "reason": "PodCompleted" },
                { "type": "PodScheduled", "status": "True" }
            ],
            "initContainerStatuses": [{
                "name": "fetch-memory", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": { "terminated": { "exitCode": 0, "reason": "Completed" } }
            }],
            // Statuses in another order than the spec's containers.
            "containerStatuses": [
                {
                    "name": "sidecar", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": { "terminated": {
                        "exitCode": 0, "signal": 0, "reason": "Completed",
                        "startedAt": "2025-06-01T12:00:05Z", "finishedAt": "2025-06-01T12:01:06Z"
                    } }
                },
                {
                    "name": "agent", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                    "state": { "terminated": {
                        "exitCode": 137, "reason": "OOMKilled",
                        "startedAt": "2025-06-01T12:00:05Z", "finishedAt": "2025-06-01T12:01:05Z"
                    } }
                }
            ]
        }
    }));
    let facts = pod_facts(&pod, None);
    assert_eq!(facts.name, "researcher-3");
    assert_eq!(facts.attempt, 3);
    assert_eq!(facts.template_hash.as_deref(), Some("h1"));
    assert_eq!(facts.created_at, t(0));
    assert!(!facts.deleting);
    assert_eq!(facts.phase, PodPhase::Failed);
    assert!(!facts.ready);
    assert_eq!(facts.disruption, None);
    assert_eq!(facts.unschedulable, None);
    let names: Vec<_> = facts.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["agent", "sidecar"], "app containers, in spec order");
    assert_eq!(
        facts.containers[1].state,
        ContainerPhase::Terminated(Termination {
            exit_code: 0,
            signal: None,
            reason: Some("Completed".to_string()),
            message: None,
            started_at: Some(t(5)),
            finished_at: Some(t(66)),
        }),
        "a signal of 0 is no signal"
    );
    assert!(!facts.is_live());
    assert_eq!(facts.started_at(), Some(t(5)));

    let (ending, kill) = classify_ended(&facts);
    assert_eq!(ending.reason, FailureReason::OomKilled);
    assert_eq!(ending.exit_code, Some(137));
    assert_eq!(ending.signal, None);
    assert_eq!(ending.container.as_deref(), Some("agent"));
    assert_eq!(ending.finished_at, Some(t(65)));
    assert!(!kill);
}

#[test]
fn from_pod_reads_an_economic_shutdown() {
    let pod = pod_from(json!({
        "metadata": metadata(json!({})),
        "spec": spec(),
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [{
                "name": "agent", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": { "terminated": {
                    "exitCode": 0, "reason": "Completed",
                    "message": "{\"shutdown\":\"economic\",\"reason\":\"budget exhausted\"}"
                } }
            }]
        }
    }));
    let facts = pod_facts(&pod, None);
    assert_eq!(facts.phase, PodPhase::Succeeded);
    // The sidecar has no status yet: it is waiting, for no known reason.
    assert_eq!(
        facts.containers[1].state,
        ContainerPhase::Waiting {
            reason: None,
            message: None
        }
    );
    let (ending, _) = classify_ended(&facts);
    assert_eq!(ending.reason, FailureReason::Completed);
    assert_eq!(
        ending.shutdown,
        Some(ShutdownRequest {
            kind: ShutdownType::Economic,
            reason: Some("budget exhausted".to_string()),
            message: None,
        })
    );
}

#[test]
fn from_pod_reads_an_image_pull_back_off_an_unschedulable_pod_and_a_placed_one() {
    let pulling = pod_from(json!({
        "metadata": metadata(json!({})),
        "spec": spec(),
        "status": {
            "phase": "Pending",
            "conditions": [{ "type": "PodScheduled", "status": "True" }],
            "containerStatuses": [{
                "name": "agent", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": { "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": "Back-off pulling image \"example.invalid/agent:1\""
                } }
            }]
        }
    }));
    let facts = pod_facts(&pulling, None);
    assert_eq!(facts.phase, PodPhase::Pending);
    assert!(facts.is_live());
    assert_eq!(facts.started_at(), None);
    let (ending, kill) = ended(classify(&facts, STARTUP, no_heartbeat(), t(601)));
    assert_eq!(ending.reason, FailureReason::StartupTimeout);
    assert!(kill);
    assert!(
        ending
            .message
            .as_deref()
            .is_some_and(|m| m.contains("ImagePullBackOff")),
        "{ending:?}"
    );

    let unschedulable = pod_from(json!({
        "metadata": metadata(json!({})),
        "spec": spec(),
        "status": {
            "phase": "Pending",
            "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient memory."
            }]
        }
    }));
    let facts = pod_facts(&unschedulable, None);
    assert_eq!(facts.unschedulable.as_deref(), Some("Unschedulable"));
    assert_eq!(facts.scheduled_at, None);
    let placed = pod_from(json!({
        "metadata": metadata(json!({})),
        "spec": spec(),
        "status": {
            "phase": "Pending",
            "conditions": [{
                "type": "PodScheduled", "status": "True",
                "lastTransitionTime": "2026-11-21T10:00:07Z"
            }]
        }
    }));
    let placed = pod_facts(&placed, None);
    assert_eq!(
        (placed.unschedulable, placed.scheduled_at),
        (None, Some("2026-11-21T10:00:07Z".parse().unwrap()))
    );
    let (ending, _) = ended(classify(&facts, STARTUP, no_heartbeat(), t(601)));
    assert_eq!(
        ending.message.as_deref(),
        Some("not running after 10m: Unschedulable")
    );
}

#[test]
fn from_pod_reads_disruptions_and_deletions() {
    let evicted = pod_from(json!({
        "metadata": metadata(json!({})),
        "spec": spec(),
        "status": {
            "phase": "Running",
            "conditions": [
                { "type": "Ready", "status": "True" },
                {
                    "type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting"
                }
            ],
            "containerStatuses": [{
                "name": "agent", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                "state": { "running": { "startedAt": "2025-06-01T12:00:07Z" } }
            }]
        }
    }));
    let facts = pod_facts(&evicted, None);
    assert_eq!(facts.disruption.as_deref(), Some("EvictionByEvictionAPI"));
    assert!(facts.ready);
    assert_eq!(facts.started_at(), Some(t(7)));
    let (ending, _) = classify_ended(&facts);
    assert_eq!(ending.reason, FailureReason::Evicted);
    assert_eq!(ending.started_at, Some(t(7)));

    // A DisruptionTarget condition that is not True is no disruption.
    let mut cleared = evicted.clone();
    let conditions = cleared
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .unwrap();
    conditions[1].status = "False".to_string();
    let facts = pod_facts(&cleared, None);
    assert_eq!(facts.disruption, None);
    assert!(matches!(
        classify(&facts, STARTUP, no_heartbeat(), t(100)),
        Verdict::Running { ready: true, .. }
    ));

    let preempted = pod_from(json!({
        "metadata": metadata(json!({})),
        "spec": spec(),
        "status": {
            "phase": "Failed",
            "conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"
            }]
        }
    }));
    let (ending, _) = classify_ended(&pod_facts(&preempted, None));
    assert_eq!(ending.reason, FailureReason::Preempted);

    let deleted = pod_from(json!({
        "metadata": metadata(json!({ "deletionTimestamp": "2025-06-01T12:05:00Z" })),
        "spec": spec(),
        "status": {
            "phase": "Running",
            "containerStatuses": [{
                "name": "agent", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                "state": { "running": { "startedAt": "2025-06-01T12:00:07Z" } }
            }]
        }
    }));
    let facts = pod_facts(&deleted, None);
    assert!(facts.deleting);
    assert!(!facts.is_live());
    let (ending, _) = classify_ended(&facts);
    assert_eq!(ending.reason, FailureReason::NodeLost);
}

#[test]
fn from_pod_reads_an_empty_pod_as_not_known_yet() {
    let facts = pod_facts(&Pod::default(), None);
    assert_eq!(facts.name, "");
    assert_eq!(facts.attempt, 0);
    assert_eq!(facts.template_hash, None);
    assert_eq!(facts.phase, PodPhase::Pending);
    assert!(facts.containers.is_empty());
    assert!(facts.is_live());

    let odd = pod_from(json!({
        "metadata": { "name": "x", "labels": { "supervisor.dev/attempt": "three" } },
        "status": { "phase": "Evaporated" }
    }));
    let facts = pod_facts(&odd, None);
    assert_eq!(
        facts.attempt, 0,
        "an unreadable attempt label is no attempt"
    );
    assert_eq!(facts.phase, PodPhase::Unknown);
}

#[test]
fn from_pod_reads_when_a_sandboxs_pod_was_adopted() {
    let adopted = |value: &str| {
        let pod = pod_from(json!({
            "metadata": metadata(json!({
                "annotations": { "supervisor.dev/adopted-at": value }
            })),
            "spec": spec(),
        }));
        pod_facts(&pod, None).adopted_at
    };
    assert_eq!(
        adopted("2025-06-01T12:01:40.25Z"),
        Some(t(100) + SignedDuration::from_millis(250))
    );
    assert_eq!(adopted("yesterday"), None, "an unreadable time is none");
    assert_eq!(pod_facts(&Pod::default(), None).adopted_at, None);
}

#[test]
fn lease_facts_ignore_an_empty_holder() {
    use k8s_openapi::api::coordination::v1::Lease;
    let lease: Lease = serde_json::from_value(json!({
        "metadata": { "name": "researcher" },
        "spec": { "holderIdentity": "", "renewTime": "2025-06-01T12:00:09.000000Z" }
    }))
    .unwrap();
    let facts = lease_facts(&lease);
    assert_eq!(facts.holder, None);
    assert_eq!(facts.renew_time, Some(t(9)));
    assert_eq!(lease_facts(&Lease::default()), LeaseFacts::default());
}

#[test]
fn renewals_are_measured_in_real_time() {
    // A renewal half a second before the deadline keeps the pod alive past a whole-second clock.
    let hb = heartbeat(10, Some(0));
    let renewed = t(100) + SignedDuration::from_millis(500);
    let lease = lease(Some(POD), Some(renewed));
    let verdict = classify(
        &running_pod(t(0)),
        STARTUP,
        Liveness {
            heartbeat: Some(&hb),
            lease: Some(&lease),
        },
        t(110),
    );
    assert!(
        matches!(verdict, Verdict::Running { heartbeat_deadline: Some(d), .. } if d == renewed + SignedDuration::from_secs(10)),
        "{verdict:?}"
    );
}
