//! `bench-scale seconds`: one namespace's restarts and requests second by second, from the audit
//! log a run kept (`BENCH_KEEP_LOGS=1`). Where the benchmark's table gives a storm's percentiles,
//! this tells which seconds made them: how fast the pods were replaced in each, how fast the API
//! server served the pod creates, and who sent what. When the API server's log is beside the
//! audit log and it ran with `GODEBUG=gctrace=1`, each second also says how long its garbage
//! collector was marking in it.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;

use crate::audit;
use crate::report::percentile_ms;

/// What happened in one second (by the API server's clock).
#[derive(Default)]
struct Second {
    /// Last status write of a pod (kwok marking it Failed) → the create of the pod after it,
    /// for the creates that completed in this second.
    replaced: Vec<Duration>,
    /// Received → completed, for the pod creates that succeeded in this second.
    create_served: Vec<Duration>,
    /// Requests completed in this second, by `"<client> <verb> <resource>"`.
    requests: BTreeMap<String, u64>,
}

/// `<agent>-<attempt>` → `<agent>-<attempt - 1>`: the pod a create replaces, if any.
fn predecessor(pod: &str) -> Option<String> {
    let (agent, attempt) = pod.rsplit_once('-')?;
    let attempt: u32 = attempt.parse().ok()?;
    (attempt > 1).then(|| format!("{agent}-{}", attempt - 1))
}

/// The client behind a user agent: its first word (`agent-supervisor`, `bare-controller`,
/// `kwok`, `kube-scheduler`...).
fn client(user_agent: &str) -> &str {
    user_agent.split(['/', ' ']).next().unwrap_or("-")
}

/// A `GODEBUG=gctrace=1` line's cycle: when it began (seconds since the process started), how
/// long it marked, how long it took in all (seconds).
fn gc_cycle(line: &str) -> Option<(f64, f64, f64)> {
    let rest = line.strip_prefix("gc ")?;
    let (_, rest) = rest.split_once(" @")?;
    let (at, rest) = rest.split_once("s ")?;
    let (_, rest) = rest.split_once(": ")?;
    let (clock, _) = rest.split_once(" ms clock")?;
    let phases: Vec<f64> = clock.split('+').filter_map(|p| p.parse().ok()).collect();
    let [sweep_term, mark, mark_term] = phases[..] else {
        return None;
    };
    Some((
        at.parse().ok()?,
        mark / 1000.0,
        (sweep_term + mark + mark_term) / 1000.0,
    ))
}

/// How long the API server's garbage collector was marking in each second (ms), from its log in
/// `dir` (`kube-apiserver.log`, written with `GODEBUG=gctrace=1`); empty without one. A trace
/// line gives its cycle's start in seconds since the process started (`gc 41 @58.299s 3%:
/// 0.17+380+0.015 ms clock, ...`: the second of the three clock phases is the concurrent mark);
/// the process started the end of the last cycle traced before its first klog line (`I1127
/// 23:25:08.995238 ...`, local time, the year taken from `year`) before that line.
fn gc_marking(dir: &Path, year: i16) -> BTreeMap<i64, f64> {
    let mut marking = BTreeMap::new();
    let Ok(log) = std::fs::read_to_string(dir.join("kube-apiserver.log")) else {
        return marking;
    };
    let klog_time = |line: &str| -> Option<Timestamp> {
        let head = line.get(1..21)?;
        let month: i8 = head.get(0..2)?.parse().ok()?;
        let day: i8 = head.get(2..4)?.parse().ok()?;
        let time: jiff::civil::Time = head.get(5..)?.parse().ok()?;
        let date = jiff::civil::Date::new(year, month, day).ok()?;
        date.to_datetime(time)
            .to_zoned(jiff::tz::TimeZone::system())
            .ok()
            .map(|z| z.timestamp())
    };
    let mut ended_before_first_line = 0.0;
    let mut start = None;
    let mut cycles = Vec::new();
    for line in log.lines() {
        if let Some((at, mark, whole)) = gc_cycle(line) {
            if start.is_none() {
                ended_before_first_line = at + whole;
            }
            cycles.push((at, mark));
        } else if start.is_none() && line.starts_with(['I', 'W', 'E', 'F']) {
            start =
                klog_time(line).map(|t| t.as_duration().as_secs_f64() - ended_before_first_line);
        }
    }
    let Some(start) = start else {
        return marking;
    };
    for (at, mark) in cycles {
        // Spread over the seconds it spans.
        let (mut from, to) = (start + at, start + at + mark);
        while from < to {
            let second = from.floor();
            let until = to.min(second + 1.0);
            *marking.entry(second as i64).or_default() += (until - from) * 1000.0;
            from = until;
        }
    }
    marking
}

/// The per-second table of `namespace`, from its first replaced pod to its last.
pub fn table(dir: &Path, namespace: &str) -> anyhow::Result<String> {
    let mut last_status: HashMap<String, Timestamp> = HashMap::new();
    let mut seconds: BTreeMap<i64, Second> = BTreeMap::new();
    audit::each_request(dir, &format!("\"namespace\":\"{namespace}\""), |event| {
        let object = &event["objectRef"];
        if object["namespace"] != namespace {
            return;
        }
        let (Some(done), Some(received)) = (
            audit::timestamp(event, "stageTimestamp"),
            audit::timestamp(event, "requestReceivedTimestamp"),
        ) else {
            return;
        };
        let second = seconds.entry(done.as_second()).or_default();
        let verb = event["verb"].as_str().unwrap_or("-");
        let resource = object["resource"].as_str().unwrap_or("-");
        let subresource = object["subresource"].as_str();
        let name = object["name"].as_str().unwrap_or_default();
        let ok = event["responseStatus"]["code"]
            .as_u64()
            .is_some_and(|code| (200..300).contains(&code));
        match (resource, subresource, verb) {
            ("pods", Some("status"), "patch" | "update") if ok => {
                last_status.insert(name.to_string(), done);
            }
            ("pods", None, "create") if ok => {
                second
                    .create_served
                    .push(done.duration_since(received).unsigned_abs());
                if let Some(failed) = predecessor(name).and_then(|p| last_status.get(&p)) {
                    second
                        .replaced
                        .push(done.duration_since(*failed).unsigned_abs());
                }
            }
            _ => {}
        }
        let resource = match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        };
        let who = client(event["userAgent"].as_str().unwrap_or("-"));
        *second
            .requests
            .entry(format!("{who} {verb} {resource}"))
            .or_default() += 1;
    })?;
    let restarting = |s: &Second| !s.replaced.is_empty();
    let (Some(first), Some(last)) = (
        seconds.iter().find(|(_, s)| restarting(s)).map(|(t, _)| *t),
        seconds
            .iter()
            .rev()
            .find(|(_, s)| restarting(s))
            .map(|(t, _)| *t),
    ) else {
        anyhow::bail!(
            "no pod of {namespace} was replaced in the audit log of {}",
            dir.display()
        );
    };
    let year = Timestamp::from_second(first)?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .year();
    let marking = gc_marking(dir, year);
    let ms = |samples: &[Duration], p: f64| {
        percentile_ms(samples, p).map_or("—".to_string(), |ms| format!("{ms:.0}"))
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| s | at (UTC) | restarts | Failed → next pod p50 / p90 ms | pod create served p50 ms | API server GC marking ms | requests | most sent |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    let empty = Second::default();
    for t in first..=last {
        let s = seconds.get(&t).unwrap_or(&empty);
        let mut most: Vec<(&String, &u64)> = s.requests.iter().collect();
        most.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let most: Vec<String> = most
            .iter()
            .take(6)
            .map(|(what, n)| format!("{n} {what}"))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} / {} | {} | {} | {} | {} |",
            t - first,
            Timestamp::from_second(t)
                .map_or("—".to_string(), |at| at.strftime("%H:%M:%S").to_string()),
            s.replaced.len(),
            ms(&s.replaced, 0.5),
            ms(&s.replaced, 0.9),
            ms(&s.create_served, 0.5),
            match marking.is_empty() {
                true => "—".to_string(),
                false => format!("{:.0}", marking.get(&t).unwrap_or(&0.0)),
            },
            s.requests.values().sum::<u64>(),
            most.join(", ")
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_replaces_the_attempt_before_it() {
        assert_eq!(predecessor("storm-7-3").as_deref(), Some("storm-7-2"));
        assert_eq!(predecessor("storm-7-1"), None);
        assert_eq!(predecessor("storm"), None);
    }

    #[test]
    fn a_gc_trace_line_gives_its_cycle() {
        let line = "gc 41 @58.299s 3%: 0.17+380+0.015 ms clock, 0.35+7.3/189/190+0.031 ms cpu, \
                    366->397->218 MB, 431 MB goal, 4 MB stacks, 0 MB globals, 2 P";
        let (at, mark, whole) = gc_cycle(line).unwrap();
        assert_eq!(at, 58.299);
        assert_eq!(mark, 0.38);
        assert!((whole - 0.380185).abs() < 1e-9);
        assert_eq!(
            gc_cycle("I1127 23:25:08.995238   25561 flags.go:64] FLAG"),
            None
        );
    }

    #[test]
    fn the_client_is_the_user_agent_first_word() {
        assert_eq!(client("agent-supervisor/0.1.0"), "agent-supervisor");
        assert_eq!(
            client("kube-scheduler/v1.36.3 (linux/amd64) kubernetes/abc"),
            "kube-scheduler"
        );
    }
}
