//! Act: the requests a decision makes of the API server — its pods created, validated and
//! deleted, the Lease and claims it owns created when missing, the attempts of long ago removed.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use tracing::warn;

use super::error::{ActError, Error, is_conflict, is_not_found};
use super::slim::CachedPod;
use super::{Context, identity, manifests};
use crate::api::{AGENT_UID_LABEL, ATTEMPT_LABEL, Agent};
use crate::supervise::NewPod;

pub(super) async fn delete_pod(pods: &Api<Pod>, name: &str, ctx: &Context) -> Result<(), Error> {
    // Only the very pod that was observed: a precondition on its uid.
    let namespace = pods.namespace().unwrap_or_default();
    let uid = ctx
        .pods
        .get(&ObjectRef::new(name).within(namespace))
        .and_then(|p| p.uid());
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
        Err(source) => Err(ActError::Delete {
            pod: name.to_string(),
            source,
        }
        .into()),
    }
}

pub(super) async fn create_pod(
    agent: &Agent,
    pods: &Api<Pod>,
    new: &NewPod,
    ctx: &Context,
) -> Result<(), Error> {
    let pod = pod(agent, new, ctx);
    match pods.create(&super::post_params(false), &pod).await {
        Ok(_) => Ok(()),
        // The name is derived from the attempt: an existing pod is this very attempt, created
        // by an earlier try whose status write was lost — unless someone else owns the name.
        Err(e) if is_conflict(&e) => match pods.get(&new.name).await {
            Ok(existing) if manifests::controlled_by(existing.owner_references(), agent) => Ok(()),
            Ok(_) => Err(ActError::NameTaken(format!("Pod {}", new.name)).into()),
            Err(source) => Err(ActError::Read {
                what: format!("pod {}", new.name),
                source,
            }
            .into()),
        },
        Err(source) => Err(ActError::Create {
            what: format!("pod {}", new.name),
            source,
        }
        .into()),
    }
}

/// Asks the API server whether it would create `new` (admission, Pod Security, quota, schema),
/// without creating it.
pub(super) async fn dry_run(
    agent: &Agent,
    pods: &Api<Pod>,
    new: &NewPod,
    ctx: &Context,
) -> Result<(), Error> {
    let pod = pod(agent, new, ctx);
    match pods.create(&super::post_params(true), &pod).await {
        // Exists already: it was created, and the decision that follows adopts it.
        Err(e) if is_conflict(&e) => Ok(()),
        Err(source) => Err(ActError::Refused {
            pod: new.name.clone(),
            source,
        }
        .into()),
        Ok(_) => Ok(()),
    }
}

/// The attempt's pod, run as the Agent's managed ServiceAccount when there is one.
fn pod(agent: &Agent, new: &NewPod, ctx: &Context) -> Pod {
    let mut pod = manifests::pod(agent, new, &manifests::template_hash(agent));
    if ctx.identity.is_some() {
        identity::assign_account(&mut pod, agent);
    }
    pod
}

/// The heartbeat Lease, the identity that renews it (when managed) and the claims, created when
/// missing.
pub(super) async fn ensure_owned_objects(agent: &Agent, ctx: &Context) -> Result<(), Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let params = super::post_params(false);
    identity::ensure(agent, ctx, true).await?;
    if manifests::has_lease(agent)
        && ctx
            .leases
            .get(&ObjectRef::new(&manifests::lease_name(agent)).within(&namespace))
            .is_none()
    {
        let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &namespace);
        create_if_missing(agent, &leases, &manifests::lease(agent), &params).await?;
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    for claim in manifests::claims(agent) {
        let name = claim.name_any();
        if ctx
            .claims
            .get(&ObjectRef::new(&name).within(&namespace))
            .is_none()
        {
            create_if_missing(agent, &claims, &claim, &params).await?;
        }
    }
    Ok(())
}

/// Creates `object` unless it exists. An existing one must be the Agent's own: a name taken by
/// something else (another Agent's claim, a hand-made Lease) is reported, never used.
pub(super) async fn create_if_missing<K>(
    agent: &Agent,
    api: &Api<K>,
    object: &K,
    params: &PostParams,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let what = format!("{} {}", K::kind(&()), object.name_any());
    match api.create(params, object).await {
        Ok(_) => Ok(()),
        Err(e) if is_conflict(&e) => match api.get(&object.name_any()).await {
            Ok(existing) if manifests::controlled_by(existing.owner_references(), agent) => Ok(()),
            Ok(_) => Err(ActError::NameTaken(what).into()),
            Err(source) => Err(ActError::Read { what, source }.into()),
        },
        Err(source) => Err(ActError::Create { what, source }.into()),
    }
}

/// Old pods are let pile up to this many before they are removed together, in one request: with
/// the attempts not yet recorded (`writer::MAX_UNRECORDED`, whose pods a successor needs), an
/// Agent keeps at most 8 finished pods (4 + 4). Fewer costs a request more often (a storm's
/// prunes were 0.29 requests a restart at 3); more keeps more pods.
pub(super) const BATCH: usize = 5;

/// Finished pods of attempts before `attempt - 1` (the one before is kept for `kubectl logs`),
/// removed a few at a time, in one request and without holding up the reconcile.
pub(super) fn remove_old_pods(agent: &Agent, pods: &Api<Pod>, attempt: u32, ctx: &Context) {
    let namespace = agent.namespace().unwrap_or_default();
    let Some(uid) = agent.metadata.uid.as_deref() else {
        return;
    };
    let old = old_pods(&namespace, uid, attempt, ctx);
    if old.len() < BATCH {
        return;
    }
    let (pods, selector) = (pods.clone(), selector(uid, &old));
    tokio::spawn(async move { prune(&pods, &selector).await });
}

/// The finished attempts of the Agent `uid` before `attempt - 1`: proposed by the index of
/// finished pods, confirmed by the cache (only pods the Agent controls and that carry its uid,
/// made since the label was, can be selected by it).
fn old_pods(namespace: &str, uid: &str, attempt: u32, ctx: &Context) -> Vec<u32> {
    let old_enough = |p: &CachedPod, a: u32| {
        p.metadata.deletion_timestamp.is_none()
            && manifests::controlled_by_uid(p.owner_references(), uid)
            && p.labels().get(AGENT_UID_LABEL).map(String::as_str) == Some(uid)
            && p.labels().get(ATTEMPT_LABEL).and_then(|l| l.parse().ok()) == Some(a)
            && matches!(p.phase(), Some("Succeeded" | "Failed"))
    };
    let mut old = Vec::new();
    for (a, pod) in ctx
        .finished
        .before(namespace, uid, attempt.saturating_sub(1))
    {
        match ctx.pods.get(&ObjectRef::new(&pod).within(namespace)) {
            Some(p) => {
                if old_enough(&p, a) {
                    old.push(a);
                }
            }
            None => ctx.finished.forget(namespace, uid, a),
        }
    }
    old
}

/// The uid, not the name: a pod of someone else's that copies the agent's labels is never
/// selected; nor, whatever its labels, a pod still pending or running (`prune`).
fn selector(uid: &str, attempts: &[u32]) -> String {
    let attempts: Vec<String> = attempts.iter().map(u32::to_string).collect();
    format!(
        "{AGENT_UID_LABEL}={uid},{ATTEMPT_LABEL} in ({})",
        attempts.join(",")
    )
}

/// Deletes the finished pods `selector` selects, in one request.
async fn prune(pods: &Api<Pod>, selector: &str) {
    let params = kube::api::ListParams::default()
        .labels(selector)
        .fields("status.phase!=Pending,status.phase!=Running");
    if let Err(e) = pods
        .delete_collection(&DeleteParams::default(), &params)
        .await
    {
        warn!(%selector, error = %e, "could not remove old pods");
    }
}
