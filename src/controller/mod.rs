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
pub mod identity;
pub mod manifests;
pub mod metrics;
mod outages;
mod policies;
mod reconcile;
mod reports;
pub mod round_trips;
mod routes;
mod sandbox;
mod scope;
pub(crate) mod slim;
mod status;
mod terminating;
mod upkeep;
mod watch;
pub mod watched;
pub mod writer;

use std::sync::Arc;
use std::time::Duration;

use crate::api::wire::Guarded;
use futures::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use slim::CachedPod;

pub use error::Error;
pub use watch::WatchFaults;

use crate::api::{Agent, RestartPolicy};
use gone::GonePods;
use groups::GroupObject;
use health::Health;
use metrics::Metrics;

/// The field manager of everything the operator writes.
pub const FIELD_MANAGER: &str = "agent-supervisor";

/// A patch (merge or JSON) written as the operator.
fn patch_params() -> kube::api::PatchParams {
    kube::api::PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..kube::api::PatchParams::default()
    }
}

/// A create written as the operator; `dry_run`: only validated.
fn post_params(dry_run: bool) -> kube::api::PostParams {
    kube::api::PostParams {
        dry_run,
        field_manager: Some(FIELD_MANAGER.into()),
    }
}

/// An Agent as watched: decoded, or the reason it cannot be (reported, and skipped).
pub type AgentObject = Guarded<Agent>;
/// A RestartPolicy as watched.
pub type PolicyObject = Guarded<RestartPolicy>;

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
    /// How soon a decided status is written at the latest (`--status-interval`, see `writer`).
    pub status_interval: Duration,
    /// How long the API server took to answer lately, measured by the client's `Timing` layer
    /// (nothing measured: the writer leaves only `SERVED` for a write to be served).
    pub round_trips: Arc<round_trips::RoundTrips>,
    /// How many Events an object may send at once, and how soon it may send one more
    /// (`events::LIMIT`).
    pub event_limit: budget::BudgetConfig,
    /// Whether an Agent with a heartbeat gets the identity that renews its Lease
    /// (`--manage-agent-rbac`, see `identity`).
    pub manage_agent_rbac: bool,
    /// Watch agent-sandbox's Sandboxes, when they are served (`--sandboxes`).
    pub sandboxes: bool,
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
            status_interval: writer::STATUS_INTERVAL,
            round_trips: round_trips::RoundTrips::new(writer::STATUS_INTERVAL),
            event_limit: events::LIMIT,
            manage_agent_rbac: true,
            sandboxes: true,
        }
    }
}

/// What every reconcile of one scope shares: the client, the Event sender and the caches.
pub struct Context {
    pub client: Client,
    /// Sends the decisions' Events.
    pub events: events::Sender,
    pub pods: Store<CachedPod>,
    pub leases: Store<Lease>,
    pub claims: Store<PersistentVolumeClaim>,
    /// What the operator made for agents' identities, when it manages them.
    pub identity: Option<identity::Stores>,
    pub policies: Store<PolicyObject>,
    pub groups: Store<GroupObject>,
    /// agent-sandbox's Sandboxes, when they are watched (served, and `--sandboxes`).
    pub sandboxes: Option<Store<crate::api::sandbox::Sandbox>>,
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
    /// When each Lease's reports not yet recorded were first seen.
    reports: Arc<reports::Reports>,
    /// The statuses decided and not yet written, and when each Agent was last written.
    writer: writer::Writer,
    /// Namespaces being deleted, where Agents are left alone (see `terminating`).
    terminating: terminating::Terminating,
}

/// Runs the controllers until `shutdown` resolves: per watched namespace (or once for the whole
/// cluster), one set of watches shared by an Agent controller and a RestartPolicy status
/// controller. Their workers start once every watch has listed everything.
pub async fn run(
    client: Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    run_leading(client, config, shutdown, futures::future::pending()).await;
}

/// How the controllers ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Told to stop: every reconcile finished, and what was pending is written.
    Stopped,
    /// Leadership lost: the reconciles were dropped at once, and what was pending was written
    /// if the Lease held long enough.
    Lost,
}

/// As `run`, for the leader: when `lost` resolves, the controllers stop at once (a former
/// leader must not act), and the statuses pending are written only until the instant it gives
/// (when the Lease expires; none, when someone else leads already). Each carries the version it
/// was decided on: one the next leader changed meanwhile is refused.
pub async fn run_leading(
    client: Client,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    lost: impl Future<Output = Option<tokio::time::Instant>> + Send + 'static,
) -> Ended {
    let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let shutdown = Box::pin(shutdown).shared();
    let lost = Box::pin(lost).shared();
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
        config.event_limit,
        config.metrics.events_dropped.clone(),
    );
    let shared = scope::Shared {
        budget: budget.clone(),
        events,
    };
    let tasks = scopes.into_iter().map(|scope| {
        scope::run_scope(
            client.clone(),
            scope,
            &config,
            shared.clone(),
            shutdown.clone(),
            lost.clone(),
        )
        .boxed()
    });
    let budget = async {
        tokio::select! {
            () = budget.clone().dispatch(shutdown.clone()) => {}
            _ = lost.clone() => {}
        }
    };
    let (ended, ()) = futures::join!(futures::future::join_all(tasks), budget);
    if ended.contains(&Ended::Lost) {
        Ended::Lost
    } else {
        Ended::Stopped
    }
}

/// How a reconcile ended, as the controller reports it: failures of the reconcile itself were
/// logged by the error policy; anything else (an object gone before its turn) is routine.
pub(crate) fn log_outcome<K, E: std::fmt::Display>(
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

/// Whether `agent` is governed by the RestartPolicy called `policy` in its namespace.
pub fn uses_policy(agent: &Agent, policy: &str) -> bool {
    routes::policy_name(agent) == policy
}

/// How long to wait when nothing is due: a safety net, not a poll (it writes nothing).
pub(crate) const RESYNC: Duration = Duration::from_secs(30 * 60);
