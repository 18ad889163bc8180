//! The IO shell: watches Agents and what they own, and for each change runs the pipeline
//! gather → classify → decide (the pure core) → act → record.

mod error;
mod gather;
pub mod manifests;
mod policies;
mod reconcile;
mod status;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

pub use error::Error;

use crate::api::{AGENT_LABEL, Agent, RestartPolicy};
use crate::runtime::metrics::Metrics;

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "agent-supervisor";

/// What the controllers watch and how hard they work.
#[derive(Clone, Debug)]
pub struct Config {
    /// The namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Agents reconciled at once, per namespace scope.
    pub concurrency: u16,
    /// Where reconciles report what they did.
    pub metrics: Arc<Metrics>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespaces: Vec::new(),
            concurrency: 16,
            metrics: Arc::default(),
        }
    }
}

/// What every reconcile of one scope shares: the client, the Event recorder and the caches.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub pods: Store<Pod>,
    pub leases: Store<Lease>,
    pub claims: Store<PersistentVolumeClaim>,
    pub policies: Store<RestartPolicy>,
    pub metrics: Arc<Metrics>,
}

impl Context {
    /// Whether every cache has had its first full list: a decision on a half-filled cache would
    /// see a renewed Lease as missing, or the namespace's default policy as absent. (Checked,
    /// not awaited: the caches fill as the controller polls their streams, which a reconcile
    /// waiting here could hold up.)
    pub fn caches_synced(&self) -> bool {
        use futures::FutureExt;
        self.pods.wait_until_ready().now_or_never().is_some()
            && self.leases.wait_until_ready().now_or_never().is_some()
            && self.claims.wait_until_ready().now_or_never().is_some()
            && self.policies.wait_until_ready().now_or_never().is_some()
    }
}

/// Runs the controllers until `shutdown` resolves: one Agent controller and one RestartPolicy
/// status controller per watched namespace (or one of each for the whole cluster).
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
    let shutdown = futures::future::FutureExt::shared(Box::pin(shutdown));
    let tasks = scopes.into_iter().flat_map(|scope| {
        let agents = run_agents(client.clone(), scope.clone(), &config, shutdown.clone());
        let policies = policies::run(client.clone(), scope, shutdown.clone());
        [
            futures::future::FutureExt::boxed(agents),
            futures::future::FutureExt::boxed(policies),
        ]
    });
    futures::future::join_all(tasks).await;
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

/// A cache of `K` filtered by `config`, without managedFields, and the stream that fills it.
fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (
    Store<K>,
    impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o: &mut K| o.managed_fields_mut().clear())
        .reflect(writer)
        .touched_objects();
    (reader, stream)
}

async fn run_agents(
    client: Client,
    scope: Option<String>,
    config: &Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let owned = watcher::Config::default().labels(AGENT_LABEL);
    let (agents, agent_stream) = cached(api::<Agent>(&client, &scope), watcher::Config::default());
    let (pods, pod_stream) = cached(api::<Pod>(&client, &scope), owned.clone());
    let (leases, lease_stream) = cached(api::<Lease>(&client, &scope), owned.clone());
    let (claims, claim_stream) = cached(api::<PersistentVolumeClaim>(&client, &scope), owned);
    let (policies, policy_stream) = cached(
        api::<RestartPolicy>(&client, &scope),
        watcher::Config::default(),
    );

    let context = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), Reporter::from(FIELD_MANAGER)),
        pods,
        leases,
        claims,
        policies,
        metrics: config.metrics.clone(),
    });
    config.metrics.watch_agents(agents.clone());
    let agent_store = agents.clone();
    Controller::for_stream(agent_stream, agents)
        .owns_stream(pod_stream)
        .owns_stream(lease_stream)
        .owns_stream(claim_stream)
        .watches_stream(policy_stream, move |policy: RestartPolicy| {
            agents_using(&agent_store, &policy)
        })
        .with_config(controller::Config::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile failed");
            }
        })
        .await;
}

/// The Agents a change of `policy` concerns: those that name it, and, for the namespace's
/// `default`, those that name none.
fn agents_using(agents: &Store<Agent>, policy: &RestartPolicy) -> Vec<ObjectRef<Agent>> {
    let namespace = policy.namespace();
    let name = policy.name_any();
    agents
        .state()
        .iter()
        .filter(|a| a.namespace() == namespace && uses_policy(a, &name))
        .map(|a| ObjectRef::from(a.as_ref()))
        .collect()
}

/// Whether `agent` is governed by the RestartPolicy called `policy` in its namespace.
pub fn uses_policy(agent: &Agent, policy: &str) -> bool {
    match &agent.spec.restart_policy_ref {
        Some(reference) => reference.name == policy,
        None => policy == "default",
    }
}

fn error_policy(agent: Arc<Agent>, error: &Error, ctx: Arc<Context>) -> Action {
    let retry = error.retry_after();
    let reason = crate::runtime::metrics::ReasonLabel {
        reason: error.reason().to_string(),
    };
    ctx.metrics.reconcile_errors.get_or_create(&reason).inc();
    tracing::warn!(
        namespace = agent.namespace().unwrap_or_default(),
        name = agent.name_any(),
        reason = error.reason(),
        error = %error,
        retry_in = ?retry,
        "reconcile failed"
    );
    Action::requeue(retry)
}

/// How long to wait when nothing is due: a safety net, not a poll (it writes nothing).
pub(crate) const RESYNC: Duration = Duration::from_secs(30 * 60);
