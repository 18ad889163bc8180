//! The identity an agent with a heartbeat renews its Lease with, managed (`--manage-agent-rbac`):
//! a Role allowing `get`, `update` and `patch` on exactly that Lease, bound to the pod's
//! ServiceAccount — the template's `serviceAccountName`, or else one named after the Agent that
//! the operator creates. All of them are owned by the Agent and go with it; a piece someone
//! deletes is made again at the Agent's next reconcile (their watches trigger it). The author
//! writes no RBAC.
//!
//! Nothing here touches RBAC the operator did not make: a name taken by someone else's object is
//! reported, never used or changed. Should the account the pods run as change, the binding
//! follows it before the next pod is made. Two Agents sharing a template's ServiceAccount can
//! renew each other's Lease (the binding is to the account).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Patch, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};

use super::act::create_if_missing;
use super::error::{ActError, Error};
use super::manifests::{self, owned_meta};
use super::scope::api;
use super::watch::{Change, Watches};
use super::{AgentObject, Context, events};
use crate::api::Agent;

/// The verbs the agent's process needs on its own Lease, and no more: read it, renew it.
const LEASE_VERBS: [&str; 3] = ["get", "update", "patch"];

/// The caches of what the operator made, by the Agent label (present when managed).
#[derive(Clone)]
pub struct Stores {
    /// Names found taken by objects not the operator's, as (namespace, kind/name): not tried
    /// again until the Agent's next pod is made (each try costs two requests, and an Agent is
    /// reconciled on every renewal of its Lease).
    pub taken: Arc<Mutex<HashSet<(String, String)>>>,
    pub accounts: Store<ServiceAccount>,
    pub roles: Store<Role>,
    pub bindings: Store<RoleBinding>,
}

/// Whether `agent` gets a managed identity: it has a Lease its pods read and renew (a
/// heartbeat, or a Sandbox's `AGENT_*` values).
pub fn wanted(agent: &Agent) -> bool {
    super::manifests::has_lease(agent)
}

/// The ServiceAccount named by the template, if it names one.
fn templated_account(agent: &Agent) -> Option<String> {
    let spec = agent.spec.template.get().spec?;
    spec.service_account_name.filter(|name| !name.is_empty())
}

/// The ServiceAccount the agent's pods run as: the template's, or one named after the Agent;
/// for a Sandbox's, `sandbox_account` (its template's, or `default`), never one made.
pub fn account(agent: &Agent, sandbox_account: Option<&str>) -> String {
    sandbox_account
        .map(str::to_string)
        .or_else(|| templated_account(agent))
        .unwrap_or_else(|| agent.name_any())
}

/// The name of the Role and of its RoleBinding.
pub fn role_name(agent: &Agent) -> String {
    format!("{}-heartbeat", agent.name_any())
}

/// Runs `pod` as the managed ServiceAccount when the template names none.
pub fn assign_account(pod: &mut Pod, agent: &Agent) {
    if !wanted(agent) || templated_account(agent).is_some() {
        return;
    }
    if let Some(spec) = pod.spec.as_mut() {
        spec.service_account_name = Some(agent.name_any());
    }
}

/// The ServiceAccount named after the Agent (made only when the template names none).
pub fn service_account(agent: &Agent) -> ServiceAccount {
    ServiceAccount {
        metadata: owned_meta(agent, agent.name_any()),
        ..ServiceAccount::default()
    }
}

/// The Role on exactly the Agent's Lease.
pub fn role(agent: &Agent) -> Role {
    Role {
        metadata: owned_meta(agent, role_name(agent)),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            resource_names: Some(vec![super::manifests::lease_name(agent)]),
            verbs: LEASE_VERBS.iter().map(|v| v.to_string()).collect(),
            ..PolicyRule::default()
        }]),
    }
}

/// The Role bound to the pod's ServiceAccount (`account`).
pub fn role_binding(agent: &Agent, sandbox_account: Option<&str>) -> RoleBinding {
    RoleBinding {
        metadata: owned_meta(agent, role_name(agent)),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: role_name(agent),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account(agent, sandbox_account),
            namespace: agent.namespace(),
            ..Subject::default()
        }]),
    }
}

/// Makes whatever of the Agent's identity its caches do not hold: nothing when all is there.
/// A name taken by someone else's object is never used as the operator's, nor changed: a
/// ServiceAccount named after the Agent (someone made it for this agent) is bound all the same;
/// a Role is reported on the Agent and nothing is bound to it (the user may have granted the
/// agent its Lease themselves). Names found taken are tried again only when `recheck` (a pod is
/// about to be made).
pub async fn ensure(agent: &Agent, ctx: &Context, recheck: bool) -> Result<(), Error> {
    let Some(stores) = ctx.identity.as_ref().filter(|_| wanted(agent)) else {
        return Ok(());
    };
    let namespace = agent.namespace().unwrap_or_default();
    let params = super::post_params(false);
    let taken = |kind: &str, name: &str| (namespace.clone(), format!("{kind}/{name}"));
    let lock = || stores.taken.lock().unwrap_or_else(|e| e.into_inner());
    if recheck {
        let mut known = lock();
        for kind in ["ServiceAccount", "Role", "RoleBinding"] {
            let name = match kind {
                "ServiceAccount" => agent.name_any(),
                _ => role_name(agent),
            };
            known.remove(&taken(kind, &name));
        }
    }
    // Tries to make `object` unless its name is known taken; false when it is someone else's.
    async fn make<K>(
        agent: &Agent,
        api: Api<K>,
        object: &K,
        params: &PostParams,
    ) -> Result<bool, Error>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        match create_if_missing(agent, &api, object, params).await {
            Ok(()) => Ok(true),
            Err(Error::Act(ActError::NameTaken(_))) => Ok(false),
            Err(e) => Err(e),
        }
    }
    // A Sandbox's pods run as its template's account (or `default`): bound, never made.
    let sandbox_account = agent.spec.sandbox_ref.as_ref().map(|r| {
        ctx.sandboxes
            .as_ref()
            .and_then(|s| s.get(&ObjectRef::new(&r.name).within(&namespace)))
            .map_or_else(
                || "default".to_string(),
                |s| s.service_account().to_string(),
            )
    });
    let account = agent.name_any();
    if templated_account(agent).is_none()
        && sandbox_account.is_none()
        && stores
            .accounts
            .get(&ObjectRef::new(&account).within(&namespace))
            .is_none()
        && !lock().contains(&taken("ServiceAccount", &account))
    {
        let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &namespace);
        if !make(agent, api, &service_account(agent), &params).await? {
            lock().insert(taken("ServiceAccount", &account));
        }
    }
    let name = role_name(agent);
    if lock().contains(&taken("Role", &name)) {
        return Ok(());
    }
    if stores
        .roles
        .get(&ObjectRef::new(&name).within(&namespace))
        .is_none()
    {
        let api: Api<Role> = Api::namespaced(ctx.client.clone(), &namespace);
        if !make(agent, api, &role(agent), &params).await? {
            lock().insert(taken("Role", &name));
            let e = Error::Act(ActError::NameTaken(format!("Role {name}")));
            events::warn(agent, &e, ctx);
            return Ok(());
        }
    }
    let binding = role_binding(agent, sandbox_account.as_deref());
    let api: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    let cached = stores
        .bindings
        .get(&ObjectRef::new(&name).within(&namespace));
    match cached {
        None if !lock().contains(&taken("RoleBinding", &name)) => {
            let made = make(agent, api, &binding, &params).await?;
            if !made {
                lock().insert(taken("RoleBinding", &name));
                let e = Error::Act(ActError::NameTaken(format!("RoleBinding {name}")));
                events::warn(agent, &e, ctx);
            }
        }
        // The pods' account changed (the template's, or the Sandbox's): the binding follows
        // when the next pod is about to be made, never under a pod running as the old one.
        Some(found)
            if recheck
                && !same_subjects(&found, &binding)
                && manifests::controlled_by(found.owner_references(), agent) =>
        {
            rebind(&api, &binding).await?;
        }
        _ => {}
    }
    Ok(())
}

/// Whether two bindings name the same accounts (the API server may fill in what was left out).
fn same_subjects(a: &RoleBinding, b: &RoleBinding) -> bool {
    let names = |r: &RoleBinding| {
        r.subjects
            .iter()
            .flatten()
            .map(|s| (s.kind.clone(), s.name.clone(), s.namespace.clone()))
            .collect::<Vec<_>>()
    };
    names(a) == names(b)
}

/// Replaces the subjects of the operator's binding with `binding`'s.
async fn rebind(api: &Api<RoleBinding>, binding: &RoleBinding) -> Result<(), Error> {
    let name = binding.name_any();
    let patch = serde_json::json!({ "subjects": binding.subjects });
    let params = super::patch_params();
    match api.patch(&name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(source) => Err(ActError::Create {
            what: format!("RoleBinding {name} (its subject)"),
            source,
        }
        .into()),
    }
}

/// Watches what the operator made for identities in `scope` (by the Agent label); a piece
/// deleted sends its Agent to `repair`.
pub(super) fn watch(
    watches: &mut Watches,
    client: &kube::Client,
    scope: &Option<String>,
    owned: &watcher::Config,
    repair: mpsc::UnboundedSender<ObjectRef<AgentObject>>,
) -> Stores {
    let within = scope.as_deref().unwrap_or("all namespaces");
    Stores {
        taken: Arc::default(),
        accounts: watches.spawn(
            format!("ServiceAccounts in {within}"),
            api(client, scope),
            owned.clone(),
            |_| (),
            on_delete(repair.clone()),
        ),
        roles: watches.spawn(
            format!("Roles in {within}"),
            api(client, scope),
            owned.clone(),
            |_| (),
            on_delete(repair.clone()),
        ),
        bindings: watches.spawn(
            format!("RoleBindings in {within}"),
            api(client, scope),
            owned.clone(),
            |_| (),
            on_delete(repair),
        ),
    }
}

/// Once every identity cache holds a full list (at once when not managed).
pub(super) async fn ready(stores: Option<&Stores>) {
    if let Some(s) = stores {
        let _ = futures::join!(
            s.accounts.wait_until_ready(),
            s.roles.wait_until_ready(),
            s.bindings.wait_until_ready(),
        );
    }
}

/// Sends the owning Agent of each object deleted.
fn on_delete<K: Resource>(
    tx: mpsc::UnboundedSender<ObjectRef<AgentObject>>,
) -> impl FnMut(Change<K>) + Send + 'static {
    move |change| {
        let Change::Deleted(object) = change else {
            return;
        };
        let Some(namespace) = object.meta().namespace.clone() else {
            return;
        };
        for owner in object.owner_references() {
            if owner.controller == Some(true) && owner.kind == Agent::kind(&()) {
                let agent = ObjectRef::new(&owner.name).within(&namespace);
                let _ = tx.unbounded_send(agent);
            }
        }
    }
}

#[cfg(test)]
mod tests;
