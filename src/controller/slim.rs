//! What the caches keep of each pod: only what decisions read. At ten thousand agents the pods'
//! specs (images, commands, environments, volumes) and the kubelet's bookkeeping (IPs, image ids,
//! container ids) would be most of the operator's memory, and nothing reads them. Nor is a whole
//! `Pod` kept with its unread fields empty: its fixed size is several kibibytes (a `Container`
//! alone is two), so the cache holds `CachedPod`, decoded straight from the watch with only the
//! fields decisions read, and a reconcile turns the few pods it looks at back into `Pod`s.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::NamespaceResourceScope;
use serde::Deserialize;

/// The prefix of the labels and annotations the operator puts on its pods.
const OURS: &str = "supervisor.dev/";

/// A pod as the caches keep it: its identity, owners, times, the operator's own labels and
/// annotations, its containers' names, and its status's phase, reason, message, conditions and
/// container states — what `PodFacts`, ownership, the attempt label and the budget's look-back
/// read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedPod {
    #[serde(default, deserialize_with = "crate::api::wire::metadata")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<CachedSpec>,
    #[serde(default)]
    status: Option<CachedStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct CachedSpec {
    #[serde(default)]
    containers: Vec<Named>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct Named {
    name: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CachedStatus {
    phase: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    conditions: Option<Vec<PodCondition>>,
    container_statuses: Option<Vec<CachedContainerStatus>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CachedContainerStatus {
    name: String,
    state: Option<ContainerState>,
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    restart_count: i32,
}

impl kube::Resource for CachedPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl CachedPod {
    /// Its status's phase.
    pub fn phase(&self) -> Option<&str> {
        self.status.as_ref()?.phase.as_deref()
    }

    /// The pod as decisions read it: every field the cache keeps, the rest empty.
    pub fn to_pod(&self) -> Pod {
        Pod {
            metadata: self.metadata.clone(),
            spec: self.spec.as_ref().map(|spec| PodSpec {
                containers: spec
                    .containers
                    .iter()
                    .map(|c| Container {
                        name: c.name.clone(),
                        ..Container::default()
                    })
                    .collect(),
                ..PodSpec::default()
            }),
            status: self.status.as_ref().map(|status| PodStatus {
                phase: status.phase.clone(),
                reason: status.reason.clone(),
                message: status.message.clone(),
                conditions: status.conditions.clone(),
                container_statuses: status.container_statuses.as_ref().map(|statuses| {
                    statuses
                        .iter()
                        .map(|s| ContainerStatus {
                            name: s.name.clone(),
                            state: s.state.clone(),
                            ready: s.ready,
                            restart_count: s.restart_count,
                            ..ContainerStatus::default()
                        })
                        .collect()
                }),
                ..PodStatus::default()
            }),
        }
    }
}

/// Drops the labels and annotations that are not the operator's (and the managed fields).
pub fn pod(pod: &mut CachedPod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    for map in [&mut meta.labels, &mut meta.annotations]
        .into_iter()
        .flatten()
    {
        map.retain(|key, _| key.starts_with(OURS));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::facts::pod_facts;

    /// A pod as a kubelet reports it: a crashed agent beside a running sidecar, with everything
    /// a real pod carries that decisions do not read.
    fn full_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "researcher-3", "namespace": "agents", "uid": "u-3",
                "resourceVersion": "812", "creationTimestamp": "2026-11-22T10:00:00Z",
                "deletionTimestamp": "2026-11-22T10:05:00Z",
                "labels": {"supervisor.dev/agent": "researcher", "supervisor.dev/attempt": "3",
                           "app": "research", "team": "alpha"},
                "annotations": {"supervisor.dev/template-hash": "abc",
                                "supervisor.dev/trigger": "failure:2",
                                "supervisor.dev/handled-restart-request": "r1",
                                "prometheus.io/scrape": "true"},
                "ownerReferences": [{"apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
                                     "name": "researcher", "uid": "a-1", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]
            },
            "spec": {
                "nodeName": "node-1",
                "volumes": [{"name": "data", "emptyDir": {}}],
                "containers": [
                    {"name": "agent", "image": "ghcr.io/x/agent:1", "command": ["run"],
                     "env": [{"name": "KEY", "value": "v".repeat(2000)}]},
                    {"name": "sidecar", "image": "envoy:1"}
                ]
            },
            "status": {
                "phase": "Failed", "reason": "Evicted", "message": "node out of memory",
                "hostIP": "10.0.0.1", "podIP": "10.1.0.3", "qosClass": "BestEffort",
                "startTime": "2026-11-22T10:00:01Z",
                "conditions": [
                    {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"},
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False"}
                ],
                "containerStatuses": [
                    {"name": "agent", "image": "ghcr.io/x/agent:1", "imageID": "sha256:1",
                     "containerID": "containerd://1", "ready": false, "restartCount": 0,
                     "state": {"terminated": {"exitCode": 137, "signal": 9, "reason": "OOMKilled",
                               "message": "{\"shutdown\":\"economic\"}",
                               "startedAt": "2026-11-22T10:00:02Z",
                               "finishedAt": "2026-11-22T10:04:00Z"}}},
                    {"name": "sidecar", "image": "envoy:1", "imageID": "sha256:2",
                     "ready": true, "restartCount": 1,
                     "state": {"running": {"startedAt": "2026-11-22T10:00:02Z"}}}
                ]
            }
        }))
        .unwrap()
    }

    /// `pod` as the cache keeps it, back as a `Pod`.
    fn cached(pod: &Pod) -> Pod {
        let mut cached: CachedPod =
            serde_json::from_value(serde_json::to_value(pod).unwrap()).unwrap();
        super::pod(&mut cached);
        cached.to_pod()
    }

    #[test]
    fn a_slimmed_pod_tells_decisions_everything_the_full_one_does() {
        let full = full_pod();
        let slim = cached(&full);
        for container in [None, Some("agent"), Some("sidecar")] {
            assert_eq!(pod_facts(&slim, container), pod_facts(&full, container));
        }
        assert_eq!(
            slim.metadata.owner_references,
            full.metadata.owner_references
        );
        assert_eq!(slim.metadata.uid, full.metadata.uid);
        assert_eq!(
            slim.metadata.resource_version,
            full.metadata.resource_version
        );
        let labels = slim.metadata.labels.as_ref().unwrap();
        assert_eq!(
            labels.get("supervisor.dev/attempt").map(String::as_str),
            Some("3")
        );
        assert_eq!(
            labels.get("supervisor.dev/agent").map(String::as_str),
            Some("researcher")
        );
    }

    #[test]
    fn a_slimmed_pod_drops_what_no_decision_reads() {
        let full = full_pod();
        let slim = cached(&full);
        assert!(!slim.labels().contains_key("app"));
        assert!(!slim.annotations().contains_key("prometheus.io/scrape"));
        assert_eq!(slim.metadata.managed_fields, None);
        let spec = slim.spec.as_ref().unwrap();
        assert_eq!(spec.volumes, None);
        assert_eq!(spec.node_name, None);
        assert!(
            spec.containers
                .iter()
                .all(|c| c.image.is_none() && c.env.is_none())
        );
        let status = slim.status.as_ref().unwrap();
        assert_eq!((&status.host_ip, &status.pod_ip), (&None, &None));
        let size = |p: &Pod| serde_json::to_vec(p).unwrap().len();
        assert!(
            size(&slim) * 2 < size(&full),
            "{} bytes slimmed of {}",
            size(&slim),
            size(&full)
        );
    }

    use kube::ResourceExt;
}
