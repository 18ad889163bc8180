//! One reconcile of one Agent: gather → decide → act → record.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use tracing::{info, instrument, warn};

use super::error::{Error, is_conflict, is_not_found};
use super::{Context, RESYNC, gather, manifests, status};
use crate::api::{ATTEMPT_LABEL, Agent, AgentStatus};
use crate::supervise::{self, NewPod, Plan};

#[instrument(skip_all, fields(namespace = %agent.namespace().unwrap_or_default(), name = %agent.name_any()))]
pub async fn reconcile(agent: Arc<Agent>, ctx: Arc<Context>) -> Result<Action, Error> {
    if agent.metadata.deletion_timestamp.is_some() {
        // Its pods, Lease and claims go with it through garbage collection.
        return Ok(Action::await_change());
    }
    if !ctx.caches_synced() {
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    let started = std::time::Instant::now();
    let _timer = scopeguard(|| {
        ctx.metrics
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64())
    });
    let now = jiff::Timestamp::now();
    let input = gather::gather(&agent, &ctx, now).await?;
    let template_hash = input.agent.template_hash.clone();
    let plan = supervise::decide(input);
    let unset = AgentStatus::default();
    let before = agent.status.as_ref().unwrap_or(&unset);
    if plan.create_pod.is_some() || plan.delete_pod.is_some() || !plan.events.is_empty() {
        let events: Vec<&str> = plan.events.iter().map(|e| e.reason.as_str()).collect();
        info!(
            phase = plan.status.phase.map(|p| p.as_str()),
            create = plan.create_pod.as_ref().map(|p| p.name.as_str()),
            delete = plan.delete_pod.as_deref(),
            ?events,
            "decided"
        );
    }
    if (plan.create_pod.is_some() || plan.delete_pod.is_some()) && !is_current(&agent, &ctx).await?
    {
        // The decision was made on a cached Agent older than the server's: an action taken on
        // it could repeat one already done (a second manual restart, say). Decide again.
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    if plan.delete_pod.is_some() && plan.create_pod.is_none() {
        // A kill (hung, never started, suspended) is recorded before it happens: once the pod is
        // gone, nothing else would tell it from a pod lost with its node.
        status::record(&agent, before, &plan, &ctx).await?;
        act(&agent, &template_hash, &plan, &ctx)
            .await
            .inspect_err(|e| warn_user(&agent, e, &ctx))?;
    } else {
        // A new pod is created before it is recorded: a lost status write is repaired by
        // adopting the pod (its name is derived from the attempt), never by a second pod.
        act(&agent, &template_hash, &plan, &ctx)
            .await
            .inspect_err(|e| warn_user(&agent, e, &ctx))?;
        status::record(&agent, before, &plan, &ctx).await?;
    }
    ctx.metrics.observe(before, &plan, now);
    publish_events(&agent, &plan, &ctx).await;
    Ok(requeue(&plan, now))
}

/// Whether the cached Agent is the server's latest: checked (one read) before a pod is
/// created or deleted, the only actions a status precondition cannot undo.
async fn is_current(agent: &Agent, ctx: &Context) -> Result<bool, Error> {
    let api: Api<Agent> =
        Api::namespaced(ctx.client.clone(), &agent.namespace().unwrap_or_default());
    let name = agent.name_any();
    match api.get_metadata(&name).await {
        Ok(latest) => Ok(latest.metadata.resource_version == agent.metadata.resource_version),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(source) => Err(Error::Read {
            what: format!("Agent {name}"),
            source,
        }),
    }
}

/// Runs `f` when dropped: times a reconcile however it ends.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

fn requeue(plan: &Plan, now: jiff::Timestamp) -> Action {
    match plan.requeue_at {
        Some(at) => {
            let wait = (at - now)
                .total(jiff::Unit::Millisecond)
                .unwrap_or(0.0)
                .max(0.0);
            // Status times are whole seconds: wake just after the due second.
            Action::requeue(Duration::from_millis(wait as u64 + 50).min(RESYNC))
        }
        None => Action::requeue(RESYNC),
    }
}

/// Carries out the plan's pod actions.
async fn act(agent: &Agent, template_hash: &str, plan: &Plan, ctx: &Context) -> Result<(), Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    if let Some(name) = &plan.delete_pod {
        delete_pod(&pods, &namespace, name, ctx).await?;
    }
    if let Some(new) = &plan.create_pod {
        ensure_owned_objects(agent, ctx).await?;
        create_pod(agent, &pods, new, template_hash).await?;
        remove_old_pods(agent, &pods, new.attempt, ctx).await;
    }
    Ok(())
}

async fn delete_pod(
    pods: &Api<Pod>,
    namespace: &str,
    name: &str,
    ctx: &Context,
) -> Result<(), Error> {
    // Only the very pod that was observed: a precondition on its uid.
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
        Err(source) => Err(Error::Delete {
            pod: name.to_string(),
            source,
        }),
    }
}

async fn create_pod(agent: &Agent, pods: &Api<Pod>, new: &NewPod, hash: &str) -> Result<(), Error> {
    let pod = manifests::pod(agent, new, hash);
    match pods
        .create(
            &PostParams {
                field_manager: Some(super::FIELD_MANAGER.into()),
                ..Default::default()
            },
            &pod,
        )
        .await
    {
        Ok(_) => Ok(()),
        // The name is derived from the attempt: an existing pod is this very attempt, created
        // by an earlier try whose status write was lost — unless someone else owns the name.
        Err(e) if is_conflict(&e) => match pods.get(&new.name).await {
            Ok(existing) if manifests::controlled_by(existing.owner_references(), agent) => Ok(()),
            Ok(_) => Err(Error::NameTaken(format!("Pod {}", new.name))),
            Err(source) => Err(Error::Read {
                what: format!("pod {}", new.name),
                source,
            }),
        },
        Err(source) => Err(Error::Create {
            what: format!("pod {}", new.name),
            source,
        }),
    }
}

/// The heartbeat Lease and the claims, created when missing.
async fn ensure_owned_objects(agent: &Agent, ctx: &Context) -> Result<(), Error> {
    let namespace = agent.namespace().unwrap_or_default();
    let params = PostParams {
        field_manager: Some(super::FIELD_MANAGER.into()),
        ..Default::default()
    };
    if agent.spec.heartbeat.is_some()
        && ctx
            .leases
            .get(&ObjectRef::new(&agent.name_any()).within(&namespace))
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
async fn create_if_missing<K>(
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
            Ok(_) => Err(Error::NameTaken(what)),
            Err(source) => Err(Error::Read { what, source }),
        },
        Err(source) => Err(Error::Create { what, source }),
    }
}

/// Finished pods of attempts before the previous one: the previous is kept for `kubectl logs`.
async fn remove_old_pods(agent: &Agent, pods: &Api<Pod>, attempt: u32, ctx: &Context) {
    let namespace = agent.namespace();
    let old = ctx.pods.state_filter(|p| {
        p.namespace() == namespace
            && p.metadata.deletion_timestamp.is_none()
            && manifests::controlled_by(p.owner_references(), agent)
            && p.labels()
                .get(ATTEMPT_LABEL)
                .and_then(|a| a.parse::<u32>().ok())
                .is_some_and(|a| a + 1 < attempt)
            && matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
    });
    for pod in old {
        let name = pod.name_any();
        if let Err(e) = pods.delete(&name, &DeleteParams::default()).await
            && !is_not_found(&e)
        {
            warn!(pod = name, error = %e, "could not remove an old pod");
        }
    }
}

/// A request the API server refuses for good (an invalid pod template, a name taken by someone
/// else) will not succeed on retry: say so on the Agent, where `kubectl describe` shows it.
fn warn_user(agent: &Agent, error: &Error, ctx: &Context) {
    if !error.is_permanent() {
        return;
    }
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: error.reason().to_string(),
        note: Some(error.to_string().chars().take(1000).collect()),
        action: "Reconcile".to_string(),
        secondary: None,
    };
    let recorder = ctx.recorder.clone();
    let reference = agent.object_ref(&());
    tokio::spawn(async move {
        if let Err(e) = recorder.publish(&event, &reference).await {
            warn!(error = %e, "could not record an Event");
        }
    });
}

async fn publish_events(agent: &Agent, plan: &Plan, ctx: &Context) {
    let reference = agent.object_ref(&());
    for event in &plan.events {
        let kube_event = KubeEvent {
            type_: if event.warning() {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: event.reason.as_str().to_string(),
            note: Some(event.note.clone()),
            action: event.reason.as_str().to_string(),
            secondary: event.pod.as_ref().map(|pod| ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.clone()),
                namespace: agent.namespace(),
                ..ObjectReference::default()
            }),
        };
        if let Err(e) = ctx.recorder.publish(&kube_event, &reference).await {
            warn!(reason = event.reason.as_str(), error = %e, "could not record an Event");
        }
    }
}
