//! The HTTP server for probes and scraping: /healthz, /readyz, /metrics.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;

/// What the probes report. Ready: the API server answered, and every watch of the controllers
/// has had its first full list and is not failing.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
    watches: Mutex<BTreeMap<String, WatchHealth>>,
}

/// One watch, as readiness sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchHealth {
    /// Its first list completed.
    pub synced: bool,
    /// Errors since it last worked.
    pub failures: u32,
}

/// A watch is failing once this many of its attempts in a row have failed: one lost
/// connection, retried at once, is not worth taking the replica out of service.
const FAILING_AFTER: u32 = 2;

impl Health {
    /// Ready: the API server answered and this replica is leading or standing by.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// A watch that must sync before the replica is ready.
    pub fn watch_started(&self, name: &str) {
        self.watches()
            .insert(name.to_string(), WatchHealth::default());
    }

    /// The watch received something: it works (and, after `synced`, has listed everything).
    pub fn watch_ok(&self, name: &str, synced: bool) {
        let mut watches = self.watches();
        let watch = watches.entry(name.to_string()).or_default();
        watch.failures = 0;
        watch.synced |= synced;
    }

    /// The watch failed; it is retried with backoff.
    pub fn watch_failed(&self, name: &str) {
        let mut watches = self.watches();
        let watch = watches.entry(name.to_string()).or_default();
        watch.failures = watch.failures.saturating_add(1);
    }

    /// The watch stopped (its controllers shut down).
    pub fn watch_stopped(&self, name: &str) {
        self.watches().remove(name);
    }

    /// Whether the replica is ready, and if not, why.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.ready.load(Ordering::SeqCst) {
            return Err("not connected".to_string());
        }
        let watches = self.watches();
        let mut problems = watches.iter().filter_map(|(name, w)| {
            if w.failures >= FAILING_AFTER {
                Some(format!(
                    "watch of {name} failing ({} errors in a row)",
                    w.failures
                ))
            } else if !w.synced {
                Some(format!("watch of {name} not synced yet"))
            } else {
                None
            }
        });
        match problems.next() {
            None => Ok(()),
            Some(first) => Err(problems.fold(first, |all, p| format!("{all}; {p}"))),
        }
    }

    fn watches(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, WatchHealth>> {
        self.watches.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Clone)]
struct AppState {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

/// Binds `addr` and serves until `shutdown` resolves. Returns the bound address (port 0 picks
/// a free one) and the server task.
pub async fn serve(
    addr: SocketAddr,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { health, metrics });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    });
    Ok((bound, task))
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match state.health.readiness() {
        Ok(()) => (StatusCode::OK, "ok".to_string()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")),
    }
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_connected_and_every_watch_synced_and_working() {
        let health = Health::default();
        assert!(health.readiness().is_err(), "not connected yet");
        health.set_ready(true);
        assert_eq!(health.readiness(), Ok(()));
        health.watch_started("pods");
        health.watch_started("agents");
        assert!(health.readiness().unwrap_err().contains("pods not synced"));
        health.watch_ok("pods", true);
        health.watch_ok("agents", true);
        assert_eq!(health.readiness(), Ok(()));
        health.watch_failed("agents");
        assert_eq!(health.readiness(), Ok(()), "one error is retried at once");
        health.watch_failed("agents");
        assert!(health.readiness().unwrap_err().contains("agents failing"));
        health.watch_ok("agents", false);
        assert_eq!(health.readiness(), Ok(()), "synced stays synced");
        health.watch_stopped("agents");
        health.watch_stopped("pods");
        assert_eq!(health.readiness(), Ok(()));
    }
}
