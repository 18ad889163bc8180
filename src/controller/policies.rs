//! RestartPolicy status: `Accepted`, how many Agents use the policy, and its outages (the
//! outage breaker's decision, `supervise::outage`). Runs on the Agent controller's caches: it
//! keeps none of its own.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use k8s_openapi::api::coordination::v1::Lease;

use super::error::{self, Error, RecordError, Retries};
use super::{AgentObject, FIELD_MANAGER, PolicyObject, log_outcome, outages, uses_policy};
use crate::api::RestartPolicyStatus;
use crate::controller::metrics::Metrics;
use crate::supervise::conditions::{self, ACCEPTED, Desired};
use crate::supervise::outage::decide_outages;

/// What the policy controller reads: the Agent controller's caches.
pub struct Caches {
    pub agents: Store<AgentObject>,
    pub pods: Store<super::slim::CachedPod>,
    pub leases: Store<Lease>,
}

/// What every policy reconcile shares.
pub struct Context {
    client: Client,
    /// For a RestartPolicy that cannot be decoded (a warning, which repeats).
    /// The outage breaker's Events, sent as the Agents' are.
    events: super::events::Sender,
    caches: Caches,
    metrics: Arc<Metrics>,
    retries: Retries<PolicyObject>,
}

impl Context {
    pub fn new(
        client: Client,
        events: super::events::Sender,
        caches: Caches,
        metrics: Arc<Metrics>,
    ) -> Context {
        Context {
            events,
            client,
            caches,
            metrics,
            retries: Retries::default(),
        }
    }
}

/// The policy status controller: reconciles a policy when it changes (`changes`) and when what
/// its users tell it may have changed (`recounts`: an Agent using it was created, deleted,
/// switched policy, failed, or moved on).
pub async fn controller(
    context: Context,
    policies: Store<PolicyObject>,
    changes: impl futures::Stream<Item = Result<PolicyObject, watcher::Error>> + Send + 'static,
    recounts: impl futures::Stream<Item = ObjectRef<PolicyObject>> + Send + 'static,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let context = Arc::new(context);
    Controller::for_stream(changes, policies)
        .reconcile_on(recounts)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move { log_outcome("RestartPolicy", result) })
        .await;
}

async fn reconcile(object: Arc<PolicyObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let result = reconcile_policy(&object, &ctx).await;
    if result.is_ok() {
        ctx.retries.succeeded(&ObjectRef::from(object.as_ref()));
    }
    result
}

async fn reconcile_policy(object: &PolicyObject, ctx: &Context) -> Result<Action, Error> {
    let policy = match &object.0 {
        Ok(policy) => policy,
        Err(invalid) => {
            super::events::report_invalid(&ctx.events, "RestartPolicy", invalid);
            return Ok(Action::await_change());
        }
    };
    let namespace = policy.namespace();
    let name = policy.name_any();
    let objects = ctx.caches.agents.state();
    let users: Vec<&crate::api::Agent> = objects
        .iter()
        .filter(|a| a.namespace() == namespace)
        .filter_map(|a| a.0.as_ref().ok())
        .filter(|a| uses_policy(a, &name))
        .collect();
    let generation = policy.metadata.generation.unwrap_or_default();
    let current = policy.status.clone().unwrap_or_default();
    let now = jiff::Timestamp::now();
    let mut status = RestartPolicyStatus {
        observed_generation: Some(generation),
        conditions: current.conditions.clone(),
        agents: u32::try_from(users.len()).unwrap_or(u32::MAX),
        outages: current.outages.clone(),
    };
    let message = format!("in use by {} Agent(s)", users.len());
    let desired = Desired {
        type_: ACCEPTED,
        status: true,
        reason: "Valid",
        message: &message,
    };
    conditions::set(&mut status.conditions, desired, generation, now);

    let plan = outages::input(policy, &users, &ctx.caches.pods, &ctx.caches.leases, now)
        .map(|input| decide_outages(&input))
        .unwrap_or_default();
    status.outages = plan.outages.clone();
    match outages::condition(policy, &status.outages) {
        Some((open, message)) => {
            conditions::set(
                &mut status.conditions,
                outages::desired(open, &message),
                generation,
                now,
            );
        }
        None => status.conditions.retain(|c| c.type_ != outages::OUTAGE),
    }
    if status != current {
        // Only the operator's own conditions are applied: others' stay theirs. The write is
        // conditional on the policy as read, so outages are never decided twice on a stale cache.
        status
            .conditions
            .retain(|c| c.type_ == ACCEPTED || c.type_ == outages::OUTAGE);
        let api: Api<crate::api::RestartPolicy> =
            Api::namespaced(ctx.client.clone(), &namespace.unwrap_or_default());
        let patch = json!({
            "apiVersion": "supervisor.dev/v1alpha1",
            "kind": "RestartPolicy",
            "metadata": { "name": name, "resourceVersion": policy.resource_version() },
            "status": status,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(RecordError)?;
    }
    outages::publish(&ctx.events, policy, &plan.events);
    ctx.metrics.observe_outages(&plan.events);
    Ok(match plan.requeue_at {
        Some(at) => {
            let wait = (at - now)
                .total(jiff::Unit::Millisecond)
                .unwrap_or(0.0)
                .max(0.0);
            Action::requeue(std::time::Duration::from_millis(wait as u64 + 50))
        }
        None => Action::await_change(),
    })
}

fn error_policy(policy: Arc<PolicyObject>, error: &Error, ctx: Arc<Context>) -> Action {
    let object = ObjectRef::from(policy.as_ref());
    error::retry("RestartPolicy", object, error, &ctx.retries, &ctx.metrics)
}
