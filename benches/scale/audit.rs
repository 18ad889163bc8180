//! Reads the API server's audit log (`audit*.log` in a directory, so rotated files count too):
//! one client's requests by verb and resource within a time window, and when objects were
//! created, by the API server's clock.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;

use jiff::Timestamp;

/// Requests by `"<verb> <resource>[/<subresource>]"`, with ` (<code>)` when refused.
pub type Requests = BTreeMap<String, u64>;

/// Calls `visit` with every completed request of the log (a watch's ResponseStarted is not one)
/// whose line contains `needle`, the rotated files first (their names sort before `audit.log`),
/// each in the order the API server wrote it.
pub fn each_request(
    dir: &Path,
    needle: &str,
    mut visit: impl FnMut(&serde_json::Value),
) -> anyhow::Result<()> {
    let mut paths = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    paths.sort();
    for path in paths {
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
            if !line.contains(needle) {
                continue;
            }
            let event: serde_json::Value = serde_json::from_str(&line)?;
            if event["stage"] == "ResponseComplete" || event["stage"] == "Panic" {
                visit(&event);
            }
        }
    }
    Ok(())
}

pub fn timestamp(event: &serde_json::Value, field: &str) -> Option<Timestamp> {
    event[field].as_str().and_then(|t| t.parse().ok())
}

/// The requests in `namespace` of clients whose user agent starts with `user_agent`, received
/// in `[from, to)`, except those on objects whose name starts with `except` (when given).
pub fn count(
    dir: &Path,
    user_agent: &str,
    namespace: &str,
    (from, to): (Timestamp, Timestamp),
    except: Option<&str>,
) -> anyhow::Result<Requests> {
    let mut requests = Requests::new();
    each_request(dir, &format!("\"userAgent\":\"{user_agent}"), |event| {
        let Some(at) = timestamp(event, "requestReceivedTimestamp") else {
            return;
        };
        let object = &event["objectRef"];
        if at < from || at >= to || object["namespace"] != namespace {
            return;
        }
        let name = object["name"].as_str().unwrap_or_default();
        if except.is_some_and(|prefix| name.starts_with(prefix)) {
            return;
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
    })?;
    Ok(requests)
}

/// When each `resource` object of `namespace` was created, by whoever: the moment the API
/// server completed the create that succeeded (its `stageTimestamp`), by object name.
pub fn created(
    dir: &Path,
    namespace: &str,
    resource: &str,
) -> anyhow::Result<HashMap<String, Timestamp>> {
    let mut created = HashMap::new();
    each_request(dir, &format!("\"namespace\":\"{namespace}\""), |event| {
        let object = &event["objectRef"];
        let succeeded = event["responseStatus"]["code"]
            .as_u64()
            .is_some_and(|code| (200..300).contains(&code));
        if event["verb"] != "create"
            || object["resource"] != resource
            || object["subresource"].is_string()
            || object["namespace"] != namespace
            || !succeeded
        {
            return;
        }
        if let (Some(name), Some(at)) =
            (object["name"].as_str(), timestamp(event, "stageTimestamp"))
        {
            created.insert(name.to_string(), at);
        }
    })?;
    Ok(created)
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
