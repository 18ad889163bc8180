//! Gather: everything the decision needs, read from the caches (and, where a cache may lag
//! behind the operator's own writes, from the API server).

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::Context;
use super::error::{Error, is_not_found};
use super::manifests::{controlled_by, template_hash};
use crate::api::{Agent, RESET_REQUESTED_ANNOTATION, RESTART_REQUESTED_ANNOTATION, RestartPolicy};
use crate::supervise::{AgentFacts, Input, LeaseFacts, PodFacts, PolicyResolution, pod_name};

/// Builds the decision's input for `agent` at `now`.
pub async fn gather(agent: &Agent, ctx: &Context, now: jiff::Timestamp) -> Result<Input, Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let status = agent.status.clone().unwrap_or_default();
    let annotation = |key: &str| agent.annotations().get(key).cloned();

    let pod = current_pod(agent, ctx, status.attempt).await?;
    let lease = match agent.spec.heartbeat {
        Some(_) => ctx.leases.get(&ObjectRef::new(&name).within(&namespace)),
        None => None,
    };
    Ok(Input {
        now,
        agent: AgentFacts {
            name,
            uid: agent.uid().unwrap_or_default(),
            generation: agent.metadata.generation.unwrap_or_default(),
            suspend: agent.spec.suspend,
            heartbeat: agent.spec.heartbeat.clone(),
            template_hash: template_hash(agent),
            restart_requested: annotation(RESTART_REQUESTED_ANNOTATION),
            reset_requested: annotation(RESET_REQUESTED_ANNOTATION),
        },
        status,
        policy: resolve_policy(agent, ctx),
        pod: pod.as_ref().map(PodFacts::from_pod),
        lease: lease.as_deref().map(LeaseFacts::from_lease),
    })
}

/// The RestartPolicy that governs `agent`, from the cache.
pub fn resolve_policy(agent: &Agent, ctx: &Context) -> PolicyResolution {
    let namespace = agent.namespace().unwrap_or_default();
    let get = |name: &str| {
        ctx.policies
            .get(&ObjectRef::<RestartPolicy>::new(name).within(&namespace))
    };
    match &agent.spec.restart_policy_ref {
        Some(reference) => match get(&reference.name) {
            Some(policy) => PolicyResolution::Named(reference.name.clone(), policy.spec.clone()),
            None => PolicyResolution::Missing(reference.name.clone()),
        },
        None => match get("default") {
            Some(policy) => PolicyResolution::NamespaceDefault(policy.spec.clone()),
            None => PolicyResolution::BuiltIn,
        },
    }
}

/// The pod of the newest attempt this Agent controls: the next attempt's if it exists (a status
/// write was lost after it was created), else the current one's. A current pod missing from the
/// cache is looked up on the server before it is believed gone: the cache may not have seen a
/// pod the operator just created.
async fn current_pod(agent: &Agent, ctx: &Context, attempt: u32) -> Result<Option<Pod>, Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let cached = |attempt: u32| {
        ctx.pods
            .get(&ObjectRef::new(&pod_name(&name, attempt)).within(&namespace))
            .filter(|p| controlled_by(p.owner_references(), agent))
            .map(|p| (*p).clone())
    };
    if let Some(next) = cached(attempt.saturating_add(1)) {
        return Ok(Some(next));
    }
    if attempt == 0 {
        return Ok(None);
    }
    if let Some(current) = cached(attempt) {
        return Ok(Some(current));
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let pod_name = pod_name(&name, attempt);
    match pods.get(&pod_name).await {
        Ok(pod) if controlled_by(pod.owner_references(), agent) => Ok(Some(pod)),
        Ok(_) => Ok(None),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(source) => Err(Error::Read {
            what: format!("pod {pod_name}"),
            source,
        }),
    }
}
