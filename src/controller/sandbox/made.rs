//! Agents made for Sandboxes: a Sandbox annotated `supervisor.dev/restart-policy: NAME` gets an
//! Agent named after it, supervising it (`spec.sandboxRef`) under that RestartPolicy (the
//! namespace's default when the value is empty), owned by it so that garbage collection removes
//! it with the Sandbox. Sandboxes that other tools make (SandboxClaims, warm pools) need one
//! annotation.
//!
//! The annotation is the declaration, as a Deployment's template is for its ReplicaSet: a
//! changed value repoints the Agent, a removed one deletes it, and an Agent made this way and
//! deleted by someone is made again while the annotation stays. An Agent of that name that the
//! Sandbox does not own is someone else's: it is left alone, and that is said once.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::super::AgentObject;
use super::super::error::is_not_found;
use crate::api::Agent;
use crate::api::sandbox::{RESTART_POLICY_ANNOTATION, Sandbox};

/// How long after a failed request the Sandbox is looked at again (an API server briefly out of
/// reach, a refusal by admission): a person sees the Agent appear within this of the cause ending.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What a Sandbox needs of the Agent named after it.
#[derive(Clone, Debug, PartialEq)]
pub enum Made {
    /// Nothing: as it should be, or nothing to do with the operator.
    Nothing,
    /// Make the Agent, under this RestartPolicy (`None`: the namespace's default).
    Create { policy: Option<String> },
    /// The Agent made for it names another RestartPolicy than the annotation.
    Repoint { policy: Option<String> },
    /// The annotation is gone: delete the Agent made for it (this uid).
    Delete { uid: String },
    /// An Agent of the Sandbox's name exists that is not its own.
    Taken,
}

/// The RestartPolicy the annotation asks for: `None` when it is absent, `Some(None)` for the
/// namespace's default.
fn asked(sandbox: &Sandbox) -> Option<Option<String>> {
    let value = sandbox.annotations().get(RESTART_POLICY_ANNOTATION)?.trim();
    Some((!value.is_empty()).then(|| value.to_string()))
}

/// Whether `agent` was made for `sandbox` (owned by it, by uid).
fn made_for(agent: &AgentObject, sandbox: &Sandbox) -> bool {
    let uid = sandbox.metadata.uid.as_deref();
    agent
        .owner_references()
        .iter()
        .any(|o| o.kind == "Sandbox" && Some(o.uid.as_str()) == uid)
}

/// What `sandbox` (as cached; `None` once gone) needs of `agent`, the Agent of its name.
pub fn want(sandbox: Option<&Sandbox>, agent: Option<&AgentObject>) -> Made {
    // A Sandbox gone or going takes its Agent with it (garbage collection).
    let Some(sandbox) = sandbox.filter(|s| s.metadata.deletion_timestamp.is_none()) else {
        return Made::Nothing;
    };
    match (asked(sandbox), agent) {
        (Some(policy), None) => Made::Create { policy },
        (Some(_), Some(agent)) if !made_for(agent, sandbox) => Made::Taken,
        // Being deleted: made again once it is gone (its deletion is watched).
        (_, Some(agent)) if agent.meta().deletion_timestamp.is_some() => Made::Nothing,
        (Some(policy), Some(agent)) => match &agent.0 {
            Ok(a) if a.spec.restart_policy_ref.as_ref().map(|r| &r.name) != policy.as_ref() => {
                Made::Repoint { policy }
            }
            _ => Made::Nothing,
        },
        (None, Some(agent)) if made_for(agent, sandbox) => Made::Delete {
            uid: agent.uid().unwrap_or_default(),
        },
        (None, _) => Made::Nothing,
    }
}

/// The Sandbox that owns an Agent made for it, if it is one: its deletion is a reason to look.
pub fn owner(agent: &AgentObject) -> Option<ObjectRef<Sandbox>> {
    let namespace = agent.namespace()?;
    let owner = agent
        .owner_references()
        .iter()
        .find(|o| o.kind == "Sandbox" && o.api_version.starts_with("agents.x-k8s.io/"))?;
    Some(ObjectRef::new(&owner.name).within(&namespace))
}

/// The Agent made for `sandbox`.
fn agent_for(sandbox: &Sandbox, policy: Option<&str>) -> Result<Agent, serde_json::Error> {
    let mut owner = sandbox
        .controller_owner_ref(&())
        .expect("a Sandbox read from the API server has a name and uid");
    // Not blocking the Sandbox's deletion: that would need update on sandboxes/finalizers.
    owner.block_owner_deletion = None;
    let policy = policy.map(|name| json!({ "name": name }));
    serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
        "metadata": { "name": sandbox.name_any(), "ownerReferences": [owner] },
        "spec": { "sandboxRef": { "name": sandbox.name_any() }, "restartPolicyRef": policy },
    }))
}

/// Does what one Sandbox needs; an error is tried again after [`RETRY_AFTER`].
async fn act(client: &Client, sandbox: Option<&Sandbox>, made: Made) -> Result<(), kube::Error> {
    let Some(sandbox) = sandbox else {
        return Ok(());
    };
    let (namespace, name) = (sandbox.namespace().unwrap_or_default(), sandbox.name_any());
    let agents = Api::<Agent>::namespaced(client.clone(), &namespace);
    match made {
        Made::Nothing | Made::Taken => Ok(()),
        Made::Create { policy } => {
            let agent = agent_for(sandbox, policy.as_deref()).map_err(kube::Error::SerdeError)?;
            let params = super::super::post_params(false);
            match agents.create(&params, &agent).await {
                // Made meanwhile (the cache was behind): looked at again when it changes.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                result => result.map(|_| tracing::info!(sandbox = name, "made its Agent")),
            }
        }
        Made::Repoint { policy } => {
            let policy = policy.map(|name| json!({ "name": name }));
            let patch = json!({ "spec": { "restartPolicyRef": policy } });
            let params = super::super::patch_params();
            agents
                .patch(&name, &params, &Patch::Merge(&patch))
                .await
                .map(drop)
        }
        Made::Delete { uid } => {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match agents.delete(&name, &params).await {
                Err(e) if is_not_found(&e) => Ok(()),
                result => result.map(|_| tracing::info!(sandbox = name, "deleted its Agent")),
            }
        }
    }
}

/// Keeps the Agents made for annotated Sandboxes as their annotations say, looking at each
/// Sandbox `looks` names (its changes, an owned Agent's deletion) until `shutdown`.
pub async fn run(
    client: Client,
    sandboxes: Store<Sandbox>,
    agents: Store<AgentObject>,
    looks: mpsc::UnboundedReceiver<ObjectRef<Sandbox>>,
    shutdown: impl Future<Output = ()>,
) {
    let (again, retries) = mpsc::unbounded::<ObjectRef<Sandbox>>();
    let mut looks = futures::stream::select(looks, retries);
    let mut said = HashSet::new();
    let work = async {
        while let Some(at) = looks.next().await {
            let sandbox = sandboxes.get(&at);
            let agent_ref = ObjectRef::<AgentObject>::new(&at.name)
                .within(at.namespace.as_deref().unwrap_or_default());
            let made = want(sandbox.as_deref(), agents.get(&agent_ref).as_deref());
            if made == Made::Taken && said.insert(at.clone()) {
                tracing::warn!(
                    sandbox = at.name,
                    namespace = at.namespace,
                    "annotated {RESTART_POLICY_ANNOTATION}, but an Agent of its name that it does not own exists: left alone"
                );
            }
            if let Err(e) = act(&client, sandbox.as_deref(), made).await {
                tracing::warn!(sandbox = at.name, error = %e, "could not make its Agent as annotated: tried again");
                let again = again.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(RETRY_AFTER).await;
                    let _ = again.unbounded_send(at);
                });
            }
        }
    };
    tokio::select! {
        () = work => {}
        () = shutdown => {}
    }
}
