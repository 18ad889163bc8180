//! The IO shell: watches Agents and what they own, and for each change runs the pipeline
//! gather → classify → decide (the pure core) → act → record. What the controllers write for
//! the process to serve lives here too: metrics, readiness (`health`) and the caches the status
//! page reads (`watched`).

mod act;
pub mod budget;
mod error;
mod events;
pub mod facts;
mod finished;
mod fresh;
mod gather;
mod gone;
pub mod groups;
pub mod health;
pub mod manifests;
pub mod metrics;
mod named;
mod outages;
mod policies;
mod reconcile;
mod routes;
pub(crate) mod slim;
mod status;
mod watch;
pub mod watched;

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use slim::CachedPod;

pub use error::Error;
pub use watch::WatchFaults;

use crate::api::{AGENT_LABEL, Agent, RestartPolicy};
use gone::GonePods;
use groups::{GroupIndex, GroupObject};
use health::Health;
use metrics::Metrics;
use watch::{Change, Watches};

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "agent-supervisor";

/// An Agent as watched: decoded, or the reason it cannot be (reported, and skipped).
pub type AgentObject = DeserializeGuard<Agent>;
/// A RestartPolicy as watched.
pub type PolicyObject = DeserializeGuard<RestartPolicy>;

/// What the controllers watch and how hard they work.
#[derive(Clone, Debug)]
pub struct Config {
    /// The namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Agents reconciled at once, per namespace scope.
    pub concurrency: u16,
    /// Where reconciles report what they did.
    pub metrics: Arc<Metrics>,
    /// Where the watches report whether they are synced and working (`/readyz`).
    pub health: Arc<Health>,
    /// Faults injected into the watches; for tests.
    pub faults: WatchFaults,
    /// How fast restarts may go (`--restart-rate`, `--restart-burst`).
    pub budget: budget::BudgetConfig,
    /// Where the status page reads the caches from.
    pub status: Arc<watched::Watched>,
    /// How long an object's Events wait after one is sent, to go together (`events::WINDOW`).
    pub event_window: Duration,
}

impl Default for Config {
    fn default() -> Self {
        let health = Health::default();
        health.set_ready(true);
        Config {
            namespaces: Vec::new(),
            concurrency: 128,
            metrics: Arc::default(),
            health: Arc::new(health),
            faults: WatchFaults::default(),
            budget: budget::BudgetConfig::default(),
            status: Arc::default(),
            event_window: events::WINDOW,
        }
    }
}

/// What every reconcile of one scope shares: the client, the Event recorder and the caches.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    /// Sends the decisions' Events.
    pub events: events::Sender,
    pub pods: Store<CachedPod>,
    pub leases: Store<Lease>,
    pub claims: Store<PersistentVolumeClaim>,
    pub policies: Store<PolicyObject>,
    pub groups: Store<GroupObject>,
    pub metrics: Arc<Metrics>,
    /// The restart budget, shared by every scope of the operator.
    pub budget: Arc<budget::Budget>,
    retries: error::Retries<AgentObject>,
    /// The last state of pods deleted since the cache saw them.
    gone: Arc<GonePods>,
    /// This process's own status writes the cache may not hold yet.
    own_writes: fresh::OwnWrites,
    /// Each Agent's finished pods, where old attempts are found.
    finished: Arc<finished::FinishedPods>,
    /// Which Agents the groups name, listed for first starts.
    named: Arc<named::NamedByGroups>,
}

/// Runs the controllers until `shutdown` resolves: per watched namespace (or once for the whole
/// cluster), one set of watches shared by an Agent controller and a RestartPolicy status
/// controller. Their workers start once every watch has listed everything.
pub async fn run(
    client: Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let shutdown = Box::pin(shutdown).shared();
    // Every reason a reconcile can fail for is exported from zero.
    for reason in Error::REASONS {
        let label = metrics::ReasonLabel {
            reason: reason.to_string(),
        };
        let _ = config.metrics.reconcile_errors.get_or_create(&label);
    }
    let budget = budget::Budget::new(config.budget);
    // One for the process: one bound on the Events waiting, shared by every scope.
    let events = events::Sender::new(
        client.clone(),
        config.event_window,
        config.metrics.events_dropped.clone(),
    );
    let tasks = scopes.into_iter().map(|scope| {
        run_scope(
            client.clone(),
            scope,
            &config,
            budget.clone(),
            events.clone(),
            shutdown.clone(),
        )
        .boxed()
    });
    futures::join!(
        futures::future::join_all(tasks),
        budget.clone().dispatch(shutdown.clone())
    );
}

fn api<K>(client: &Client, scope: &Option<String>) -> Api<K>
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

async fn run_scope(
    client: Client,
    scope: Option<String>,
    config: &Config,
    budget: Arc<budget::Budget>,
    events: events::Sender,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
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
    let named = Arc::new(named::NamedByGroups::default());
    let mut routes = routes::AgentRoutes::new(index, named.clone());
    let agents = watches.spawn(
        format!("Agents in {within}"),
        api::<AgentObject>(&client, &scope),
        // Listed as the server has them now, never from a cache behind it: what this process
        // acts on must hold every write made before it started (see `fresh`).
        watcher::Config::default().list_semantic(watcher::ListSemantic::MostRecent),
        |_| (),
        move |change| {
            let (agent, triggers) = routes.route(change);
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
                forward_pod(change)
            }
        },
    );
    let (lease_tx, lease_changes) = channel::<Lease>();
    let leases = watches.spawn(
        format!("Leases in {within}"),
        api::<Lease>(&client, &scope),
        owned.clone(),
        |_| (),
        forward(lease_tx),
    );
    let (claim_tx, claim_changes) = channel::<PersistentVolumeClaim>();
    let claims = watches.spawn(
        format!("PersistentVolumeClaims in {within}"),
        api::<PersistentVolumeClaim>(&client, &scope),
        owned,
        |_| (),
        forward(claim_tx),
    );

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
        );
    };
    tokio::select! {
        () = synced => tracing::info!(scope = within, "caches synced: starting workers"),
        () = shutdown.clone() => return,
    }

    let (pod_store, lease_store) = (pods.clone(), leases.clone());
    // Restarts its predecessor just made use up the budget as they did; the agents the budget
    // lets go are reconciled at once.
    budget.seed(recent_restarts(&pods, config.budget));
    let (granted_tx, granted) = mpsc::unbounded::<ObjectRef<AgentObject>>();
    budget.register(scope.clone(), granted_tx);
    config.metrics.watch_policies(policies.clone());
    config.status.watch_policies(policies.clone());
    config.status.watch_groups(groups.clone());
    let context = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), Reporter::from(FIELD_MANAGER)),
        events: events.clone(),
        pods,
        leases,
        claims,
        policies: policies.clone(),
        groups: groups.clone(),
        metrics: config.metrics.clone(),
        budget,
        retries: error::Retries::default(),
        gone,
        own_writes: fresh::OwnWrites::default(),
        finished,
        named,
    });
    config.metrics.watch_agents(agents.clone());
    config.status.watch_agents(agents.clone());
    let agent_store = agents.clone();
    let agent_controller = Controller::for_stream(agent_changes, agents.clone())
        .owns_stream(pod_changes)
        .owns_stream(lease_changes)
        .owns_stream(claim_changes)
        .watches_stream(policy_specs, move |policy: PolicyObject| {
            agents_using(&agent_store, &policy)
        })
        .reconcile_on(futures::stream::select(agent_triggers, granted))
        .with_config(controller::Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile::reconcile, error_policy, context)
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
    futures::join!(agent_controller, policy_controller, group_controller);
    drop(watches);
}

/// How long ago each restart pod in the cache was created, of those recent enough to weigh on
/// the budget (within the time a full burst takes to refill).
fn recent_restarts(pods: &Store<CachedPod>, budget: budget::BudgetConfig) -> Vec<Duration> {
    let window = f64::from(budget.burst) / budget.rate.max(f64::MIN_POSITIVE);
    let now = jiff::Timestamp::now();
    pods.state()
        .iter()
        .filter(|p| {
            p.labels()
                .get(crate::api::ATTEMPT_LABEL)
                .and_then(|a| a.parse::<u32>().ok())
                .is_some_and(|a| a > 1)
        })
        .filter_map(|p| p.metadata.creation_timestamp.as_ref())
        // Creation times are whole seconds: each may be up to a second later than it reads.
        .map(|t| (now - t.0).total(jiff::Unit::Second).unwrap_or(0.0) - 1.0)
        .map(|age| age.max(0.0))
        .filter(|age| *age <= window)
        .map(Duration::from_secs_f64)
        .collect()
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

/// How a reconcile ended, as the controller reports it: failures of the reconcile itself were
/// logged by the error policy; anything else (an object gone before its turn) is routine.
fn log_outcome<K, E: std::fmt::Display>(
    kind: &str,
    result: Result<(ObjectRef<K>, Action), controller::Error<E, watcher::Error>>,
) where
    K: Resource,
    K::DynamicType: std::fmt::Debug,
{
    match result {
        Ok(_) | Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::ObjectNotFound(object)) => {
            tracing::debug!(kind, %object, "object gone before its reconcile")
        }
        Err(e) => tracing::warn!(kind, error = %e, "controller error"),
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

/// Whether `agent` is governed by the RestartPolicy called `policy` in its namespace.
pub fn uses_policy(agent: &Agent, policy: &str) -> bool {
    routes::policy_name(agent) == policy
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

/// How long to wait when nothing is due: a safety net, not a poll (it writes nothing).
pub(crate) const RESYNC: Duration = Duration::from_secs(30 * 60);
