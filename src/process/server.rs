//! The HTTP server for probes and scraping: /healthz, /readyz, /metrics.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::controller::health::Health;
use crate::controller::metrics::Metrics;

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
