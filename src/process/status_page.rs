//! Serves the status page, `/status` (HTML) and `/status.json`, on `--status-addr`: what the
//! controllers' caches hold now (`controller::watched`), made into the page by
//! `view::status_page`. Read-only, no script, nothing loaded from elsewhere.

use std::sync::Arc;

use jiff::Timestamp;

use crate::controller::watched::Watched;
use crate::view::status_page::{html, page};

/// The status server: GET `/status` and `/status.json`.
pub async fn serve(
    addr: std::net::SocketAddr,
    sources: Arc<Watched>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(
    std::net::SocketAddr,
    tokio::task::JoinHandle<std::io::Result<()>>,
)> {
    use axum::Router;
    use axum::extract::State;
    use axum::http::header;
    use axum::response::IntoResponse;
    use axum::routing::get;

    async fn status_html(State(sources): State<Arc<Watched>>) -> impl IntoResponse {
        let body = html(&page(&sources.snapshot(Timestamp::now())));
        (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
                ),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
    }
    async fn status_json(State(sources): State<Arc<Watched>>) -> impl IntoResponse {
        let body = serde_json::to_string(&page(&sources.snapshot(Timestamp::now())))
            .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
        (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
    }
    let app = Router::new()
        .route("/status", get(status_html))
        .route("/status.json", get(status_json))
        .with_state(sources);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    });
    Ok((bound, task))
}
