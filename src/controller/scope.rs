//! One scope's controllers (a namespace, or the whole cluster): its watches, the routing of
//! their changes, and the Agent, RestartPolicy and AgentGroup controllers fed by them.

use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};

use super::gone::GonePods;
use super::groups::{self, GroupIndex, GroupObject};
use super::slim::{self, CachedPod};
use super::watch::{Change, Watches};
use super::{
    AgentObject, Config, Context, Error, PolicyObject, budget, error, events, finished, fresh,
    identity, log_outcome, policies, reconcile, routes, upkeep, uses_policy, writer,
};
use crate::api::AGENT_LABEL;

pub(crate) fn api<K>(client: &Client, scope: &Option<String>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match scope {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A stream of the changes `on_change` forwards, and the sender it forwards them with.
fn channel<T>() -> (
    mpsc::UnboundedSender<T>,
    impl futures::Stream<Item = Result<T, watcher::Error>> + Send + 'static,
)
where
    T: Send + 'static,
{
    let (tx, rx) = mpsc::unbounded();
    (tx, rx.map(Ok))
}

/// What every scope of the process shares.
#[derive(Clone)]
pub(super) struct Shared {
    pub budget: Arc<budget::Budget>,
    /// One bound on the Events waiting.
    pub events: events::Sender,
}

pub(super) async fn run_scope(
    client: Client,
    scope: Option<String>,
    config: &Config,
    shared: Shared,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
    lost: impl Future<Output = Option<tokio::time::Instant>> + Clone + Send + 'static,
) -> super::Ended {
    let Shared { budget, events } = shared;
    let within = scope.as_deref().unwrap_or("all namespaces");
    let mut watches = Watches::new(config.health.clone(), config.faults);
    let owned = watcher::Config::default().labels(AGENT_LABEL);

    // Groups: each change reconciles the group, what it names (and named), and the groups that
    // name it. The index of who names whom is shared with the Agent watch.
    let index = Arc::new(GroupIndex::default());
    let (group_tx, group_changes) = channel::<GroupObject>();
    let (group_trigger_tx, group_triggers) = mpsc::unbounded::<ObjectRef<GroupObject>>();
    let (agent_trigger_tx, agent_triggers) = mpsc::unbounded::<ObjectRef<AgentObject>>();
    let groups = watches.spawn(
        format!("AgentGroups in {within}"),
        api::<GroupObject>(&client, &scope),
        watcher::Config::default(),
        |_| (),
        {
            let routes = routes::GroupRoutes::new(index.clone());
            let group_trigger_tx = group_trigger_tx.clone();
            let agent_trigger_tx = agent_trigger_tx.clone();
            move |change| {
                let (group, triggers) = routes.route(change);
                for agent in triggers.agents {
                    let _ = agent_trigger_tx.unbounded_send(agent);
                }
                for group in triggers.groups {
                    let _ = group_trigger_tx.unbounded_send(group);
                }
                let _ = group_tx.unbounded_send(group);
            }
        },
    );

    // Agents: each change reconciles the Agent and the groups that name it; a change of which
    // policy it uses (or its creation or deletion) recounts those policies' users.
    let (agent_tx, agent_changes) = channel::<AgentObject>();
    let (recount_tx, recounts) = mpsc::unbounded::<ObjectRef<PolicyObject>>();
    let (deleted_tx, deleted) = mpsc::unbounded::<ObjectRef<AgentObject>>();
    let (looks_tx, looks) = mpsc::unbounded();
    let sandbox_looks_tx = looks_tx.clone();
    let mut routes = routes::AgentRoutes::new(index);
    let agents = watches.spawn(
        format!("Agents in {within}"),
        api::<AgentObject>(&client, &scope),
        // Listed as the server has them now, never from a cache behind it: what this process
        // acts on must hold every write made before it started (see `fresh`).
        watcher::Config::default().list_semantic(watcher::ListSemantic::MostRecent),
        |_| (),
        move |change| {
            let gone = matches!(change, Change::Deleted(_));
            let (agent, triggers) = routes.route(change);
            if gone {
                let _ = deleted_tx.unbounded_send(ObjectRef::from(&agent));
                // An Agent made for a Sandbox is made again while the Sandbox asks for it.
                if let Some(sandbox) = super::sandbox::made::owner(&agent) {
                    let _ = looks_tx.unbounded_send(sandbox);
                }
            }
            for policy in triggers.policies {
                let _ = recount_tx.unbounded_send(policy);
            }
            for group in triggers.groups {
                let _ = group_trigger_tx.unbounded_send(group);
            }
            let _ = agent_tx.unbounded_send(agent);
        },
    );
    // Policies: each change refreshes the policy's status; a change of its spec (or its
    // creation or deletion) reconciles the Agents using it. Status writes reconcile nothing.
    let (policy_tx, policy_changes) = channel::<PolicyObject>();
    let (policy_spec_tx, policy_specs) = channel::<PolicyObject>();
    let mut routes = routes::PolicyRoutes::default();
    let policies = watches.spawn(
        format!("RestartPolicies in {within}"),
        api::<PolicyObject>(&client, &scope),
        watcher::Config::default(),
        |_| (),
        move |change| {
            let (policy, its_agents) = routes.route(change);
            if its_agents {
                let _ = policy_spec_tx.unbounded_send(policy.clone());
            }
            let _ = policy_tx.unbounded_send(policy);
        },
    );
    let (pod_tx, pod_changes) = channel::<CachedPod>();
    let gone = Arc::new(GonePods::default());
    let finished = Arc::new(finished::FinishedPods::default());
    let mut forward_pod = forward(pod_tx);
    let sandbox_pod_tx = agent_trigger_tx.clone();
    let pods = watches.spawn(
        format!("Pods in {within}"),
        api::<CachedPod>(&client, &scope),
        owned.clone(),
        slim::pod,
        {
            let gone = gone.clone();
            let finished = finished.clone();
            move |change| {
                match &change {
                    Change::Applied(pod) => finished.saw(pod),
                    Change::Deleted(pod) => {
                        finished.gone(pod);
                        gone.keep(pod.clone());
                    }
                }
                // A Sandbox's pod is owned by the Sandbox: routed by its agent label.
                let (Change::Applied(pod) | Change::Deleted(pod)) = &change;
                if let Some(agent) = super::sandbox::agent_of(pod) {
                    let _ = sandbox_pod_tx.unbounded_send(agent);
                }
                forward_pod(change)
            }
        },
    );
    let (lease_tx, lease_changes) = channel::<Lease>();
    let reports = Arc::new(super::reports::Reports::default());
    let leases = watches.spawn(
        format!("Leases in {within}"),
        api::<Lease>(&client, &scope),
        owned.clone(),
        |_| (),
        reports.clone().noting(forward(lease_tx)),
    );
    let (claim_tx, claim_changes) = channel::<PersistentVolumeClaim>();
    let claims = watches.spawn(
        format!("PersistentVolumeClaims in {within}"),
        api::<PersistentVolumeClaim>(&client, &scope),
        owned.clone(),
        |_| (),
        forward(claim_tx),
    );
    // The agents' identities, when managed: a piece deleted reconciles its Agent, which makes it
    // again.
    let (identity_tx, identity_changes) = mpsc::unbounded::<ObjectRef<AgentObject>>();
    let identity = config
        .manage_agent_rbac
        .then(|| identity::watch(&mut watches, &client, &scope, &owned, identity_tx.clone()));
    drop(identity_tx);
    let sandboxes = super::sandbox::watch(
        &mut watches,
        &client,
        &scope,
        config.sandboxes,
        agents.clone(),
        agent_trigger_tx.clone(),
        sandbox_looks_tx,
    )
    .await;

    // Workers start once every cache holds a full list: a decision on a half-filled cache would
    // see a renewed Lease as missing, or the namespace's default policy as absent.
    let synced = async {
        let _ = futures::join!(
            agents.wait_until_ready(),
            policies.wait_until_ready(),
            groups.wait_until_ready(),
            pods.wait_until_ready(),
            leases.wait_until_ready(),
            claims.wait_until_ready(),
            identity::ready(identity.as_ref()),
            async {
                if let Some(s) = &sandboxes {
                    let _ = s.wait_until_ready().await;
                }
            },
        );
    };
    tokio::select! {
        () = synced => tracing::info!(scope = within, "caches synced: starting workers"),
        () = shutdown.clone() => return super::Ended::Stopped,
        _ = lost.clone() => return super::Ended::Lost,
    }

    let (pod_store, lease_store) = (pods.clone(), leases.clone());
    // Restarts its predecessor just made use up the budget as they did; the agents the budget
    // lets go are reconciled at once.
    budget.seed(budget::recent_restarts(&pods, config.budget));
    let (granted_tx, granted) = mpsc::unbounded::<ObjectRef<AgentObject>>();
    budget.register(scope.clone(), granted_tx);
    config.metrics.watch_policies(policies.clone());
    config.status.watch_policies(policies.clone());
    config.status.watch_groups(groups.clone());
    let context = Arc::new(Context {
        client: client.clone(),
        events: events.clone(),
        pods,
        leases,
        claims,
        identity,
        policies: policies.clone(),
        groups: groups.clone(),
        sandboxes,
        metrics: config.metrics.clone(),
        budget,
        retries: error::Retries::default(),
        gone,
        own_writes: fresh::OwnWrites::default(),
        finished,
        reports,
        writer: writer::Writer::new(
            config.status_interval,
            config.metrics.status_pending.clone(),
        )
        .timed_by(config.round_trips.clone()),
        terminating: Default::default(),
    });
    config.metrics.watch_agents(agents.clone());
    config.status.watch_agents(agents.clone());
    let agent_store = agents.clone();
    let making = {
        let (client, sandboxes, agents) =
            (client.clone(), context.sandboxes.clone(), agents.clone());
        let shutdown = shutdown.clone();
        async move {
            if let Some(sandboxes) = sandboxes {
                super::sandbox::made::run(client, sandboxes, agents, looks, shutdown).await;
            }
        }
    };
    let sweeping = upkeep::writer_sweep(context.clone(), shutdown.clone());
    let forgetting = upkeep::forget_deleted(context.clone(), deleted, shutdown.clone());
    let agent_controller = Controller::for_stream(agent_changes, agents.clone())
        .owns_stream(pod_changes)
        .owns_stream(lease_changes)
        .owns_stream(claim_changes)
        .watches_stream(policy_specs, move |policy: PolicyObject| {
            agents_using(&agent_store, &policy)
        })
        .reconcile_on(futures::stream::select(
            futures::stream::select(agent_triggers, granted),
            identity_changes,
        ))
        .with_config(controller::Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile::reconcile, error_policy, context.clone())
        .for_each(|result| async move { log_outcome("Agent", result) });
    let policy_controller = policies::controller(
        policies::Context::new(
            client.clone(),
            events.clone(),
            policies::Caches {
                agents: agents.clone(),
                pods: pod_store,
                leases: lease_store,
            },
            config.metrics.clone(),
        ),
        policies,
        policy_changes,
        recounts,
        shutdown.clone(),
    );
    let group_controller = groups::controller(
        groups::Context::new(
            client.clone(),
            events,
            groups,
            agents,
            config.metrics.clone(),
        ),
        group_changes,
        group_triggers,
        config.concurrency,
        shutdown,
    );
    let controllers = async {
        futures::join!(
            agent_controller,
            policy_controller,
            group_controller,
            sweeping,
            forgetting,
            making
        )
    };
    let ended = tokio::select! {
        _ = controllers => {
            // Every reconcile has ended: what they decided and did not write yet is written now.
            reconcile::flush(&context).await;
            super::Ended::Stopped
        }
        expiry = lost => {
            // The reconciles are dropped; what is pending goes while the Lease still holds.
            if let Some(expiry) = expiry {
                let flushed = tokio::time::timeout_at(expiry, reconcile::flush(&context)).await;
                if flushed.is_err() {
                    tracing::warn!("the leader Lease expired before every pending status was written");
                }
            }
            super::Ended::Lost
        }
    };
    drop(watches);
    ended
}

/// Forwards every change to `tx`.
fn forward<K>(tx: mpsc::UnboundedSender<K>) -> impl FnMut(Change<K>) + Send + 'static
where
    K: Send + 'static,
{
    move |change| {
        let (Change::Applied(o) | Change::Deleted(o)) = change;
        let _ = tx.unbounded_send(o);
    }
}

/// The Agents a change of `policy` concerns: those that name it, and, for the namespace's
/// `default`, those that name none.
fn agents_using(agents: &Store<AgentObject>, policy: &PolicyObject) -> Vec<ObjectRef<AgentObject>> {
    let namespace = policy.namespace();
    let name = policy.name_any();
    agents
        .state()
        .iter()
        .filter(|a| a.namespace() == namespace)
        .filter(|a| a.0.as_ref().is_ok_and(|a| uses_policy(a, &name)))
        .map(|a| ObjectRef::from(a.as_ref()))
        .collect()
}

fn error_policy(agent: Arc<AgentObject>, error: &Error, ctx: Arc<Context>) -> Action {
    error::retry(
        "Agent",
        ObjectRef::from(agent.as_ref()),
        error,
        &ctx.retries,
        &ctx.metrics,
    )
}
