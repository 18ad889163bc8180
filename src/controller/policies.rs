//! RestartPolicy status: `Accepted`, and how many Agents use the policy. Runs on the Agent
//! controller's caches: it keeps none of its own.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::{AgentObject, FIELD_MANAGER, PolicyObject, log_outcome, uses_policy};
use crate::api::RestartPolicyStatus;
use crate::supervise::conditions::{self, ACCEPTED, Desired};

struct Context {
    client: Client,
    recorder: Recorder,
    agents: Store<AgentObject>,
}

/// The policy status controller: reconciles a policy when it changes (`changes`) and when the
/// number of its users may have changed (`recounts`: an Agent using it was created, deleted, or
/// switched policy). An Agent's status writes recount nothing.
pub async fn controller(
    client: Client,
    policies: Store<PolicyObject>,
    changes: impl futures::Stream<Item = Result<PolicyObject, watcher::Error>> + Send + 'static,
    recounts: impl futures::Stream<Item = ObjectRef<PolicyObject>> + Send + 'static,
    agents: Store<AgentObject>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let context = Arc::new(Context {
        recorder: Recorder::new(client.clone(), Reporter::from(FIELD_MANAGER)),
        client,
        agents,
    });
    Controller::for_stream(changes, policies)
        .reconcile_on(recounts)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move { log_outcome("RestartPolicy", result) })
        .await;
}

async fn reconcile(object: Arc<PolicyObject>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    let policy = match &object.0 {
        Ok(policy) => policy,
        Err(invalid) => {
            super::events::report_invalid(&ctx.recorder, "RestartPolicy", invalid).await;
            return Ok(Action::await_change());
        }
    };
    let namespace = policy.namespace();
    let name = policy.name_any();
    let agents = ctx
        .agents
        .state()
        .iter()
        .filter(|a| a.namespace() == namespace)
        .filter(|a| a.0.as_ref().is_ok_and(|a| uses_policy(a, &name)))
        .count();
    let generation = policy.metadata.generation.unwrap_or_default();
    let current = policy.status.clone().unwrap_or_default();
    let mut status = RestartPolicyStatus {
        observed_generation: Some(generation),
        conditions: current.conditions.clone(),
        agents: u32::try_from(agents).unwrap_or(u32::MAX),
        outages: current.outages.clone(),
    };
    let message = format!("in use by {agents} Agent(s)");
    let desired = Desired {
        type_: ACCEPTED,
        status: true,
        reason: "Valid",
        message: &message,
    };
    conditions::set(
        &mut status.conditions,
        desired,
        generation,
        jiff::Timestamp::now(),
    );
    if status != current {
        // Only the operator's own condition is applied: others' stay theirs.
        status.conditions.retain(|c| c.type_ == ACCEPTED);
        let api: Api<crate::api::RestartPolicy> =
            Api::namespaced(ctx.client.clone(), &namespace.unwrap_or_default());
        let patch = json!({
            "apiVersion": "supervisor.dev/v1alpha1",
            "kind": "RestartPolicy",
            "metadata": { "name": name },
            "status": status,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(policy: Arc<PolicyObject>, error: &kube::Error, _: Arc<Context>) -> Action {
    let conflict = matches!(error, kube::Error::Api(s) if s.code == 409);
    if conflict {
        tracing::debug!(
            name = policy.name_any(),
            "conflict on RestartPolicy status: retrying"
        );
    } else {
        tracing::warn!(name = policy.name_any(), error = %error, "RestartPolicy status update failed");
    }
    Action::requeue(std::time::Duration::from_secs(if conflict { 1 } else { 5 }))
}
