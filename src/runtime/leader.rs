//! Leader election on a Lease (kube-lease-manager), so that two replicas never both act.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;

/// Leadership, as it changes.
pub struct Leadership {
    changes: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
}

/// Starts competing for the Lease `name` in `namespace` as `identity`.
pub async fn elect(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    duration: Duration,
) -> kube_lease_manager::Result<Leadership> {
    let seconds = duration.as_secs().max(3);
    // Renew a third of the way before expiry: the grace is the tolerated clock skew.
    let params = LeaseParams::new(identity, seconds, (seconds / 3).max(1));
    let manager = LeaseManagerBuilder::new(client, name)
        .with_namespace(namespace)
        .with_parameters(params)
        .build()
        .await?;
    let (changes, task) = manager.watch().await;
    Ok(Leadership { changes, task })
}

impl Leadership {
    /// Waits until this replica leads.
    pub async fn acquired(&mut self) {
        while !*self.changes.borrow_and_update() {
            if self.changes.changed().await.is_err() {
                // The manager stopped: it will not lead. Wait forever (shutdown ends us).
                futures::future::pending::<()>().await;
            }
        }
    }

    /// Resolves when this replica stops leading.
    pub async fn lost(&mut self) {
        while *self.changes.borrow_and_update() {
            if self.changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Gives the Lease up, so a standby takes over at once.
    pub async fn release(self) {
        drop(self.changes);
        if let Ok(Ok(manager)) = self.task.await
            && let Err(e) = manager.release().await
        {
            tracing::warn!(error = %e, "could not release the leader Lease");
        }
    }
}
