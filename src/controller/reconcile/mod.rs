//! One reconcile of one Agent: gather → decide → act → record.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use tracing::{info, instrument};

mod decision;
mod record;

use super::act::{create_pod, delete_pod, dry_run, ensure_owned_objects, remove_old_pods};
use super::error::Error;
use super::fresh::Freshness;
use super::gather::Source;
use super::{AgentObject, Context, RESYNC, events, identity};
use crate::api::{Agent, AgentStatus};
use crate::supervise::Plan;
use decision::Decision;
use record::Recorded;

pub use record::flush;

/// Reconciles one Agent; an Agent that cannot be decoded is reported and left alone.
pub async fn reconcile(object: Arc<AgentObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let agent = match &object.0 {
        Ok(agent) => agent,
        Err(invalid) => {
            events::report_invalid(&ctx.events, "Agent", invalid);
            return Ok(Action::await_change());
        }
    };
    let result = reconcile_agent(agent, &ctx).await;
    if result.is_ok() {
        ctx.retries.succeeded(&ObjectRef::from(object.as_ref()));
    }
    result
}

#[instrument(skip_all, fields(namespace = %agent.namespace().unwrap_or_default(), name = %agent.name_any()))]
async fn reconcile_agent(agent: &Agent, ctx: &Context) -> Result<Action, Error> {
    match decide_and_act(agent, ctx).await? {
        // A failure whose restart is due at once was recorded: the restart is made now, on
        // the Agent as written, instead of once its watch event comes back.
        Done::DueNow(written) => decide_and_act(&written, ctx).await.map(Done::action),
        done => Ok(done.action()),
    }
}

/// What one decision left to do.
enum Done {
    /// Reconcile again as the action says.
    Then(Action),
    /// The Agent as just written has a restart due now.
    DueNow(Box<Agent>),
}

impl Done {
    fn action(self) -> Action {
        match self {
            Done::Then(action) => action,
            Done::DueNow(_) => Action::requeue(Duration::ZERO),
        }
    }
}

async fn decide_and_act(agent: &Agent, ctx: &Context) -> Result<Done, Error> {
    if let Some(action) = left_alone(agent, ctx) {
        return Ok(Done::Then(action));
    }
    let started = std::time::Instant::now();
    let _timer = scopeguard(|| {
        let elapsed = started.elapsed().as_secs_f64();
        ctx.metrics.reconcile_duration.observe(elapsed)
    });
    let now = jiff::Timestamp::now();
    // Gather → decide.
    let d = match decision::decide(agent, ctx, now).await? {
        Ok(decided) => decided,
        Err(wait) => return Ok(Done::Then(wait)),
    };
    let (plan, unset) = (&d.plan, AgentStatus::default());
    let sandbox = d.agent.spec.sandbox_ref.as_ref().map(|r| r.name.clone());
    let before = d.before().unwrap_or(&unset);
    log_decision(plan);
    // Act: nothing running is deleted before its replacement is known to be creatable, and a
    // kill (hung, never started, suspended, replaced) is recorded before it happens: once the
    // pod is gone, nothing else would tell it from a pod lost with its node.
    let pods: Api<Pod> =
        Api::namespaced(ctx.client.clone(), &agent.namespace().unwrap_or_default());
    if let Err(error) = validate_replacement(&d, &pods, ctx).await {
        return Err(record::refused(&d, decision::unchanged(&d), error, ctx).await);
    }
    if let (Some(kill), None) = (&plan.delete_pod, &plan.create_pod) {
        record::write(&d.written, plan, d.at, ctx).await?;
        events::publish(&d.agent, plan, ctx);
        ctx.metrics.observe(before, plan, now);
        match &sandbox {
            // Deleted, its pod would be made again at once: the Sandbox is suspended instead.
            Some(sandbox) => super::sandbox::suspend(&d.agent, sandbox, ctx).await?,
            None => delete_pod(&pods, kill, ctx).await?,
        }
        return Ok(Done::Then(d.waiting.unwrap_or_else(|| requeue(plan, now))));
    }
    if let Some(kill) = &plan.delete_pod {
        delete_pod(&pods, kill, ctx).await?;
    } else if let Some(written) = write_ahead(&d, ctx).await? {
        return Ok(Done::DueNow(Box::new(written)));
    }
    repair(&d, ctx).await?;
    if let Some(done) = create(&d, &pods, ctx).await? {
        return Ok(done);
    }
    // Record, then tell: the Events follow without holding up the next reconcile.
    let recorded = record::record(&d.written, plan, d.watched, d.at, ctx).await?;
    match &sandbox {
        Some(sandbox) => super::sandbox::settle(&d.agent, sandbox, plan.status.phase, ctx).await,
        None => prune(&d, &recorded, &pods, ctx),
    }
    events::publish(&d.agent, plan, ctx);
    ctx.metrics.observe(before, plan, now);
    Ok(next(d, recorded, now))
}

/// Why `agent` is not decided for now, if it is not: it is being deleted, its namespace is, or
/// the cache has not shown this process's last write yet.
fn left_alone(agent: &Agent, ctx: &Context) -> Option<Action> {
    let namespace = agent.namespace().unwrap_or_default();
    let created = agent.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if agent.metadata.deletion_timestamp.is_some() || ctx.terminating.holds(&namespace, created) {
        // Its pods, Lease and claims go with it through garbage collection; nothing can be
        // made in a namespace being deleted. Nothing is kept for it.
        ctx.own_writes.forget(&namespace, &agent.name_any());
        ctx.writer.forget(agent);
        return Some(Action::await_change());
    }
    let cached = agent.resource_version().unwrap_or_default();
    let freshness = ctx
        .own_writes
        .freshness(&namespace, &agent.name_any(), &cached);
    // A decision on a cache behind this process's last write would be refused (its write
    // carries the version it was made on). Its watch event comes soon.
    (freshness == Freshness::Behind).then(|| Action::requeue(Duration::from_secs(1)))
}

/// Logs a decision that does or says something, once.
fn log_decision(plan: &Plan) {
    if plan.create_pod.is_some() || plan.delete_pod.is_some() || !plan.events.is_empty() {
        let events: Vec<&str> = plan.events.iter().map(|e| e.reason.as_str()).collect();
        info!(
            phase = plan.status.phase.map(|p| p.as_str()),
            create = plan.create_pod.as_ref().map(|p| p.name.as_str()),
            delete = plan.delete_pod.as_deref(),
            ?events,
            "decided"
        );
    }
}

/// Before a running pod is deleted for a replacement: the Lease and claims exist, and the API
/// server would create the replacement (a dry run).
async fn validate_replacement(
    d: &Decision<'_>,
    pods: &Api<Pod>,
    ctx: &Context,
) -> Result<(), Error> {
    let plan = &d.plan;
    if d.agent.spec.sandbox_ref.is_some() {
        // The Sandbox's controller makes its pods: there is nothing of the operator's to try.
        return Ok(());
    }
    let (Some(_), Some(next)) = (
        &plan.delete_pod,
        plan.validate_pod.as_ref().or(plan.create_pod.as_ref()),
    ) else {
        return Ok(());
    };
    ensure_owned_objects(&d.agent, ctx).await?;
    dry_run(&d.agent, pods, next, ctx).await
}

/// Before the next attempt's pod exists (it will renew the heartbeat Lease, and what the ended
/// attempt reported there is then gone for a successor): what it reported that the server does
/// not have yet is written ahead, with the failure and without the restart, which follows at
/// once on the Agent as written. The Agent as written, if it was.
async fn write_ahead(d: &Decision<'_>, ctx: &Context) -> Result<Option<Agent>, Error> {
    let unset = AgentStatus::default();
    let on_server = d.on_server().unwrap_or(&unset);
    let Some(new) = &d.plan.create_pod else {
        return Ok(None);
    };
    // A Sandbox's restart deletes the ended attempt's pod: its end is written first.
    let sandbox_end = |s: &AgentStatus| {
        d.agent.spec.sandbox_ref.is_some()
            && new.attempt > 1
            && !on_server
                .restart_history
                .iter()
                .any(|r| r.attempt + 1 == new.attempt)
            && s.restart_history
                .iter()
                .any(|r| r.attempt + 1 == new.attempt)
    };
    if !reports_unwritten(on_server, &d.plan.status) && !sandbox_end(&d.plan.status) {
        return Ok(None);
    }
    let now = jiff::Timestamp::now();
    let ahead = decision::without_restart(d, ctx, now, Source::Cache).await?;
    if !reports_unwritten(on_server, &ahead.status) && !sandbox_end(&ahead.status) {
        return Ok(None);
    }
    let Some(written) = record::write(&d.written, &ahead, d.at, ctx).await? else {
        return Ok(None);
    };
    events::publish(&d.agent, &ahead, ctx);
    ctx.metrics
        .observe(d.before().unwrap_or(&unset), &ahead, now);
    Ok(Some(written))
}

/// Whether `status` holds reports (progress, checkpoints, spend) that `on_server` does not.
fn reports_unwritten(on_server: &AgentStatus, status: &AgentStatus) -> bool {
    let progress = |s: &AgentStatus| s.progress.as_ref().map(|p| p.value);
    let checkpoints = |s: &AgentStatus| -> Vec<String> {
        s.checkpoints.iter().map(|c| c.reference.clone()).collect()
    };
    progress(on_server) != progress(status)
        || checkpoints(on_server) != checkpoints(status)
        || on_server.spend != status.spend
}

/// Creates the plan's pod, before it is recorded: a lost status write is repaired by adopting
/// the pod (its name is derived from the attempt, and it carries what it was created for),
/// never by a second pod. `Some` when the reconcile ends here.
async fn create(d: &Decision<'_>, pods: &Api<Pod>, ctx: &Context) -> Result<Option<Done>, Error> {
    let Some(new) = &d.plan.create_pod else {
        return Ok(None);
    };
    let namespace = d.agent.namespace().unwrap_or_default();
    if let Some(sandbox) = &d.agent.spec.sandbox_ref {
        let started = async {
            ensure_owned_objects(&d.agent, ctx).await?;
            super::sandbox::start(&d.agent, &sandbox.name, new, ctx).await
        };
        if let Err(e) = started.await {
            events::warn_user(&d.agent, &e, ctx);
            return Err(e);
        }
        return Ok(None);
    }
    if let Err(e) = ensure_owned_objects(&d.agent, ctx).await {
        events::warn_user(&d.agent, &e, ctx);
        return Err(e);
    }
    if let Err(e) = create_pod(&d.agent, pods, new, ctx).await {
        if e.refused_for_deletion() {
            ctx.terminating.saw(&namespace, jiff::Timestamp::now());
            return Ok(Some(Done::Then(Action::await_change())));
        }
        if e.is_refused() {
            // The failure the restart was for is recorded all the same, with why no restart
            // follows; the error policy retries within a minute (`error::retry_delay`).
            let now = jiff::Timestamp::now();
            let recorded = decision::without_restart(d, ctx, now, Source::Cache).await;
            let recorded = recorded.unwrap_or_else(|_| decision::unchanged(d));
            return Err(record::refused(d, recorded, e, ctx).await);
        }
        events::warn_user(&d.agent, &e, ctx);
        return Err(e);
    }
    ctx.own_writes.created(&namespace, &new.name);
    Ok(None)
}

/// A live pod's identity made again if someone deleted a piece (its watches reconcile the Agent);
/// from the caches, so nothing is sent when all is there. A pod about to be made gets it in
/// `create`.
async fn repair(d: &Decision<'_>, ctx: &Context) -> Result<(), Error> {
    let live = matches!(
        d.plan.status.phase,
        Some(crate::api::Phase::Pending | crate::api::Phase::Running)
    );
    if live && d.plan.create_pod.is_none() {
        identity::ensure(&d.agent, ctx, false).await?;
    }
    Ok(())
}

/// Removes old pods once a pod was created or a status written. The pods of the attempts the
/// server records stay: a successor rebuilds what is not recorded from them.
fn prune(d: &Decision<'_>, recorded: &Recorded, pods: &Api<Pod>, ctx: &Context) {
    let on_server = d.on_server().map_or(0, |s| s.attempt);
    let recorded_attempt = match recorded {
        Recorded::Written(Some(w)) => w.status.as_ref().map_or(0, |s| s.attempt),
        Recorded::Written(None) | Recorded::Pending(_) => on_server,
    };
    if d.plan.create_pod.is_some() || matches!(recorded, Recorded::Written(Some(_))) {
        let attempt = d.plan.status.attempt.min(recorded_attempt + 1);
        remove_old_pods(&d.agent, pods, attempt, ctx);
    }
}

/// When to look again: at once on the Agent as written when its restart is due now, when the
/// budget or the pending status says, or when the plan wants.
fn next(d: Decision<'_>, recorded: Recorded, now: jiff::Timestamp) -> Done {
    let plan = &d.plan;
    if let Some(wait) = d.waiting {
        // The budget wakes the agent for its restart; a status held for its interval is
        // written when that is up, whichever comes first.
        return match recorded {
            Recorded::Pending(left) => Done::Then(Action::requeue(left)),
            Recorded::Written(_) => Done::Then(wait),
        };
    }
    let due_now = plan.create_pod.is_none()
        && plan.status.phase == Some(crate::api::Phase::BackingOff)
        && plan
            .status
            .next_restart_at
            .as_ref()
            .is_some_and(|t| t.0 <= now);
    match recorded {
        Recorded::Pending(left) => Done::Then(requeue_within(plan, now, left)),
        Recorded::Written(Some(written)) if due_now => Done::DueNow(written),
        Recorded::Written(_) => Done::Then(requeue(plan, now)),
    }
}

/// Runs `f` when dropped: times a reconcile however it ends.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// As `requeue`, but within `limit`.
fn requeue_within(plan: &Plan, now: jiff::Timestamp, limit: Duration) -> Action {
    Action::requeue(wait_for(plan, now).min(limit))
}

fn requeue(plan: &Plan, now: jiff::Timestamp) -> Action {
    Action::requeue(wait_for(plan, now))
}

/// How long until `plan` wants another look.
fn wait_for(plan: &Plan, now: jiff::Timestamp) -> Duration {
    match plan.requeue_at {
        Some(at) => {
            let wait = (at - now)
                .total(jiff::Unit::Millisecond)
                .unwrap_or(0.0)
                .max(0.0);
            // Status times are whole seconds: wake just after the due second.
            Duration::from_millis(wait as u64 + 50).min(RESYNC)
        }
        None => RESYNC,
    }
}
