//! Record: a decided status written at once or held for its Agent's interval (`writer`), the
//! statuses pending written on a graceful stop, and a refused replacement said in the status.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use tracing::{info, warn};

use super::super::error::Error;
use super::super::writer::{self, When};
use super::super::{Context, events, status};
use crate::api::{Agent, AgentStatus};
use crate::supervise::Plan;
use crate::supervise::conditions::{self, Desired};

/// What became of a decided status.
pub(super) enum Recorded {
    /// Written (the Agent as written, if anything changed).
    Written(Option<Box<Agent>>),
    /// Pending: written within this.
    Pending(Duration),
}

/// Records `plan`'s status, decided on `written` (the Agent as the server has it): at once, or
/// when the Agent's interval is up if it may wait (see `writer`).
pub(super) async fn record(
    written: &Agent,
    plan: &Plan,
    watched: bool,
    ctx: &Context,
) -> Result<Recorded, Error> {
    let unset = AgentStatus::default();
    let on_server = written.status.as_ref().unwrap_or(&unset);
    if plan.record_shutdown.is_none() && plan.status == *on_server {
        ctx.writer.settled(written);
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
    let written = write(written, plan, ctx).await?;
    Ok(Recorded::Written(written.map(Box::new)))
}

/// Writes `plan`'s status now, decided on `written`, and tells the writer (and the status lag
/// metric).
pub(super) async fn write(
    written: &Agent,
    plan: &Plan,
    ctx: &Context,
) -> Result<Option<Agent>, Error> {
    let unset = AgentStatus::default();
    let on_server = written.status.as_ref().unwrap_or(&unset);
    let result = status::record(written, on_server, plan, ctx).await?;
    let now = Instant::now();
    let since = ctx.writer.wrote(written, now);
    if result.is_some() || plan.record_shutdown.is_some() {
        let lag = since.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        ctx.metrics.status_lag.observe(lag.as_secs_f64());
    }
    Ok(result)
}

/// Writes every status pending (a graceful stop: the reconciles have ended). Each write carries
/// the resourceVersion its status was decided on: one made stale by someone else's write is
/// refused, and a successor decides it again from the pods.
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
            status: p.status,
            ..Plan::default()
        };
        if let Err(e) = write(&p.written, &plan, ctx).await {
            warn!(agent = %p.written.name_any(), error = %e, "could not write a pending status");
        }
    });
    futures::future::join_all(writes).await;
}

/// The replacement of a running pod is refused: the pod keeps running, and the Agent says why
/// (its `Ready` condition and a Warning Event). Returns the error, for the retry policy.
pub(super) async fn refused(
    agent: &Agent,
    before: &AgentStatus,
    error: Error,
    ctx: &Context,
) -> Error {
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
    // Written on the Agent as the decision had it, pending status and all.
    let as_decided = Agent {
        status: Some(before.clone()),
        ..agent.clone()
    };
    if let Err(e) = write(&as_decided, &plan, ctx).await {
        warn!(error = %e, "could not record the refused replacement");
    }
    error
}
