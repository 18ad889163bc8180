//! Gather: everything the decision needs, read from the caches (and, where a cache may lag
//! behind the operator's own writes, from the API server). Before a pod is deleted, the facts the
//! deletion rests on are read again from the server: a cache that lags must never kill a pod.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::error::{Error, GatherError, is_not_found};
use super::fresh::Freshness;
use super::manifests::{controlled_by, template_hash};
use super::{Context, PolicyObject};
use crate::api::wire::Guarded;
use crate::api::{Agent, RESET_REQUESTED_ANNOTATION, RESTART_REQUESTED_ANNOTATION, RestartPolicy};
use crate::supervise::{AgentFacts, Input, PolicyResolution, pod_name};

/// Where facts come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The caches (and the server for a current pod the cache has not seen).
    Cache,
    /// The API server: the pod and the heartbeat Lease read anew.
    Server,
}

/// Builds the decision's input for `agent` at `now`.
pub async fn gather(
    agent: &Agent,
    ctx: &Context,
    now: jiff::Timestamp,
    source: Source,
) -> Result<Input, GatherError> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let status = agent.status.clone().unwrap_or_default();
    let annotation = |key: &str| agent.annotations().get(key).cloned();

    let (pod, blocked) = match &agent.spec.sandbox_ref {
        Some(sandbox) => {
            super::sandbox::gather(agent, &sandbox.name, ctx, status.attempt, source).await?
        }
        None => (current_pod(agent, ctx, status.attempt, source).await?, None),
    };
    let agent_container = agent.spec.agent_container.as_deref();
    let pod = pod
        .as_ref()
        .map(|p| super::facts::pod_facts(p, agent_container));
    // A pod newer than the status knows: the one before it says how that attempt ended. (A
    // Sandbox has one pod at a time: the one before is gone.)
    let previous = pod
        .as_ref()
        .filter(|p| status.attempt > 0 && p.attempt > status.attempt)
        .filter(|_| agent.spec.sandbox_ref.is_none())
        .and_then(|_| last_known(agent, ctx, status.attempt))
        .map(|p| super::facts::pod_facts(&p, agent_container));
    let lease_name = super::manifests::lease_name(agent);
    let lease = match (super::manifests::has_lease(agent), source) {
        (false, _) => None,
        (true, Source::Cache) => ctx
            .leases
            .get(&ObjectRef::new(&lease_name).within(&namespace))
            .map(|l| (*l).clone()),
        (true, Source::Server) => {
            read(
                &Api::<Lease>::namespaced(ctx.client.clone(), &namespace),
                &lease_name,
            )
            .await?
        }
    };
    let lease = lease.map(|l| super::facts::agent_lease_facts(agent, &l, pod.as_ref()));
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
            blocked,
            sandbox: agent.spec.sandbox_ref.as_ref().map(|r| r.name.clone()),
        },
        status,
        policy: resolve_policy_confirmed(agent, ctx).await?,
        pod,
        previous,
        lease,
        group: super::groups::directive(
            &ctx.groups,
            &namespace,
            &crate::api::MemberKey::agent(&agent.name_any()),
        ),
        outages: outages(agent, ctx),
    })
}

/// The open outages of the policy `agent` uses, as the cache has its status.
fn outages(agent: &Agent, ctx: &Context) -> Vec<crate::api::Outage> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = super::routes::policy_name(agent);
    ctx.policies
        .get(&ObjectRef::new(&name).within(&namespace))
        .and_then(|p| p.0.as_ref().ok().and_then(|p| p.status.clone()))
        .map(|s| s.outages)
        .unwrap_or_default()
}

/// The object `name`, if it exists.
pub(super) async fn read<K>(api: &Api<K>, name: &str) -> Result<Option<K>, GatherError>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(|source| GatherError {
        what: format!("{} {name}", K::kind(&())),
        source,
    })
}

/// The Agent as the API server has it now; `None` once it is gone.
pub async fn latest(agent: &Agent, ctx: &Context) -> Result<Option<Agent>, GatherError> {
    let api: Api<Agent> =
        Api::namespaced(ctx.client.clone(), &agent.namespace().unwrap_or_default());
    read(&api, &agent.name_any()).await
}

/// The RestartPolicy that governs `agent`. A named policy missing from the cache is looked up on
/// the server before it is believed missing: created just before the Agent, it may not have
/// reached the cache yet (watches of different kinds keep no order between them).
async fn resolve_policy_confirmed(
    agent: &Agent,
    ctx: &Context,
) -> Result<PolicyResolution, GatherError> {
    let resolution = resolve_policy(agent, ctx);
    let PolicyResolution::Missing(name) = &resolution else {
        return Ok(resolution);
    };
    let api: Api<PolicyObject> =
        Api::namespaced(ctx.client.clone(), &agent.namespace().unwrap_or_default());
    Ok(match read(&api, name).await? {
        Some(Guarded(Ok(policy))) => PolicyResolution::Named(name.clone(), policy.spec),
        _ => resolution,
    })
}

/// The RestartPolicy that governs `agent`, from the cache. A policy that cannot be decoded
/// counts as missing (it is reported on the policy itself).
pub fn resolve_policy(agent: &Agent, ctx: &Context) -> PolicyResolution {
    let namespace = agent.namespace().unwrap_or_default();
    let get = |name: &str| {
        ctx.policies
            .get(&ObjectRef::new(name).within(&namespace))
            .and_then(|p| p.0.as_ref().ok().map(|p: &RestartPolicy| p.spec.clone()))
    };
    match &agent.spec.restart_policy_ref {
        Some(reference) => match get(&reference.name) {
            Some(spec) => PolicyResolution::Named(reference.name.clone(), spec),
            None => PolicyResolution::Missing(reference.name.clone()),
        },
        None => match get("default") {
            Some(spec) => PolicyResolution::NamespaceDefault(spec),
            None => PolicyResolution::BuiltIn,
        },
    }
}

/// The pod of `attempt`, as the cache has it or as its deletion left it.
fn last_known(agent: &Agent, ctx: &Context, attempt: u32) -> Option<Pod> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = pod_name(&agent.name_any(), attempt);
    ctx.pods
        .get(&ObjectRef::new(&name).within(&namespace))
        .or_else(|| ctx.gone.get(&name, &namespace))
        .map(|p| p.to_pod())
        .filter(|p| controlled_by(p.owner_references(), agent))
}

/// How far past the attempt the status records a successor looks for newer pods: past the most a
/// pending status holds (`writer::MAX_UNRECORDED`), with room to spare.
const REBUILT: u32 = 4 * super::writer::MAX_UNRECORDED;

/// The pod of the newest attempt this Agent controls: the next attempt's if it exists (a status
/// write was lost, or waited, after it was created: each is adopted in turn), else the newest
/// later one's, else the current one's. A current pod missing from the cache is looked up on the
/// server before it is believed gone: the cache may not have seen a pod the operator just
/// created.
async fn current_pod(
    agent: &Agent,
    ctx: &Context,
    attempt: u32,
    source: Source,
) -> Result<Option<Pod>, GatherError> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let ours = |p: Option<Pod>| p.filter(|p| controlled_by(p.owner_references(), agent));
    let cached = |attempt: u32| {
        ours(
            ctx.pods
                .get(&ObjectRef::new(&pod_name(&name, attempt)).within(&namespace))
                .map(|p| p.to_pod()),
        )
    };
    let next = match source {
        Source::Cache => cached(attempt.saturating_add(1)),
        Source::Server => ours(read(&pods, &pod_name(&name, attempt.saturating_add(1))).await?),
    };
    if next.is_some() {
        return Ok(next);
    }
    // Newest first: a newer attempt whose predecessors' pods are gone (removed by someone else
    // while the status that records them waited, see `writer`) is adopted, never an older
    // attempt made again beside it.
    let newest = (attempt.saturating_add(2)..=attempt.saturating_add(REBUILT))
        .rev()
        .find_map(cached);
    if newest.is_some() || attempt == 0 {
        return Ok(newest);
    }
    if source == Source::Cache
        && let Some(current) = cached(attempt)
    {
        return Ok(Some(current));
    }
    let current = ours(read(&pods, &pod_name(&name, attempt)).await?);
    if current.is_some() {
        return Ok(current);
    }
    // Gone from the server: its last known state (evicted, say) is still the best account of
    // how it ended — from the cache if it has not caught up, else from its deletion event.
    let last_known = |attempt: u32| {
        let name = pod_name(&name, attempt);
        let cached = match source {
            Source::Server => cached(attempt),
            Source::Cache => None,
        };
        cached.or_else(|| ours(ctx.gone.get(&name, &namespace).map(|p| p.to_pod())))
    };
    let gone = last_known(attempt.saturating_add(1)).or_else(|| last_known(attempt));
    Ok(gone.map(|mut pod| {
        pod.metadata.deletion_timestamp.get_or_insert_with(|| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now())
        });
        pod
    }))
}

/// Whether the cached Agent holds the operator's own writes: checked before a pod is created,
/// an action a status precondition cannot undo. Known without asking, but for a write the cache
/// has not shown for a while: then the server is asked (one read).
pub async fn is_current(agent: &Agent, ctx: &Context) -> Result<bool, Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let name = agent.name_any();
    let cached = agent.resource_version().unwrap_or_default();
    match ctx.own_writes.freshness(&namespace, &name, &cached) {
        Freshness::Current => return Ok(true),
        Freshness::Behind => return Ok(false),
        Freshness::Unsure => {}
    }
    let api: Api<Agent> = Api::namespaced(ctx.client.clone(), &namespace);
    match api.get_metadata(&name).await {
        Ok(latest) => {
            let current = latest.metadata.resource_version.as_deref() == Some(cached.as_str());
            if current {
                // The write never changed the Agent: nothing to wait for.
                ctx.own_writes.forget(&namespace, &name);
            }
            Ok(current)
        }
        Err(e) if is_not_found(&e) => Ok(false),
        Err(source) => Err(GatherError {
            what: format!("Agent {name}"),
            source,
        }
        .into()),
    }
}
