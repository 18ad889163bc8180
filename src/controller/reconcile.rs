//! One reconcile of one Agent: gather → decide → act → record.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use tracing::{info, instrument, warn};

use super::act::{create_pod, delete_pod, dry_run, ensure_owned_objects, remove_old_pods};
use super::budget::Admission;
use super::error::Error;
use super::fresh::Freshness;
use super::gather::Source;
use super::{AgentObject, Context, RESYNC, catch_up, events, gather, manifests, status, storm};
use crate::api::{Agent, AgentStatus};
use crate::supervise::conditions::{self, Desired};
use crate::supervise::{self, FIRST_RECORD_WAIT, Plan};

/// Reconciles one Agent; an Agent that cannot be decoded is reported and left alone.
pub async fn reconcile(object: Arc<AgentObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let agent = match &object.0 {
        Ok(agent) => agent,
        Err(invalid) => {
            events::report_invalid(&ctx.recorder, "Agent", invalid).await;
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
    if agent.metadata.deletion_timestamp.is_some() {
        // Its pods, Lease and claims go with it through garbage collection.
        ctx.own_writes
            .forget(&agent.namespace().unwrap_or_default(), &agent.name_any());
        ctx.held.release(agent);
        return Ok(Done::Then(Action::await_change()));
    }
    let namespace = agent.namespace().unwrap_or_default();
    let created = agent.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if ctx.terminating.holds(&namespace, created) {
        // Its namespace is being deleted: nothing can be made there, and the Agent goes with it.
        ctx.held.release(agent);
        return Ok(Done::Then(Action::await_change()));
    }
    let cached = agent.resource_version().unwrap_or_default();
    if ctx
        .own_writes
        .freshness(&namespace, &agent.name_any(), &cached)
        == Freshness::Behind
    {
        // The cache has not shown this process's last write yet: a decision on it would be
        // refused (its write carries the version it was made on). Its watch event comes soon.
        return Ok(Done::Then(Action::requeue(Duration::from_secs(1))));
    }
    let started = std::time::Instant::now();
    let _timer = scopeguard(|| {
        ctx.metrics
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64())
    });
    let now = jiff::Timestamp::now();
    let mut source = Source::Cache;
    // A failure's record held back during a crash storm is where the decision starts from; the
    // Agent as written is what a write is compared with.
    let held_back = ctx.held.get(agent);
    let with_held = held_back.as_ref().map(|h| h.apply(agent));
    let mut written = agent;
    let mut agent = with_held.as_ref().unwrap_or(agent);
    let input = gather::gather(agent, ctx, now, source).await?;
    let watched = storm::watched(&input);
    let mut plan = supervise::decide(input);
    let (latest, latest_with_held);
    if plan.delete_pod.is_some() || adopts_on_resume(agent, &plan) {
        // Nothing is deleted on cached facts: a Lease renewed while the lease watch was
        // re-listing, or a pod the cache saw late, must not get a running agent killed. Nor is
        // a pod taken back as running when a shutdown is cleared or a suspend lifted: it may
        // have ended, or been deleted by the suspend, and the change to the Agent reached the
        // cache before the pod's. Decide again on the Agent, its pod and its Lease as the server
        // has them now.
        latest = match gather::latest(agent, ctx).await? {
            Some(latest) if latest.metadata.deletion_timestamp.is_none() => latest,
            _ => return Ok(Done::Then(Action::await_change())),
        };
        latest_with_held = ctx.held.get(&latest).map(|h| h.apply(&latest));
        written = &latest;
        agent = latest_with_held.as_ref().unwrap_or(&latest);
        source = Source::Server;
        plan = supervise::decide(gather::gather(agent, ctx, now, source).await?);
    } else if plan.create_pod.as_ref().is_some_and(|p| {
        ctx.own_writes
            .just_created(&agent.namespace().unwrap_or_default(), &p.name)
    }) {
        // This process created that very pod a moment ago: the pod cache has not caught up
        // with it yet (its watch event reconciles the Agent). Creating it again would repeat
        // the decision and its Events.
        return Ok(Done::Then(Action::requeue(Duration::from_millis(200))));
    } else if plan.create_pod.is_some() && !gather::is_current(agent, ctx).await? {
        // The decision was made on a cached Agent older than the operator's own last write: an
        // action taken on it could repeat one already done (a second manual restart, say).
        // Decide again once the cache has the write (its watch event reconciles the Agent).
        return Ok(Done::Then(Action::requeue(Duration::from_millis(500))));
    }
    let mut waiting = None;
    if plan
        .create_pod
        .as_ref()
        .is_some_and(|p| p.origin.trigger.is_some())
        && let Some(wait) = over_budget(agent, ctx).await
    {
        // The restart stays due in the status, and the budget wakes this agent when a token is
        // its (the requeue is only a safety net). A failure decided with its restart is still
        // recorded now, without the restart.
        let options = supervise::Options {
            restart_at_once: false,
        };
        plan = supervise::decide_with(gather::gather(agent, ctx, now, source).await?, options);
        if plan.create_pod.is_some() {
            return Ok(Done::Then(wait));
        }
        waiting = Some(wait);
    }
    let unset = AgentStatus::default();
    // What the decision started from, and what the server has.
    let before = agent.status.as_ref().unwrap_or(&unset);
    let on_server = written.status.as_ref().unwrap_or(&unset);
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
    let template_hash = manifests::template_hash(agent);
    let pods: Api<Pod> =
        Api::namespaced(ctx.client.clone(), &agent.namespace().unwrap_or_default());
    // Nothing running is deleted before its replacement is known to be creatable.
    let replacement = plan.validate_pod.as_ref().or(plan.create_pod.as_ref());
    if let (Some(_), Some(next)) = (&plan.delete_pod, replacement) {
        let validated = async {
            ensure_owned_objects(agent, ctx).await?;
            dry_run(agent, &pods, next, &template_hash).await
        };
        if let Err(error) = validated.await {
            return Err(refused(agent, before, error, ctx).await);
        }
    }
    match (&plan.delete_pod, &plan.create_pod) {
        (Some(kill), None) => {
            // A kill (hung, never started, suspended, replaced) is recorded before it happens:
            // once the pod is gone, nothing else would tell it from a pod lost with its node.
            status::record(agent, on_server, &plan, ctx).await?;
            ctx.held.release(agent);
            events::publish(agent, &plan, ctx);
            delete_pod(&pods, kill, ctx).await?;
        }
        (kill, create) => {
            if let Some(kill) = kill {
                delete_pod(&pods, kill, ctx).await?;
            }
            // A new pod is created before it is recorded: a lost status write is repaired by
            // adopting the pod (its name is derived from the attempt, and it carries what it
            // was created for), never by a second pod.
            if let Some(new) = create {
                ensure_owned_objects(agent, ctx).await?;
                if let Err(e) = create_pod(agent, &pods, new, &template_hash).await {
                    if e.refused_for_deletion() {
                        ctx.terminating.saw(&namespace, jiff::Timestamp::now());
                        return Ok(Done::Then(Action::await_change()));
                    }
                    events::warn_user(agent, &e, ctx);
                    return Err(e);
                }
                ctx.own_writes.created(&namespace, &new.name);
                ctx.creates.created(new.origin.trigger.is_some());
                // The pod of the attempt the server records stays: a successor rebuilds what is
                // not recorded from it.
                remove_old_pods(agent, &pods, new.attempt.min(on_server.attempt + 1), ctx);
            }
            // A first pod not yet running is recorded once it runs (or has waited): until then
            // the pod itself is the record.
            let held = plan.hold_status_until.is_some_and(|t| t > now);
            // Recording a first pod, pending or running, is no one's next step: it gives way to
            // the reconciles that create pods, while they do and while writes are queued up.
            let _turn = if catch_up::catching_up(before, &plan, held) {
                match first_record_turn(agent, &plan, ctx, now) {
                    Ok(turn) => Some(turn),
                    Err(wait) => return Ok(Done::Then(wait)),
                }
            } else {
                None
            };
            if !held
                && waiting.is_none()
                && let Some(left) =
                    storm::hold_back(ctx, written, &plan, held_back.as_ref(), watched)
            {
                // The crash storm goes on: the record waits for this agent's next step.
                events::publish(agent, &plan, ctx);
                ctx.metrics.observe(before, &plan, now);
                return Ok(Done::Then(requeue_within(&plan, now, left)));
            }
            let written = if held {
                None
            } else {
                let written = status::record(agent, on_server, &plan, ctx).await?;
                ctx.held.release(agent);
                if create.is_none() && written.is_some() {
                    // A record that waited through several attempts is written: their pods,
                    // kept until it was, are old now.
                    remove_old_pods(agent, &pods, plan.status.attempt, ctx);
                }
                written
            };
            // Recorded: the Events follow without holding up the next reconcile.
            events::publish(agent, &plan, ctx);
            ctx.metrics.observe(before, &plan, now);
            let due_now = create.is_none()
                && plan.status.phase == Some(crate::api::Phase::BackingOff)
                && plan
                    .status
                    .next_restart_at
                    .as_ref()
                    .is_some_and(|t| t.0 <= now);
            if let Some(wait) = waiting {
                return Ok(Done::Then(wait));
            }
            if let (true, Some(written)) = (due_now, written) {
                return Ok(Done::DueNow(Box::new(written)));
            }
            return Ok(Done::Then(requeue(&plan, now)));
        }
    }
    ctx.metrics.observe(before, &plan, now);
    Ok(Done::Then(waiting.unwrap_or_else(|| requeue(&plan, now))))
}

/// Asks the restart budget for a token for `agent`'s restart: `None` to go ahead, or the action
/// while it waits. The first time it waits, a `RestartScheduled` Event says so.
async fn over_budget(agent: &Agent, ctx: &Context) -> Option<Action> {
    let key = ObjectRef::<super::AgentObject>::new(&agent.name_any())
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

/// The replacement of a running pod is refused: the pod keeps running, and the Agent says why
/// (its `Ready` condition and a Warning Event). Returns the error, for the retry policy.
async fn refused(agent: &Agent, before: &AgentStatus, error: Error, ctx: &Context) -> Error {
    // Refused for now (a quota) or for good (Pod Security): either way, people are told.
    events::warn(agent, &error, ctx);
    let mut status = before.clone();
    let ready = conditions::get(&status.conditions, conditions::READY);
    let message = format!(
        "pod {} keeps running: {}",
        status.pod_name.as_deref().unwrap_or(""),
        error
    );
    let desired = Desired {
        type_: conditions::READY,
        status: ready.is_some_and(|c| c.status == "True"),
        reason: "ReplacementRefused",
        message: &crate::supervise::classify::truncate(message),
    };
    conditions::set(
        &mut status.conditions,
        desired,
        agent.metadata.generation.unwrap_or_default(),
        jiff::Timestamp::now(),
    );
    let plan = Plan {
        status,
        ..Plan::default()
    };
    if let Err(e) = status::record(agent, before, &plan, ctx).await {
        warn!(error = %e, "could not record the refused replacement");
    }
    error
}

/// A turn to record a first pod while the operator is creating pods (`catch_up`), or how long
/// to wait instead: until a pause in the creates with a turn free, or, once its pod is old
/// (`FIRST_RECORD_WAIT`), until a turn is free.
fn first_record_turn<'a>(
    agent: &Agent,
    plan: &Plan,
    ctx: &'a Context,
    now: jiff::Timestamp,
) -> Result<tokio::sync::SemaphorePermit<'a>, Action> {
    let pod_age = first_pod_age(agent, plan, ctx, now);
    let busy = catch_up::busy(&ctx.creates, &ctx.storm, std::time::Instant::now());
    if !catch_up::gives_way(busy, pod_age)
        && let Ok(turn) = ctx.catch_up.try_acquire()
    {
        return Ok(turn);
    }
    Err(match pod_age.filter(|a| *a < FIRST_RECORD_WAIT) {
        Some(age) => {
            ctx.paused.wait(
                ObjectRef::new(&agent.name_any()).within(&agent.namespace().unwrap_or_default()),
            );
            Action::requeue(catch_up::wait_left(age))
        }
        None => Action::requeue(catch_up::LATER),
    })
}

/// How long ago the pod `plan` records was created, as the cache has it.
fn first_pod_age(
    agent: &Agent,
    plan: &Plan,
    ctx: &Context,
    now: jiff::Timestamp,
) -> Option<Duration> {
    let name = plan.status.pod_name.as_deref()?;
    let pod = ctx
        .pods
        .get(&ObjectRef::new(name).within(&agent.namespace().unwrap_or_default()))?;
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    let age = now.duration_since(created);
    Duration::try_from(age).ok()
}

/// Whether `plan` resumes supervision after a cleared shutdown or a suspend by taking the pod
/// back as it is (instead of starting a new one).
fn adopts_on_resume(agent: &Agent, plan: &Plan) -> bool {
    use crate::api::Phase;
    let was = agent.status.as_ref().and_then(|s| s.phase);
    let resumed = match was {
        Some(Phase::Shutdown) => plan.status.shutdown.is_none(),
        Some(Phase::Suspended) => plan.status.phase != Some(Phase::Suspended),
        _ => false,
    };
    resumed && plan.create_pod.is_none()
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
