//! What a run measured, and the table comparing two runs.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::audit::{self, Requests};

/// The figures of one controller's run.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Measured {
    pub controller: String,
    pub agents: usize,
    pub storm_agents: usize,
    pub storm_s: f64,
    /// The storm's backoff before each restart, if not at once (`STORM_BACKOFF`).
    #[serde(default)]
    pub storm_backoff: Option<String>,
    pub quiet_s: f64,
    /// Agents with a pod seen Running.
    pub pods_running: usize,
    /// From the first Agent create to the last pod Running; none if not all ran.
    pub converge_s: Option<f64>,
    /// Agent created → its first pod created, by the API server's clock (the audit log), for
    /// this many Agents.
    pub create_to_pod_timed: usize,
    pub create_to_pod_p50_ms: Option<f64>,
    pub create_to_pod_p99_ms: Option<f64>,
    /// Agent's create returned → its first pod seen by the benchmark's pod watch.
    pub seen_pod_p50_ms: Option<f64>,
    pub seen_pod_p99_ms: Option<f64>,
    pub converge_cpu_s: f64,
    pub rss_converged_mib: f64,
    pub converge_requests: Requests,
    pub quiet_writes: u64,
    pub restarts: u64,
    /// Failures in the storm's window, and those still unreplaced at its end (timed as if
    /// replaced then: a lower bound).
    pub failures: u64,
    pub unreplaced: u64,
    pub replace_p50_ms: Option<f64>,
    pub replace_p90_ms: Option<f64>,
    pub replace_p99_ms: Option<f64>,
    /// Agents created during the storm (not crashing): created → first pod created, by the
    /// API server's clock, for `storm_newcomers_timed` of the `storm_newcomers`.
    pub storm_newcomers: usize,
    pub storm_newcomers_timed: usize,
    pub storm_newcomer_p50_ms: Option<f64>,
    pub storm_newcomer_max_ms: Option<f64>,
    pub storm_requests: Requests,
    pub storm_cpu_s: f64,
    /// The API server's and etcd's CPU seconds during the storm (a local control plane).
    #[serde(default)]
    pub storm_apiserver_cpu_s: Option<f64>,
    #[serde(default)]
    pub storm_etcd_cpu_s: Option<f64>,
    pub cpu_total_s: f64,
    pub rss_peak_mib: f64,
}

/// The nearest-rank percentile `p` (0..1) of `samples`, in milliseconds.
pub fn percentile_ms(samples: &[Duration], p: f64) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((p * sorted.len() as f64).ceil() as usize).max(1);
    sorted.get(rank - 1).map(|d| d.as_secs_f64() * 1000.0)
}

fn total(requests: &Requests) -> u64 {
    requests.values().sum()
}

/// Requests per unit, as "9.1 (3.6 create events, 2.8 patch agents/status, ...)".
fn per(requests: &Requests, units: f64) -> String {
    if units <= 0.0 {
        return "—".into();
    }
    let mut parts: Vec<(&String, &u64)> = requests.iter().collect();
    parts.sort_by(|a, b| b.1.cmp(a.1));
    let detail: Vec<String> = parts
        .iter()
        .map(|(what, n)| format!("{} {what}", round(**n as f64 / units)))
        .collect();
    format!(
        "{} ({})",
        round(total(requests) as f64 / units),
        detail.join(", ")
    )
}

fn round(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn ms(x: Option<f64>) -> String {
    match x {
        None => "—".into(),
        Some(x) if x >= 1000.0 => format!("{:.2} s", x / 1000.0),
        Some(x) => format!("{x:.0} ms"),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "—".into(),
    }
}

/// The one table: operator against bare baseline, with ratios.
pub fn table(op: &Measured, bare: &Measured) -> String {
    let mut out = String::new();
    let mut row = |what: &str, a: String, b: String, r: String| {
        let _ = writeln!(out, "| {what} | {a} | {b} | {r} |");
    };
    let num = |x: f64| Some(x);
    row(
        &format!("**{} agents**", op.agents),
        "agent-supervisor".into(),
        "bare controller".into(),
        "ratio".into(),
    );
    out.push_str("|---|---|---|---|\n");
    let mut row = |what: &str, a: String, b: String, r: String| {
        let _ = writeln!(out, "| {what} | {a} | {b} | {r} |");
    };
    row(
        "pods Running / Agents",
        format!("{} / {}", op.pods_running, op.agents),
        format!("{} / {}", bare.pods_running, bare.agents),
        String::new(),
    );
    let secs = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.1} s"));
    row(
        "all pods Running after the Agents are created",
        secs(op.converge_s),
        secs(bare.converge_s),
        ratio(op.converge_s, bare.converge_s),
    );
    for (what, a, b) in [
        (
            "Agent created → its pod created, p50",
            op.create_to_pod_p50_ms,
            bare.create_to_pod_p50_ms,
        ),
        (
            "Agent created → its pod created, p99",
            op.create_to_pod_p99_ms,
            bare.create_to_pod_p99_ms,
        ),
        (
            "Agent created → its pod seen by a watch, p50",
            op.seen_pod_p50_ms,
            bare.seen_pod_p50_ms,
        ),
        ("p99", op.seen_pod_p99_ms, bare.seen_pod_p99_ms),
    ] {
        row(what, ms(a), ms(b), ratio(a, b));
    }
    row(
        "CPU seconds to converge",
        format!("{:.2}", op.converge_cpu_s),
        format!("{:.2}", bare.converge_cpu_s),
        ratio(num(op.converge_cpu_s), num(bare.converge_cpu_s)),
    );
    row(
        "RSS after converging",
        format!("{:.0} MiB", op.rss_converged_mib),
        format!("{:.0} MiB", bare.rss_converged_mib),
        ratio(num(op.rss_converged_mib), num(bare.rss_converged_mib)),
    );
    row(
        "API requests per Agent to converge",
        per(&op.converge_requests, op.agents as f64),
        per(&bare.converge_requests, bare.agents as f64),
        ratio(
            num(total(&op.converge_requests) as f64),
            num(total(&bare.converge_requests) as f64),
        ),
    );
    let per_minute = |m: &Measured| m.quiet_writes as f64 * 60.0 / m.quiet_s;
    row(
        &format!(
            "writes per minute in steady state ({:.0} s after converging)",
            op.quiet_s
        ),
        format!("{:.1}", per_minute(op)),
        format!("{:.1}", per_minute(bare)),
        String::new(),
    );
    row(
        &format!(
            "**{} agents crash-looping for {:.0} s** ({}, no breaker, no limits)",
            op.storm_agents,
            op.storm_s,
            op.storm_backoff.as_deref().map_or_else(
                || "Immediate".to_string(),
                |d| format!("the operator backing off {d}, the baseline not")
            )
        ),
        String::new(),
        String::new(),
        String::new(),
    );
    row(
        "restarts done",
        op.restarts.to_string(),
        bare.restarts.to_string(),
        ratio(num(op.restarts as f64), num(bare.restarts as f64)),
    );
    for (what, a, b) in [
        (
            "pod Failed → next pod created, p50",
            op.replace_p50_ms,
            bare.replace_p50_ms,
        ),
        ("p90", op.replace_p90_ms, bare.replace_p90_ms),
        ("p99", op.replace_p99_ms, bare.replace_p99_ms),
    ] {
        row(what, ms(a), ms(b), ratio(a, b));
    }
    row(
        "failures of the storm still unreplaced up to 10 s after it (timed as replaced then)",
        format!("{} of {}", op.unreplaced, op.failures),
        format!("{} of {}", bare.unreplaced, bare.failures),
        String::new(),
    );
    for (what, a, b) in [
        (
            &*format!(
                "{} Agents created during the storm, one at a time: created → pod created, p50",
                op.storm_newcomers_timed
            ),
            op.storm_newcomer_p50_ms,
            bare.storm_newcomer_p50_ms,
        ),
        (
            "slowest",
            op.storm_newcomer_max_ms,
            bare.storm_newcomer_max_ms,
        ),
    ] {
        row(what, ms(a), ms(b), ratio(a, b));
    }
    let op_per = total(&op.storm_requests) as f64 / op.restarts.max(1) as f64;
    let bare_per = total(&bare.storm_requests) as f64 / bare.restarts.max(1) as f64;
    row(
        "API requests per restart",
        per(&op.storm_requests, op.restarts as f64),
        per(&bare.storm_requests, bare.restarts as f64),
        ratio(num(op_per), num(bare_per)),
    );
    row(
        "CPU seconds during the storm",
        format!("{:.2}", op.storm_cpu_s),
        format!("{:.2}", bare.storm_cpu_s),
        ratio(num(op.storm_cpu_s), num(bare.storm_cpu_s)),
    );
    for (what, a, b) in [
        (
            "the API server's CPU seconds during the storm",
            op.storm_apiserver_cpu_s,
            bare.storm_apiserver_cpu_s,
        ),
        (
            "etcd's CPU seconds during the storm",
            op.storm_etcd_cpu_s,
            bare.storm_etcd_cpu_s,
        ),
    ] {
        let seconds = |s: Option<f64>| s.map_or("—".into(), |s| format!("{s:.2}"));
        row(what, seconds(a), seconds(b), ratio(a, b));
    }
    row(
        "**the whole run**",
        String::new(),
        String::new(),
        String::new(),
    );
    row(
        "CPU seconds",
        format!("{:.2}", op.cpu_total_s),
        format!("{:.2}", bare.cpu_total_s),
        ratio(num(op.cpu_total_s), num(bare.cpu_total_s)),
    );
    row(
        "peak RSS",
        format!("{:.0} MiB", op.rss_peak_mib),
        format!("{:.0} MiB", bare.rss_peak_mib),
        ratio(num(op.rss_peak_mib), num(bare.rss_peak_mib)),
    );
    out
}

/// What is missing or absurd in one run's figures (a harness fault, never a speed).
pub fn problems(m: &Measured) -> Vec<String> {
    let who = &m.controller;
    let mut out = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            out.push(format!("{who}: {what}"));
        }
    };
    check(m.pods_running == m.agents, "not every Agent's pod ran");
    check(m.converge_s.is_some_and(|s| s > 0.0), "no converge time");
    check(
        m.create_to_pod_timed == m.agents,
        "not every Agent's create and first pod's create found in the audit log",
    );
    check(m.create_to_pod_p50_ms.is_some(), "no Agent → pod latency");
    check(m.seen_pod_p50_ms.is_some(), "no Agent → pod seen latency");
    check(
        m.create_to_pod_p99_ms >= m.create_to_pod_p50_ms && m.seen_pod_p99_ms >= m.seen_pod_p50_ms,
        "p99 below p50",
    );
    check(m.converge_cpu_s > 0.0, "no CPU time while converging");
    check(
        m.rss_converged_mib > 1.0 && m.rss_peak_mib >= m.rss_converged_mib,
        "no memory figures",
    );
    check(
        audit::writes(&m.converge_requests) >= m.agents as u64,
        "fewer writes in the audit log than pods created while converging",
    );
    check(m.restarts > 0, "no restarts in the storm");
    check(
        m.storm_newcomers > 0
            && m.storm_newcomers_timed == m.storm_newcomers
            && m.storm_newcomer_max_ms >= m.storm_newcomer_p50_ms,
        "not every Agent created during the storm got its pod (by the audit log)",
    );
    check(m.replace_p50_ms.is_some(), "no Failed → next pod latency");
    check(
        m.replace_p50_ms <= m.replace_p90_ms && m.replace_p90_ms <= m.replace_p99_ms,
        "latency percentiles out of order",
    );
    check(
        audit::writes(&m.storm_requests) >= m.restarts,
        "fewer writes in the audit log than restarts in the storm",
    );
    check(m.cpu_total_s >= m.converge_cpu_s, "CPU time went backwards");
    check(
        [m.storm_apiserver_cpu_s, m.storm_etcd_cpu_s]
            .iter()
            .all(|s| s.is_none_or(|s| s > 0.0)),
        "no CPU time of the control plane during the storm",
    );
    out
}
