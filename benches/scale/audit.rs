//! Reads the API server's audit log (`audit*.log` in a directory, so rotated files count too):
//! one client's requests by verb and resource within a time window, and when objects were
//! created, by the API server's clock.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

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
            visit_line(&line?, needle, &mut visit)?;
        }
    }
    Ok(())
}

/// Hands `visit` the audit event on `line` if the line holds `needle` and the event is a
/// completed (or failed) request.
pub fn visit_line(
    line: &str,
    needle: &str,
    visit: &mut impl FnMut(&serde_json::Value),
) -> Result<(), serde_json::Error> {
    if !line.contains(needle) {
        return Ok(());
    }
    let event: serde_json::Value = serde_json::from_str(line)?;
    if event["stage"] == "ResponseComplete" || event["stage"] == "Panic" {
        visit(&event);
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
    first_done(dir, namespace, &["create"], resource, None)
}

/// When each object of `namespace` had its status first written, by whoever: the moment the API
/// server completed its first status write that succeeded (a patch or an update of
/// `<resource>/status`), by object name.
pub fn first_status_written(
    dir: &Path,
    namespace: &str,
    resource: &str,
) -> anyhow::Result<HashMap<String, Timestamp>> {
    first_done(
        dir,
        namespace,
        &["patch", "update"],
        resource,
        Some("status"),
    )
}

/// When the API server first completed, for each object of `namespace`, a request that
/// succeeded with one of `verbs` on `resource` (or its `subresource`), by object name.
fn first_done(
    dir: &Path,
    namespace: &str,
    verbs: &[&str],
    resource: &str,
    subresource: Option<&str>,
) -> anyhow::Result<HashMap<String, Timestamp>> {
    let mut done = HashMap::new();
    each_request(dir, &format!("\"namespace\":\"{namespace}\""), |event| {
        let object = &event["objectRef"];
        if !event["verb"].as_str().is_some_and(|v| verbs.contains(&v))
            || object["resource"] != resource
            || object["subresource"].as_str() != subresource
            || object["namespace"] != namespace
            || !succeeded(event)
        {
            return;
        }
        if let (Some(name), Some(at)) =
            (object["name"].as_str(), timestamp(event, "stageTimestamp"))
        {
            let first = done.entry(name.to_string()).or_insert(at);
            *first = (*first).min(at);
        }
    })?;
    Ok(done)
}

/// Whether the request succeeded (a 2xx answer).
fn succeeded(event: &serde_json::Value) -> bool {
    event["responseStatus"]["code"]
        .as_u64()
        .is_some_and(|code| (200..300).contains(&code))
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

/// Where a storm pod's time went, by the API server's clock: its create, its binding by the
/// scheduler, and the simulated kubelet's first two status patches (kwok runs it, then fails
/// it), each the moment the API server completed the request; and how long kwok's status
/// patches waited on the API server (received → completed).
#[derive(Debug, Default)]
pub struct PodSteps {
    /// Created → bound, bound → Running, Running → Failed, for the pods that took each step.
    pub bound: Vec<Duration>,
    pub running: Vec<Duration>,
    pub failed: Vec<Duration>,
    /// kwok's pod status patches, received → completed.
    pub kwok_patch: Vec<Duration>,
}

/// The steps of the pods of `namespace` created in `[from, to)`, except those whose name starts
/// with `except` (when given), and kwok's status patches received in `[from, to)`.
pub fn pod_steps(
    dir: &Path,
    namespace: &str,
    (from, to): (Timestamp, Timestamp),
    except: Option<&str>,
) -> anyhow::Result<PodSteps> {
    #[derive(Default)]
    struct Pod {
        created: Option<Timestamp>,
        bound: Option<Timestamp>,
        kwok: Vec<Timestamp>,
    }
    let mut pods: HashMap<String, Pod> = HashMap::new();
    let mut steps = PodSteps::default();
    each_request(dir, &format!("\"namespace\":\"{namespace}\""), |event| {
        let object = &event["objectRef"];
        if object["resource"] != "pods" || object["namespace"] != namespace || !succeeded(event) {
            return;
        }
        let (Some(name), Some(received), Some(done)) = (
            object["name"].as_str(),
            timestamp(event, "requestReceivedTimestamp"),
            timestamp(event, "stageTimestamp"),
        ) else {
            return;
        };
        if except.is_some_and(|prefix| name.starts_with(prefix)) {
            return;
        }
        let kwok = event["userAgent"]
            .as_str()
            .is_some_and(|agent| agent.starts_with("kwok"));
        let pod = pods.entry(name.to_string()).or_default();
        match (event["verb"].as_str(), object["subresource"].as_str()) {
            (Some("create"), None) if (from..to).contains(&done) => pod.created = Some(done),
            (Some("create"), Some("binding")) => pod.bound = Some(done),
            (Some("patch"), Some("status")) if kwok => {
                pod.kwok.push(done);
                if (from..to).contains(&received) {
                    steps.kwok_patch.push(between(received, done));
                }
            }
            _ => {}
        }
    })?;
    for pod in pods.values() {
        let (Some(created), Some(bound)) = (pod.created, pod.bound) else {
            continue;
        };
        steps.bound.push(between(created, bound));
        if let Some(running) = pod.kwok.first() {
            steps.running.push(between(bound, *running));
        }
        if let [running, failed, ..] = pod.kwok[..] {
            steps.failed.push(between(running, failed));
        }
    }
    Ok(steps)
}

/// `from` → `to`, none when `to` is earlier.
pub fn between(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One completed request as the audit log has it.
    fn line(verb: &str, sub: Option<&str>, name: &str, agent: &str, at: (&str, &str)) -> String {
        let mut object = serde_json::json!({"resource": "pods", "namespace": "ns", "name": name});
        if let Some(sub) = sub {
            object["subresource"] = sub.into();
        }
        serde_json::json!({
            "stage": "ResponseComplete", "verb": verb, "userAgent": agent, "objectRef": object,
            "responseStatus": {"code": 201},
            "requestReceivedTimestamp": format!("2026-11-29T05:00:{}Z", at.0),
            "stageTimestamp": format!("2026-11-29T05:00:{}Z", at.1),
        })
        .to_string()
    }

    #[test]
    fn a_pod_s_steps_are_its_binding_and_kwok_s_first_two_patches() {
        let dir = std::env::temp_dir().join(format!("pod-steps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kwok = "kwok/v0.8.0";
        let log = [
            // Created before the window: not a storm pod.
            line("create", None, "a-1", "op", ("00.000", "00.010")),
            line("create", None, "a-2", "op", ("10.000", "10.050")),
            line(
                "create",
                Some("binding"),
                "a-2",
                "sched",
                ("10.100", "10.150"),
            ),
            line("patch", Some("status"), "a-2", kwok, ("11.000", "11.150")),
            line("patch", Some("status"), "a-2", kwok, ("13.000", "13.150")),
            line("patch", Some("status"), "a-2", kwok, ("20.000", "20.020")),
            // Bound, never run in the log.
            line("create", None, "b-7", "op", ("12.000", "12.000")),
            line(
                "create",
                Some("binding"),
                "b-7",
                "sched",
                ("12.500", "12.500"),
            ),
            // Left out by name.
            line("create", None, "newcomer-0-1", "op", ("12.000", "12.000")),
            line(
                "create",
                Some("binding"),
                "newcomer-0-1",
                "sched",
                ("14.000", "14.000"),
            ),
        ];
        std::fs::write(dir.join("audit.log"), log.join("\n") + "\n").unwrap();
        let window = (
            "2026-11-29T05:00:05Z".parse().unwrap(),
            "2026-11-29T05:00:30Z".parse().unwrap(),
        );
        let steps = pod_steps(&dir, "ns", window, Some("newcomer-")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let ms = |ms: &[u64]| {
            ms.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        let mut bound = steps.bound.clone();
        bound.sort();
        assert_eq!(bound, ms(&[100, 500]));
        assert_eq!(steps.running, ms(&[1000]));
        assert_eq!(
            steps.failed,
            ms(&[2000]),
            "the first two patches, not the last"
        );
        assert_eq!(steps.kwok_patch, ms(&[150, 150, 20]));
    }

    #[test]
    fn an_object_s_status_is_first_written_by_its_earliest_status_write_that_succeeded() {
        let dir = std::env::temp_dir().join(format!("first-status-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut refused = serde_json::from_str::<serde_json::Value>(&line(
            "patch",
            Some("status"),
            "b",
            "op",
            ("01.000", "01.100"),
        ))
        .unwrap();
        refused["responseStatus"]["code"] = 409.into();
        let log = [
            line("create", None, "a", "op", ("00.000", "00.010")),
            // Served after the next one, logged before it.
            line("patch", Some("status"), "a", "op", ("02.000", "09.000")),
            line("update", Some("status"), "a", "op", ("03.000", "03.500")),
            refused.to_string(),
            line("patch", None, "b", "op", ("01.500", "01.600")),
            line("patch", Some("status"), "b", "op", ("04.000", "04.200")),
            line("patch", Some("binding"), "c", "op", ("04.000", "04.200")),
        ];
        std::fs::write(dir.join("audit.log"), log.join("\n") + "\n").unwrap();
        let written = first_status_written(&dir, "ns", "pods").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let at = |s: &str| {
            format!("2026-11-29T05:00:{s}Z")
                .parse::<Timestamp>()
                .unwrap()
        };
        assert_eq!(written.len(), 2, "{written:?}");
        assert_eq!(written["a"], at("03.500"));
        assert_eq!(written["b"], at("04.200"));
    }
}
