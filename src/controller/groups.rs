//! AgentGroups: each change of a group, of its parent or of one of its members decides the group
//! again — gather from the caches → `decide_group` (the pure core) → write the group's status →
//! its Events. A group writes nothing but its own status: its orders to its members are entries
//! of that status, which each member's own reconcile reads and obeys.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::api::wire::Guarded;
use futures::StreamExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, instrument};

use super::error::{self, Error, GatherError, RecordError, Retries};
use super::{AgentObject, FIELD_MANAGER, RESYNC, log_outcome};
use crate::api::{AgentGroup, AgentGroupStatus, MemberKey, MemberKind};
use crate::supervise::group::{
    self, Directive, GroupFacts, GroupInput, GroupPlan, GroupSpecView, MemberFacts, MemberState,
    Membership, Related,
};

/// An AgentGroup as watched: decoded, or the reason it cannot be (reported, and skipped).
pub type GroupObject = Guarded<AgentGroup>;

/// The groups of one namespace that are not being deleted (a group being deleted no longer
/// supervises anyone).
pub fn in_namespace(groups: &Store<GroupObject>, namespace: &str) -> Vec<Arc<GroupObject>> {
    groups.state_filter(|g| {
        g.namespace().as_deref() == Some(namespace) && g.meta().deletion_timestamp.is_none()
    })
}

/// Who supervises whom among `groups` (one namespace's).
pub fn resolve(groups: &[Arc<GroupObject>]) -> Membership {
    let views: Vec<GroupSpecView<'_>> = groups
        .iter()
        .filter_map(|g| g.0.as_ref().ok())
        .map(|g| GroupSpecView {
            name: g.metadata.name.as_deref().unwrap_or_default(),
            created: g
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .unwrap_or_default(),
            members: &g.spec.members,
        })
        .collect();
    Membership::resolve(&views)
}

/// The orders of `member` (in `namespace`) from the group that supervises it, if one does.
pub fn directive(
    groups: &Store<GroupObject>,
    namespace: &str,
    member: &MemberKey,
) -> Option<Directive> {
    let list = in_namespace(groups, namespace);
    if list.is_empty() {
        return None;
    }
    let membership = resolve(&list);
    let owner = membership.owner(member)?;
    let group = find(&list, owner)?;
    Some(Directive::read(owner, group.status.as_ref(), member))
}

fn find<'a>(list: &'a [Arc<GroupObject>], name: &str) -> Option<&'a AgentGroup> {
    list.iter()
        .filter_map(|g| g.0.as_ref().ok())
        .find(|g| g.metadata.name.as_deref() == Some(name))
}

/// Which groups name which members, kept by the group watch: a change of an object reconciles
/// the groups that name it, and a change of a group reconciles what it names (and named).
#[derive(Default)]
pub struct GroupIndex(Mutex<HashMap<ObjectRef<GroupObject>, Vec<MemberKey>>>);

impl GroupIndex {
    /// Records `group`'s members (none: deleted or undecodable); returns the ones it had.
    pub fn update(&self, group: &GroupObject, members: Vec<MemberKey>) -> Vec<MemberKey> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = ObjectRef::from(group);
        let before = if members.is_empty() {
            map.remove(&key)
        } else {
            map.insert(key, members)
        };
        before.unwrap_or_default()
    }

    /// The groups in `namespace` that name `member`.
    pub fn naming(&self, namespace: &str, member: &MemberKey) -> Vec<ObjectRef<GroupObject>> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .filter(|(g, members)| {
                g.namespace.as_deref() == Some(namespace) && members.contains(member)
            })
            .map(|(g, _)| g.clone())
            .collect()
    }
}

/// What every group reconcile of one scope shares.
pub struct Context {
    pub client: Client,
    /// For an AgentGroup that cannot be decoded (a warning, which repeats).
    /// The group's decisions' Events, sent as the Agents' are.
    pub events: super::events::Sender,
    pub groups: Store<GroupObject>,
    pub agents: Store<AgentObject>,
    pub metrics: Arc<crate::controller::metrics::Metrics>,
    retries: Retries<GroupObject>,
}

impl Context {
    pub fn new(
        client: Client,
        events: super::events::Sender,
        groups: Store<GroupObject>,
        agents: Store<AgentObject>,
        metrics: Arc<crate::controller::metrics::Metrics>,
    ) -> Context {
        Context {
            events,
            client,
            groups,
            agents,
            metrics,
            retries: Retries::default(),
        }
    }
}

/// The group controller of one scope: reconciles a group on its own changes (`changes`) and on
/// `triggers` (its members', parent's and children's changes).
pub async fn controller(
    context: Context,
    changes: impl futures::Stream<Item = Result<GroupObject, watcher::Error>> + Send + 'static,
    triggers: impl futures::Stream<Item = ObjectRef<GroupObject>> + Send + 'static,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let groups = context.groups.clone();
    Controller::for_stream(changes, groups)
        .reconcile_on(triggers)
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, Arc::new(context))
        .for_each(|result| async move { log_outcome("AgentGroup", result) })
        .await;
}

async fn reconcile(object: Arc<GroupObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let group = match &object.0 {
        Ok(group) => group,
        Err(invalid) => {
            super::events::report_invalid(&ctx.events, "AgentGroup", invalid);
            return Ok(Action::await_change());
        }
    };
    if group.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let result = reconcile_group(group, &ctx).await;
    if result.is_ok() {
        ctx.retries.succeeded(&ObjectRef::from(object.as_ref()));
    }
    result
}

#[instrument(skip_all, fields(namespace = %group.namespace().unwrap_or_default(), name = %group.name_any()))]
async fn reconcile_group(group: &AgentGroup, ctx: &Context) -> Result<Action, Error> {
    let input = gather(group, ctx, jiff::Timestamp::now());
    if missing_from_cache_only(group, &input, ctx).await? {
        // Created with the group, a member may not have reached the cache yet (watches of
        // different kinds keep no order): it is not reported missing. Decide again shortly.
        return Ok(Action::requeue(std::time::Duration::from_millis(200)));
    }
    let unset = AgentGroupStatus::default();
    let before = group.status.as_ref().unwrap_or(&unset);
    let plan = group::decide_group(input);
    if !plan.events.is_empty() {
        let events: Vec<&str> = plan.events.iter().map(|e| e.reason.as_str()).collect();
        info!(
            phase = plan.status.phase.map(|p| p.as_str()),
            ?events,
            "decided"
        );
    }
    if &plan.status != before {
        record(group, &plan, ctx).await.map_err(RecordError)?;
        ctx.metrics.observe_group(before, &plan.status);
    }
    publish(group, &plan, ctx);
    Ok(Action::requeue(plan.wake.map_or(RESYNC, |w| w.min(RESYNC))))
}

/// The group's facts, from the caches.
pub fn gather(group: &AgentGroup, ctx: &Context, now: jiff::Timestamp) -> GroupInput {
    let namespace = group.namespace().unwrap_or_default();
    let name = group.name_any();
    let list = in_namespace(&ctx.groups, &namespace);
    let membership = resolve(&list);
    let members = group
        .spec
        .members
        .iter()
        .map(|m| {
            let key = m.key();
            let state = match membership.refusal(&name, &key) {
                Some(refusal) => MemberState::Refused(refusal.clone()),
                None => member_state(&key, &namespace, &list, ctx),
            };
            MemberFacts {
                key,
                significant: m.significant,
                state,
            }
        })
        .collect();
    let me = MemberKey::group(&name);
    let parent = membership
        .owner(&me)
        .and_then(|p| find(&list, p))
        .map(|p| Directive::read(&p.name_any(), p.status.as_ref(), &me));
    GroupInput {
        now,
        group: GroupFacts {
            name,
            uid: group.uid().unwrap_or_default(),
            generation: group.metadata.generation.unwrap_or_default(),
            created: group
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .unwrap_or_default(),
            spec: group.spec.clone(),
            reset_requested: group
                .annotations()
                .get(crate::api::RESET_REQUESTED_ANNOTATION)
                .cloned(),
        },
        status: group.status.clone().unwrap_or_default(),
        parent,
        members,
    }
}

fn member_state(
    key: &MemberKey,
    namespace: &str,
    groups: &[Arc<GroupObject>],
    ctx: &Context,
) -> MemberState {
    match key.kind {
        MemberKind::Agent => ctx
            .agents
            .get(&ObjectRef::new(&key.name).within(namespace))
            .and_then(|a| {
                a.0.as_ref()
                    .ok()
                    .filter(|a| a.metadata.deletion_timestamp.is_none())
                    .map(super::facts::agent_view)
            })
            .map_or(MemberState::NotFound, MemberState::Agent),
        MemberKind::AgentGroup => find(groups, &key.name)
            .map(super::facts::child_view)
            .map_or(MemberState::NotFound, MemberState::Group),
    }
}

/// Whether a member the cache does not have exists on the server. Asked only while the group
/// does not already report it missing, so a member that stays missing costs no reads.
async fn missing_from_cache_only(
    group: &AgentGroup,
    input: &GroupInput,
    ctx: &Context,
) -> Result<bool, GatherError> {
    let namespace = group.namespace().unwrap_or_default();
    let reported = |key: &MemberKey| {
        input.status.members.iter().any(|m| {
            m.kind == key.kind && m.name == key.name && m.phase.as_deref() == Some("NotFound")
        })
    };
    for member in &input.members {
        if member.state != MemberState::NotFound || reported(&member.key) {
            continue;
        }
        let name = &member.key.name;
        let found = match member.key.kind {
            MemberKind::Agent => exists::<crate::api::Agent>(ctx, &namespace, name).await,
            MemberKind::AgentGroup => exists::<AgentGroup>(ctx, &namespace, name).await,
        }
        .map_err(|source| GatherError {
            what: format!("{:?} {name}", member.key.kind),
            source,
        })?;
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether `name` exists on the server and is not being deleted.
async fn exists<K>(ctx: &Context, namespace: &str, name: &str) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let meta = Api::<K>::namespaced(ctx.client.clone(), namespace)
        .get_metadata_opt(name)
        .await?;
    Ok(meta.is_some_and(|m| m.metadata.deletion_timestamp.is_none()))
}

/// Writes the group's status by server-side apply, with only the conditions the operator owns,
/// and only if the group is still what the decision saw (a decision made on a stale cache is
/// refused and made again).
async fn record(group: &AgentGroup, plan: &GroupPlan, ctx: &Context) -> Result<(), kube::Error> {
    let api: Api<AgentGroup> =
        Api::namespaced(ctx.client.clone(), &group.namespace().unwrap_or_default());
    let name = group.name_any();
    let mut applied = serde_json::to_value(&plan.status).expect("a status serializes");
    if let Some(serde_json::Value::Array(conditions)) = applied
        .as_object_mut()
        .and_then(|f| f.get_mut("conditions"))
    {
        conditions.retain(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| group::OWNED.contains(&t))
        });
    }
    let patch = json!({
        "apiVersion": "supervisor.dev/v1alpha1",
        "kind": "AgentGroup",
        "metadata": { "name": name, "resourceVersion": group.resource_version() },
        "status": applied,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// Records the plan's Events on the group, in order, without holding up the reconcile (see
/// `events::Sender`: a repeat of a reason updates the Event it made before, its note the newest).
fn publish(group: &AgentGroup, plan: &GroupPlan, ctx: &Context) {
    let events = plan
        .events
        .iter()
        .map(|event| {
            let related = event.related.as_ref().map(|related| {
                let (api_version, kind, name) = match related {
                    Related::Pod(name) => ("v1", "Pod", name),
                    Related::Group(name) => ("supervisor.dev/v1alpha1", "AgentGroup", name),
                };
                super::events::related(api_version, kind, name, group.namespace())
            });
            super::events::kube_event(event.reason.as_str(), event.warning, &event.note, related)
        })
        .collect();
    ctx.events.send_later(group.object_ref(&()), events);
}

fn error_policy(group: Arc<GroupObject>, error: &Error, ctx: Arc<Context>) -> Action {
    let object = ObjectRef::from(group.as_ref());
    error::retry("AgentGroup", object, error, &ctx.retries, &ctx.metrics)
}

/// The members a group names, as the index keeps them.
pub fn member_keys(group: &GroupObject) -> Vec<MemberKey> {
    match &group.0 {
        Ok(g) if g.metadata.deletion_timestamp.is_none() => {
            g.spec.members.iter().map(|m| m.key()).collect()
        }
        _ => Vec::new(),
    }
}
