//! Counts one client's requests in the API server's audit log (`audit*.log` in a directory, so
//! rotated files count too), by verb and resource, within a time window.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use jiff::Timestamp;

/// Requests by `"<verb> <resource>[/<subresource>]"`, with ` (<code>)` when refused.
pub type Requests = BTreeMap<String, u64>;

/// The requests in `namespace` of clients whose user agent starts with `user_agent`, received
/// in `[from, to)`.
pub fn count(
    dir: &Path,
    user_agent: &str,
    namespace: &str,
    from: Timestamp,
    to: Timestamp,
) -> anyhow::Result<Requests> {
    let needle = format!("\"userAgent\":\"{user_agent}");
    let mut requests = Requests::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !(name.starts_with("audit") && name.ends_with(".log")) {
            continue;
        }
        let file = std::io::BufReader::new(std::fs::File::open(&path)?);
        for line in file.lines() {
            let line = line?;
            if !line.contains(&needle) {
                continue;
            }
            let event: serde_json::Value = serde_json::from_str(&line)?;
            // One entry per request: its completion (a watch's ResponseStarted is not one).
            if event["stage"] != "ResponseComplete" && event["stage"] != "Panic" {
                continue;
            }
            let Some(at) = event["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
            else {
                continue;
            };
            if at < from || at >= to {
                continue;
            }
            let object = &event["objectRef"];
            if object["namespace"] != namespace {
                continue;
            }
            let mut resource = object["resource"].as_str().unwrap_or("-").to_string();
            if let Some(sub) = object["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            let verb = event["verb"].as_str().unwrap_or("-");
            // Refused requests are told apart: a conflict is a request spent for nothing.
            let code = event["responseStatus"]["code"].as_u64().unwrap_or(200);
            let key = match code {
                200..=299 => format!("{verb} {resource}"),
                _ => format!("{verb} {resource} ({code})"),
            };
            *requests.entry(key).or_default() += 1;
        }
    }
    Ok(requests)
}

/// How many of `requests` change something.
pub fn writes(requests: &Requests) -> u64 {
    requests
        .iter()
        .filter(|(key, _)| {
            let verb = key.split(' ').next().unwrap_or_default();
            matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        })
        .map(|(_, n)| n)
        .sum()
}
