//! Gather → decide: the plan for one Agent, decided on the freshest facts its actions need.

use std::borrow::Cow;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::info;

use super::super::budget::Admission;
use super::super::error::Error;
use super::super::gather::{self, Source};
use super::super::{Context, events, writer};
use crate::api::{Agent, AgentStatus, Phase};
use crate::supervise::{self, Plan};

/// A decision and what it was made on.
pub(super) struct Decision<'a> {
    /// The Agent as the server has it (as far as this process knows).
    pub written: Cow<'a, Agent>,
    /// The Agent the decision started from: as written, with the status pending if any.
    pub agent: Cow<'a, Agent>,
    pub plan: Plan,
    /// Whether others decide from its status (`writer::watched`).
    pub watched: bool,
    /// The restart waits for the budget: reconcile again as this says.
    pub waiting: Option<Action>,
    /// When it was begun: what the caches showed before is what it was made on.
    pub at: std::time::Instant,
}

impl Decision<'_> {
    /// The status the server has.
    pub fn on_server(&self) -> Option<&AgentStatus> {
        self.written.status.as_ref()
    }

    /// The status the decision started from.
    pub fn before(&self) -> Option<&AgentStatus> {
        self.agent.status.as_ref()
    }
}

/// Decides for `agent` at `now`, or says how long to wait before deciding: a decision that
/// deletes a pod is made again on what the server has; one that creates a pod waits for the
/// cache to hold the operator's own last writes, and for the restart budget.
pub(super) async fn decide<'a>(
    agent: &'a Agent,
    ctx: &Context,
    now: jiff::Timestamp,
) -> Result<Result<Decision<'a>, Action>, Error> {
    // A status decided and not written yet is where the decision starts from.
    let mut d = Decision {
        written: Cow::Borrowed(agent),
        agent: with_pending(agent, ctx),
        plan: Plan::default(),
        watched: false,
        waiting: None,
        at: std::time::Instant::now(),
    };
    let mut source = Source::Cache;
    let input = gather::gather(&d.agent, ctx, now, source).await?;
    d.watched = writer::watched(&input);
    d.plan = supervise::decide(input);
    let decided_on_server = d.plan.delete_pod.is_some() || adopts_on_resume(&d.agent, &d.plan);
    if decided_on_server {
        // Nothing is deleted on cached facts: a Lease renewed while the lease watch was
        // re-listing, or a pod the cache saw late, must not get a running agent killed. Nor is
        // a pod taken back as running when a shutdown is cleared or a suspend lifted: it may
        // have ended, or been deleted by the suspend, and the change to the Agent reached the
        // cache before the pod's. Decide again on the Agent, its pod and its Lease as the server
        // has them now.
        let latest = match gather::latest(&d.agent, ctx).await? {
            Some(latest) if latest.metadata.deletion_timestamp.is_none() => latest,
            _ => return Ok(Err(Action::await_change())),
        };
        d.agent = Cow::Owned(with_pending(&latest, ctx).into_owned());
        d.written = Cow::Owned(latest);
        source = Source::Server;
        d.plan = supervise::decide(gather::gather(&d.agent, ctx, now, source).await?);
    } else if let Some(new) = &d.plan.create_pod
        && heartbeat_restart(&d.agent, new)
    {
        // The next attempt will renew the heartbeat Lease: what the ended one reported there is
        // counted from the Lease as the server has it, not as a lagging cache does.
        source = Source::Server;
        d.plan = supervise::decide(gather::gather(&d.agent, ctx, now, source).await?);
    }
    if let (Some(new), false) = (&d.plan.create_pod, decided_on_server) {
        let namespace = agent.namespace().unwrap_or_default();
        if ctx.own_writes.just_created(&namespace, &new.name) {
            // This process created that very pod a moment ago: the pod cache has not caught
            // up with it yet (its watch event reconciles the Agent). Creating it again would
            // repeat the decision and its Events.
            return Ok(Err(Action::requeue(Duration::from_millis(200))));
        }
        if !gather::is_current(&d.agent, ctx).await? {
            // Decided on a cached Agent older than the operator's own last write: an action
            // taken on it could repeat one already done (a second manual restart, say). Decide
            // again once the cache has the write (its watch event reconciles the Agent).
            return Ok(Err(Action::requeue(Duration::from_millis(500))));
        }
    }
    let restart = d.plan.create_pod.as_ref();
    if restart.is_some_and(|p| p.origin.trigger.is_some())
        && let Some(wait) = over_budget(&d.agent, ctx).await
    {
        // The restart stays due in the status, and the budget wakes this agent when a token is
        // its (the requeue is only a safety net). A failure decided with its restart is still
        // recorded now, without the restart; a restart that was due already decides nothing
        // new, but what waits for its write is still written when its interval is up, not when
        // the budget has a token (a storm at the budget's defaults held records past it).
        d.plan = without_restart(&d, ctx, now, source).await?;
        d.waiting = Some(wait);
    }
    Ok(Ok(d))
}

/// What `d` decides, at `now` on facts from `source`, with its restart left due (it waits for
/// the budget, its pod was refused, or what the ended attempt reported is written first): the
/// failure the restart was for, without the restart; or, when the restart was due already,
/// nothing new (`unchanged`).
pub(super) async fn without_restart(
    d: &Decision<'_>,
    ctx: &Context,
    now: jiff::Timestamp,
    source: Source,
) -> Result<Plan, Error> {
    let options = supervise::Options {
        restart_at_once: false,
    };
    let plan = supervise::decide_with(gather::gather(&d.agent, ctx, now, source).await?, options);
    Ok(match plan.create_pod {
        Some(_) => unchanged(d),
        None => plan,
    })
}

/// A plan that decides nothing new: the status `d` started from (its pending changes too).
pub(super) fn unchanged(d: &Decision<'_>) -> Plan {
    Plan {
        status: d.agent.status.clone().unwrap_or_default(),
        ..Plan::default()
    }
}

/// Whether `new` restarts an agent with a heartbeat after a failure.
fn heartbeat_restart(agent: &Agent, new: &supervise::NewPod) -> bool {
    agent.spec.heartbeat.is_some()
        && matches!(
            new.origin.trigger,
            Some(crate::api::Trigger::Failure | crate::api::Trigger::HeartbeatLost)
        )
}

/// `agent` with the status pending for it, if any.
fn with_pending<'a>(agent: &'a Agent, ctx: &Context) -> Cow<'a, Agent> {
    match ctx.writer.pending(agent) {
        Some(pending) => Cow::Owned(pending.apply(agent)),
        None => Cow::Borrowed(agent),
    }
}

/// Asks the restart budget for a token for `agent`'s restart: `None` to go ahead, or the action
/// while it waits. The first time it waits, a `RestartScheduled` Event says so.
async fn over_budget(agent: &Agent, ctx: &Context) -> Option<Action> {
    let key = ObjectRef::<super::super::AgentObject>::new(&agent.name_any())
        .within(&agent.namespace().unwrap_or_default());
    let Admission::Waiting { first, queued } = ctx.budget.acquire(&key) else {
        return None;
    };
    if first {
        ctx.metrics.restarts_delayed.inc();
        let budget = ctx.budget.config;
        let note = format!(
            "Restart due now waits for the restart budget ({}/s, burst {}): {queued} restart(s) queued",
            budget.rate, budget.burst
        );
        info!(queued, "restart waits for the budget");
        let plan = Plan {
            events: vec![supervise::Event {
                reason: supervise::EventReason::RestartScheduled,
                note,
                pod: None,
            }],
            ..Plan::default()
        };
        events::publish(agent, &plan, ctx);
    }
    Some(Action::requeue(Duration::from_secs(60)))
}

/// Whether `plan` resumes supervision after a cleared shutdown or a suspend by taking the pod
/// back as it is (instead of starting a new one).
fn adopts_on_resume(agent: &Agent, plan: &Plan) -> bool {
    let was = agent.status.as_ref().and_then(|s| s.phase);
    let resumed = match was {
        Some(Phase::Shutdown) => plan.status.shutdown.is_none(),
        Some(Phase::Suspended) => plan.status.phase != Some(Phase::Suspended),
        _ => false,
    };
    resumed && plan.create_pod.is_none()
}
