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
/// clock, which wrote it; reads that fail count as nothing seen, and a read is given only the
/// time left before `valid_for` is up: an API server that never answers cannot hold the fence
/// past it.
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
        let left = valid_for.saturating_sub(confirmed.elapsed());
        if let Ok(Ok(lease)) = tokio::time::timeout(left, leases.get(name)).await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_api_server_that_never_answers_cannot_hold_the_fence() {
        // Accepts connections and never answers a byte.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let url = format!("http://{address}").parse().unwrap();
        let client = Client::try_from(kube::Config::new(url)).unwrap();
        let leases: Api<Lease> = Api::namespaced(client, "default");
        let (valid_for, duration) = (Duration::from_secs(2), Duration::from_secs(3));
        let started = Instant::now();
        let fenced = tokio::time::timeout(
            Duration::from_secs(20),
            fence(&leases, "leader", "me", valid_for, duration),
        )
        .await
        .expect("the fence fired though its reads hang");
        assert!(fenced.is_some(), "it says when the Lease expires");
        assert!(started.elapsed() >= valid_for);
        silent.abort();
    }
}
