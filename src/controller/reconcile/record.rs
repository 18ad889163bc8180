//! Record: a decided status written at once or held for its Agent's interval (`writer`), the
//! statuses pending written on a graceful stop, and a refused replacement said in the status.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use tracing::{info, warn};

use super::super::error::Error;
use super::super::writer::{self, When};
use super::super::{Context, events, status};
use super::decision::Decision;
use crate::api::{Agent, AgentStatus};
use crate::supervise::conditions::{self, Desired};
use crate::supervise::{EventReason, Plan};

/// What became of a decided status.
pub(super) enum Recorded {
    /// Written (the Agent as written, if anything changed).
    Written(Option<Box<Agent>>),
    /// Pending: written within this.
    Pending(Duration),
}

/// Records `plan`'s status, decided at `decided` on `written` (the Agent as the server has it):
/// at once, or when the Agent's interval is up if it may wait (see `writer`).
pub(super) async fn record(
    written: &Agent,
    plan: &Plan,
    watched: bool,
    decided: Instant,
    ctx: &Context,
) -> Result<Recorded, Error> {
    let unset = AgentStatus::default();
    let on_server = written.status.as_ref().unwrap_or(&unset);
    if plan.record_shutdown.is_none() && plan.status == *on_server {
        ctx.writer.settled(written);
        reports_recorded(written, decided, ctx);
        return Ok(Recorded::Written(None));
    }
    let now = Instant::now();
    let due = if writer::first_may_wait(on_server, plan, watched) {
        Some(ctx.writer.first_due(written, now))
    } else if writer::may_wait(on_server, plan, watched) {
        match ctx.writer.when(written, now) {
            When::At(due) => Some(due),
            When::Now => None,
        }
    } else {
        None
    };
    if let Some(due) = due.filter(|due| *due > now) {
        ctx.writer.hold(written, plan.status.clone(), now, due);
        let left = due.saturating_duration_since(now);
        return Ok(Recorded::Pending(left.max(Duration::from_millis(1))));
    }
    let written = write(written, plan, decided, ctx).await?;
    Ok(Recorded::Written(written.map(Box::new)))
}

/// Writes `plan`'s status now, decided at `decided` on `written`, and tells the writer (and the
/// status lag metric).
pub(super) async fn write(
    written: &Agent,
    plan: &Plan,
    decided: Instant,
    ctx: &Context,
) -> Result<Option<Agent>, Error> {
    let unset = AgentStatus::default();
    let on_server = written.status.as_ref().unwrap_or(&unset);
    let ended = first_seen_ended(written, plan, ctx);
    let reported = first_seen_report(written, on_server, plan, ctx);
    let result = status::record(written, on_server, plan, ctx).await?;
    let now = Instant::now();
    let since = ctx.writer.wrote(written, now);
    reports_recorded(written, decided, ctx);
    if result.is_some() || plan.record_shutdown.is_some() {
        // From the cause: the first pod end it records or the first report on the Lease, as
        // their watches first showed them, or the first change it held, whichever came first;
        // written at once for what the decision itself saw, from then.
        let cause = [since, ended, reported].into_iter().flatten().min();
        let lag = now.saturating_duration_since(cause.unwrap_or(now));
        ctx.metrics.status_lag.observe(lag.as_secs_f64());
    }
    Ok(result)
}

/// When the Lease watch first showed a report `plan` records and `on_server` does not, if
/// `plan` records one.
fn first_seen_report(
    written: &Agent,
    on_server: &AgentStatus,
    plan: &Plan,
    ctx: &Context,
) -> Option<Instant> {
    if !super::reports_unwritten(on_server, &plan.status) {
        return None;
    }
    let namespace = written.namespace()?;
    ctx.reports
        .first_unrecorded(&namespace, &written.name_any())
}

/// A status decided at `decided` is on the server: what the Agent's Lease reported before is
/// recorded (or needed no record).
fn reports_recorded(written: &Agent, decided: Instant, ctx: &Context) {
    let namespace = written.namespace().unwrap_or_default();
    ctx.reports
        .recorded(&namespace, &written.name_any(), decided);
}

/// When the watch first showed finished the first pod whose end `plan` records and the status
/// `written` does not.
fn first_seen_ended(written: &Agent, plan: &Plan, ctx: &Context) -> Option<Instant> {
    let (namespace, uid) = (written.namespace()?, written.uid()?);
    let recorded: Vec<(u32, Option<&crate::api::Time>)> = written
        .status
        .iter()
        .flat_map(|s| &s.restart_history)
        .map(|r| (r.attempt, r.failed_at.as_ref()))
        .collect();
    plan.status
        .restart_history
        .iter()
        .filter(|r| r.failed_at.is_some() && !recorded.contains(&(r.attempt, r.failed_at.as_ref())))
        .filter_map(|r| ctx.finished.seen(&namespace, &uid, r.attempt))
        .min()
}

/// Writes every status pending (a graceful stop: the reconciles have ended). Each write carries
/// the resourceVersion its status was decided on: one made stale by someone else's write is
/// refused, read again, moved onto theirs (`Pending::rebased`) and written once more; a
/// successor decides on the result.
pub async fn flush(ctx: &Context) {
    let pending = ctx.writer.take_pending();
    if pending.is_empty() {
        return;
    }
    info!(
        agents = pending.len(),
        "writing the statuses pending before stopping"
    );
    let writes = pending.into_iter().map(|p| async move {
        let plan = Plan {
            status: p.status.clone(),
            ..Plan::default()
        };
        // Decided by its first change at the earliest: a report seen since is not taken as
        // recorded.
        let decided = p.since;
        let mut result = write(&p.written, &plan, decided, ctx).await;
        if result.as_ref().is_err_and(Error::is_conflict)
            && let Ok(Some(latest)) = super::super::gather::latest(&p.written, ctx).await
            && let Some(rebased) = p.rebased(&latest)
        {
            let plan = Plan {
                status: rebased.status,
                ..Plan::default()
            };
            result = write(&latest, &plan, decided, ctx).await;
        }
        if let Err(e) = result {
            warn!(agent = %p.written.name_any(), error = %e, "could not write a pending status");
        }
    });
    futures::future::join_all(writes).await;
}

/// The API server refused the next attempt's pod (its dry run, or its create): a running pod
/// keeps running, and the Agent says why, at once: its `Ready` condition (reason
/// `ReplacementRefused`, the server's message) and a Warning Event, written with `plan`, what
/// was decided without the restart (`decision::without_restart`). A refusal that repeats writes
/// nothing more. Returns the error, for the retry policy.
pub(super) async fn refused(
    d: &Decision<'_>,
    mut plan: Plan,
    error: Error,
    ctx: &Context,
) -> Error {
    let unset = AgentStatus::default();
    let before = d.before().unwrap_or(&unset);
    let status = &mut plan.status;
    let ready = conditions::get(&status.conditions, conditions::READY);
    let pod = d.plan.create_pod.as_ref().or(d.plan.validate_pod.as_ref());
    let running = match (&d.plan.delete_pod, &status.pod_name) {
        (Some(_), Some(current)) => format!("; pod {current} keeps running"),
        _ => String::new(),
    };
    let message = format!(
        "the API server refuses pod {}{running}: {}; tried again within a minute",
        pod.map_or("", |p| p.name.as_str()),
        error.server_message(),
    );
    let desired = Desired {
        type_: conditions::READY,
        status: ready.is_some_and(|c| c.status == "True") && d.plan.delete_pod.is_some(),
        reason: REPLACEMENT_REFUSED,
        message: &crate::supervise::classify::truncate(message.clone()),
    };
    conditions::set(
        &mut status.conditions,
        desired,
        d.agent.metadata.generation.unwrap_or_default(),
        jiff::Timestamp::now(),
    );
    plan.events.push(crate::supervise::Event {
        reason: EventReason::ReplacementRefused,
        note: message,
        pod: pod.map(|p| p.name.clone()),
    });
    // Written on the Agent as the server has it: the status pending goes with it.
    match write(&d.written, &plan, d.at, ctx).await {
        Ok(_) => {
            events::publish(&d.agent, &plan, ctx);
            ctx.metrics.observe(before, &plan, jiff::Timestamp::now());
        }
        Err(e) => warn!(error = %e, "could not record the refused pod"),
    }
    error
}

/// The `Ready` reason of an Agent whose next pod the API server refuses.
const REPLACEMENT_REFUSED: &str = "ReplacementRefused";
