//! Logs through `tracing`: JSON for machines or text for people; `RUST_LOG` filters.

use tracing_subscriber::EnvFilter;

use super::config::LogFormat;

pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,kube=warn"));
    // Logs go to stderr; stdout stays free for anything a user pipes.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_current_span(true).init(),
        LogFormat::Human => builder.init(),
    }
}
