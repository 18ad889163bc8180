//! The pod as the API server returns it, the input of the `from_pod` bench.

use agent_supervisor::supervise::pod_name;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::fixtures::{AGENT, ATTEMPT, TEMPLATE_HASH, UID};

/// The pod as the API server returns it: an agent and a sidecar, both running and ready.
pub fn api_pod() -> Pod {
    let name = pod_name(AGENT, ATTEMPT);
    let running = |name: &str, image: &str, id: &str| {
        json!({
            "name": name,
            "image": image,
            "imageID": format!("{image}@sha256:{id}"),
            "containerID": format!("containerd://{id}"),
            "ready": true,
            "started": true,
            "restartCount": 0,
            "lastState": {},
            "state": { "running": { "startedAt": "2025-06-01T10:30:04Z" } }
        })
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "agents",
            "uid": "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e",
            "resourceVersion": "918273",
            "creationTimestamp": "2025-06-01T10:30:00Z",
            "labels": {
                "app.kubernetes.io/name": AGENT,
                "supervisor.dev/agent": AGENT,
                "supervisor.dev/attempt": ATTEMPT.to_string()
            },
            "annotations": {
                "supervisor.dev/template-hash": TEMPLATE_HASH,
                "kubectl.kubernetes.io/default-container": "agent"
            },
            "ownerReferences": [{
                "apiVersion": "supervisor.dev/v1alpha1",
                "kind": "Agent",
                "name": AGENT,
                "uid": UID,
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": "researcher",
            "nodeName": "worker-2",
            "containers": [
                {
                    "name": "agent",
                    "image": "ghcr.io/example/researcher:1.8.2",
                    "args": ["--model", "large", "--max-steps", "10000"],
                    "env": [
                        { "name": "AGENT_NAME", "value": AGENT },
                        { "name": "AGENT_NAMESPACE", "value": "agents" },
                        { "name": "AGENT_POD_NAME", "value": name },
                        { "name": "AGENT_RESTART_COUNT", "value": "50" },
                        { "name": "AGENT_LAST_FAILURE_REASON", "value": "OOMKilled" },
                        { "name": "AGENT_HEARTBEAT_LEASE", "value": AGENT }
                    ],
                    "resources": {
                        "requests": { "cpu": "500m", "memory": "1Gi" },
                        "limits": { "memory": "2Gi" }
                    },
                    "volumeMounts": [{ "name": "memory", "mountPath": "/var/lib/agent" }],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                },
                {
                    "name": "log-shipper",
                    "image": "fluent/fluent-bit:3.2",
                    "resources": { "requests": { "cpu": "50m", "memory": "64Mi" } }
                }
            ],
            "volumes": [{
                "name": "memory",
                "persistentVolumeClaim": { "claimName": "researcher-memory" }
            }]
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.12",
            "podIP": "10.244.2.17",
            "startTime": "2025-06-01T10:30:00Z",
            "qosClass": "Burstable",
            "conditions": [
                { "type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2025-06-01T10:30:02Z" },
                { "type": "Initialized", "status": "True", "lastTransitionTime": "2025-06-01T10:30:00Z" },
                { "type": "Ready", "status": "True", "lastTransitionTime": "2025-06-01T10:30:05Z" },
                { "type": "ContainersReady", "status": "True", "lastTransitionTime": "2025-06-01T10:30:05Z" },
                { "type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-06-01T10:30:00Z" }
            ],
            "containerStatuses": [
                running("agent", "ghcr.io/example/researcher:1.8.2", "4f1e9c0d2b7a"),
                running("log-shipper", "fluent/fluent-bit:3.2", "a0b1c2d3e4f5")
            ]
        }
    }))
    .expect("a valid pod")
}
