//! RestartPolicy status: `Accepted`, and how many Agents use the policy.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::{FIELD_MANAGER, api, cached, uses_policy};
use crate::api::{Agent, RestartPolicy, RestartPolicyStatus};
use crate::supervise::conditions::{self, ACCEPTED, Desired};

struct Context {
    client: Client,
    agents: Store<Agent>,
}

pub async fn run(
    client: Client,
    scope: Option<String>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let policies = api::<RestartPolicy>(&client, &scope);
    let controller = Controller::new(policies, watcher::Config::default());
    let policy_store = controller.store();
    // The agent cache is filled by the `watches` below; it counts the users of each policy.
    let (agents, agent_stream) = cached(api::<Agent>(&client, &scope), watcher::Config::default());
    let context = Arc::new(Context { client, agents });
    controller
        .watches_stream(agent_stream, move |agent: Agent| {
            // Any change of an Agent may change the count of any policy in its namespace.
            let namespace = agent.namespace();
            policy_store
                .state()
                .iter()
                .filter(|p| p.namespace() == namespace)
                .map(|p| ObjectRef::from(p.as_ref()))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(policy: Arc<RestartPolicy>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    // Counting users on a half-filled cache would publish a wrong count.
    if futures::FutureExt::now_or_never(ctx.agents.wait_until_ready()).is_none() {
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    let namespace = policy.namespace();
    let name = policy.name_any();
    let agents = ctx
        .agents
        .state()
        .iter()
        .filter(|a| a.namespace() == namespace && uses_policy(a, &name))
        .count();
    let generation = policy.metadata.generation.unwrap_or_default();
    let current = policy.status.clone().unwrap_or_default();
    let mut status = RestartPolicyStatus {
        observed_generation: Some(generation),
        conditions: current.conditions.clone(),
        agents: u32::try_from(agents).unwrap_or(u32::MAX),
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
        let api: Api<RestartPolicy> =
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

fn error_policy(policy: Arc<RestartPolicy>, error: &kube::Error, _: Arc<Context>) -> Action {
    tracing::warn!(name = policy.name_any(), error = %error, "RestartPolicy status update failed");
    Action::requeue(Duration::from_secs(5))
}
