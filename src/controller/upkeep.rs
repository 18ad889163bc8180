//! What the operator keeps per Agent, forgotten when it is no longer needed: an Agent deleted
//! (never reconciled again) and, once an interval, what the writer remembers of Agents it has
//! nothing left to do for.

use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use kube::runtime::reflector::ObjectRef;

use super::{AgentObject, Context};

/// Forgets what is kept for each Agent deleted (a deleted Agent is never reconciled), until
/// `shutdown`: its pending status, its last write, its retries.
pub(super) async fn forget_deleted(
    ctx: Arc<Context>,
    mut deleted: mpsc::UnboundedReceiver<ObjectRef<AgentObject>>,
    shutdown: impl Future<Output = ()>,
) {
    let forgetting = async {
        while let Some(agent) = deleted.next().await {
            let namespace = agent.namespace.as_deref().unwrap_or_default();
            ctx.writer.forget_named(namespace, &agent.name);
            ctx.own_writes.forget(namespace, &agent.name);
            ctx.retries.succeeded(&agent);
        }
    };
    tokio::select! {
        () = forgetting => {}
        () = shutdown => {}
    }
}

/// Forgets, once an interval, what the writer remembers of Agents it has nothing left to do
/// for, until `shutdown`: an Agent deleted while the operator was away is never reconciled.
pub(super) async fn writer_sweep(ctx: Arc<Context>, shutdown: impl Future<Output = ()>) {
    let sweep = async {
        loop {
            tokio::time::sleep(ctx.writer.interval()).await;
            ctx.writer.sweep(std::time::Instant::now());
        }
    };
    tokio::select! {
        () = sweep => {}
        () = shutdown => {}
    }
}
