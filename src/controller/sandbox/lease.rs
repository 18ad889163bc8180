//! What a Sandbox's attempt gets through its Lease: the operator does not edit the Sandbox's
//! pod template, so the `AGENT_*` values an Agent's own pod has in its environment are written
//! on the Lease (named after the Sandbox, as its pods are) before the attempt's pod can start,
//! and the SDK reads them there.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Patch;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::super::error::{ActError, Error};
use super::super::{Context, manifests};
use crate::api::Agent;
use crate::api::sandbox::AGENT_ENV_ANNOTATION;
use crate::supervise::NewPod;

/// Writes attempt `new`'s values on the Agent's Lease, unless the cache shows them there.
pub async fn hand_over(agent: &Agent, new: &NewPod, ctx: &Context) -> Result<(), Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = manifests::lease_name(agent);
    let env = manifests::sandbox_env(agent, new);
    let cached = ctx.leases.get(&ObjectRef::new(&name).within(&namespace));
    if cached.is_some_and(|l| l.annotations().get(AGENT_ENV_ANNOTATION) == Some(&env)) {
        return Ok(());
    }
    let patch = json!({ "metadata": { "annotations": { AGENT_ENV_ANNOTATION: env } } });
    let params = super::super::patch_params();
    Api::<Lease>::namespaced(ctx.client.clone(), &namespace)
        .patch(&name, &params, &Patch::Merge(&patch))
        .await
        .map(drop)
        .map_err(|source| {
            ActError::Create {
                what: format!("Lease {name} (the attempt's AGENT_* values)"),
                source,
            }
            .into()
        })
}
