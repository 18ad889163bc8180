//! Taking a pod the Sandbox's controller made as an attempt of the Agent.

use k8s_openapi::api::core::v1::Pod;
use kube::api::Patch;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::super::error::{ActError, Error};
use super::super::manifests;
use crate::api::{ADOPTED_AT_ANNOTATION, Agent};
use crate::supervise::NewPod;

/// Makes `pod`, fresh from the Sandbox's controller, attempt `new`: the labels and annotations
/// an Agent's own pod of that attempt carries, and the time it was taken (a pod already running
/// gets its heartbeat grace from then, not from its start), on the pod as read (a pod changed
/// meanwhile is refused by its resourceVersion: the start fails and is tried again).
pub(super) async fn adopt(
    agent: &Agent,
    pods: &Api<Pod>,
    pod: &Pod,
    new: &NewPod,
) -> Result<(), Error> {
    let (labels, mut annotations) = manifests::attempt_metadata(agent, new);
    annotations.insert(
        ADOPTED_AT_ANNOTATION.to_string(),
        Some(jiff::Timestamp::now().to_string()),
    );
    let patch = json!({
        "metadata": {
            "resourceVersion": pod.resource_version(),
            "labels": labels,
            "annotations": annotations,
        }
    });
    let params = super::super::patch_params();
    match pods
        .patch(&pod.name_any(), &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(source) => Err(ActError::Create {
            what: format!("pod {} (adopting it)", pod.name_any()),
            source,
        }
        .into()),
    }
}
