//! Leader election on a Lease (kube-lease-manager), so that two replicas never both act.
//!
//! The manager renews the Lease; this module also fences: it checks the Lease itself, and
//! declares leadership lost when the last renewal it can see is about to expire — so a leader
//! whose renewals fail stops before a standby may take over, even if the manager never says so.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// Leadership, as it changes.
pub struct Leadership {
    changes: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
    leases: Api<Lease>,
    name: String,
    identity: String,
    /// Stop leading this long after the last renewal seen: before the Lease expires.
    valid_for: Duration,
    /// How long the Lease holds after its last renewal: no one else leads before.
    duration: Duration,
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
    // The manager renews `grace` before expiry; the fence fires halfway through that grace.
    let grace = (seconds / 3).max(1);
    let params = LeaseParams::new(identity, seconds, grace);
    let manager = LeaseManagerBuilder::new(client.clone(), name)
        .with_namespace(namespace)
        .with_parameters(params)
        .build()
        .await?;
    let (changes, task) = manager.watch().await;
    Ok(Leadership {
        changes,
        task,
        leases: Api::namespaced(client, namespace),
        name: name.to_string(),
        identity: identity.to_string(),
        valid_for: Duration::from_millis(seconds * 1000 - grace * 500),
        duration: Duration::from_secs(seconds),
    })
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

    /// Resolves when this replica stops leading: the manager says so, or the fence does. With
    /// the time until its Lease expires, when no one else can lead before: what is pending may
    /// be written until then.
    pub async fn lost(&mut self) -> Option<Instant> {
        let changes = &mut self.changes;
        let said = async {
            while *changes.borrow_and_update() {
                if changes.changed().await.is_err() {
                    return;
                }
            }
        };
        let fence = fence(
            &self.leases,
            &self.name,
            &self.identity,
            self.valid_for,
            self.duration,
        );
        tokio::select! {
            () = said => None,
            expiry = fence => expiry,
        }
    }

    /// Gives the Lease up (the manager releases it when told to stop), so a standby can take
    /// it without waiting for it to expire.
    pub async fn release(self) {
        drop(self.changes);
        match self.task.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the leader Lease manager failed"),
            Err(e) => tracing::warn!(error = %e, "the leader Lease manager task failed"),
        }
    }
}

/// Returns once the Lease is no longer held by `identity` (`None`), or its last renewal is older
/// than `valid_for` (when it expires: `duration` after that renewal). Counted on this process's
/// clock, which wrote it; reads that fail count as nothing seen.
async fn fence(
    leases: &Api<Lease>,
    name: &str,
    identity: &str,
    valid_for: Duration,
    duration: Duration,
) -> Option<Instant> {
    let mut confirmed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok(lease) = leases.get(name).await {
            let spec = lease.spec.unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(identity) {
                tracing::error!(
                    holder = spec.holder_identity,
                    "the leader Lease has another holder"
                );
                return None;
            }
            if let Some(renewed) = spec.renew_time {
                let age = jiff::Timestamp::now()
                    .duration_since(renewed.0)
                    .unsigned_abs();
                confirmed = tokio::time::Instant::now()
                    .checked_sub(age)
                    .unwrap_or(confirmed)
                    .max(confirmed);
            }
        }
        if confirmed.elapsed() > valid_for {
            tracing::error!(since = ?confirmed.elapsed(), "the leader Lease was not renewed in time");
            return Some(confirmed + duration);
        }
    }
}
