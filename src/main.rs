//! The agent-supervisor operator: wiring only.

use agent_supervisor::controller;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .init();
    let namespaces: Vec<String> = std::env::var("WATCH_NAMESPACES")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    let client = kube::Client::try_default().await?;
    let config = controller::Config {
        namespaces,
        ..controller::Config::default()
    };
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    controller::run(client, config, shutdown).await;
    Ok(())
}
