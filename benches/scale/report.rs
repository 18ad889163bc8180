//! What a run measured, and the table comparing two runs.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::audit::{self, Requests};

/// The figures of one controller's run, or of its rounds pooled (`pool`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Measured {
    pub controller: String,
    /// The rounds pooled into these figures: each a run on a control plane of its own.
    #[serde(default = "one")]
    pub rounds: usize,
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
    /// The simulated kubelet's (kwok), the scheduler's and the controller manager's CPU seconds
    /// during the storm (a local control plane): what each pod costs beyond the API server.
    #[serde(default)]
    pub storm_kwok_cpu_s: Option<f64>,
    #[serde(default)]
    pub storm_scheduler_cpu_s: Option<f64>,
    #[serde(default)]
    pub storm_controller_manager_cpu_s: Option<f64>,
    pub cpu_total_s: f64,
    pub rss_peak_mib: f64,
    /// What the latency percentiles above were taken from, so that rounds can be pooled.
    #[serde(default)]
    pub samples: Samples,
}

impl Measured {
    /// The control plane's CPU seconds during the storm, each process's with its row's name.
    fn storm_plane_cpu_s(&self) -> [(&'static str, Option<f64>); 5] {
        [
            (
                "the API server's CPU seconds during the storm",
                self.storm_apiserver_cpu_s,
            ),
            ("etcd's CPU seconds during the storm", self.storm_etcd_cpu_s),
            (
                "kwok's (the simulated kubelet) CPU seconds during the storm",
                self.storm_kwok_cpu_s,
            ),
            (
                "kube-scheduler's CPU seconds during the storm",
                self.storm_scheduler_cpu_s,
            ),
            (
                "kube-controller-manager's CPU seconds during the storm",
                self.storm_controller_manager_cpu_s,
            ),
        ]
    }

    /// Sets every latency percentile from the samples it is taken from.
    pub fn set_percentiles(&mut self) {
        let s = &self.samples;
        self.create_to_pod_p50_ms = percentile(&s.create_to_pod_ms, 0.50);
        self.create_to_pod_p99_ms = percentile(&s.create_to_pod_ms, 0.99);
        self.seen_pod_p50_ms = percentile(&s.seen_pod_ms, 0.50);
        self.seen_pod_p99_ms = percentile(&s.seen_pod_ms, 0.99);
        self.replace_p50_ms = percentile(&s.replace_ms, 0.50);
        self.replace_p90_ms = percentile(&s.replace_ms, 0.90);
        self.replace_p99_ms = percentile(&s.replace_ms, 0.99);
        self.storm_newcomer_p50_ms = percentile(&s.storm_newcomer_ms, 0.50);
        self.storm_newcomer_max_ms = percentile(&s.storm_newcomer_ms, 1.0);
    }
}

/// The latencies a run timed, in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Samples {
    pub create_to_pod_ms: Vec<f64>,
    pub seen_pod_ms: Vec<f64>,
    pub replace_ms: Vec<f64>,
    pub storm_newcomer_ms: Vec<f64>,
    /// A storm pod's steps (`audit::PodSteps`): created → bound, bound → Running, Running →
    /// Failed; and kwok's status patches, received → served.
    #[serde(default)]
    pub bound_ms: Vec<f64>,
    #[serde(default)]
    pub running_ms: Vec<f64>,
    #[serde(default)]
    pub failed_ms: Vec<f64>,
    #[serde(default)]
    pub kwok_patch_ms: Vec<f64>,
}

fn one() -> usize {
    1
}

/// Durations in milliseconds, as `Samples` keeps them.
pub fn millis(samples: &[Duration]) -> Vec<f64> {
    samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect()
}

/// The nearest-rank percentile `p` (0..1) of `samples`, in milliseconds.
pub fn percentile_ms(samples: &[Duration], p: f64) -> Option<f64> {
    percentile(&millis(samples), p)
}

/// The nearest-rank percentile `p` (0..1) of `samples`.
fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).max(1);
    sorted.get(rank - 1).copied()
}

/// One controller's rounds as one run: the latency percentiles of all their samples together,
/// counts and requests summed (`rounds` says over how many), CPU seconds and times the mean of
/// the rounds', memory the most any round used. One round is returned as it is.
pub fn pool(runs: &[Measured]) -> Measured {
    let [first, ..] = runs else {
        return Measured::default();
    };
    if runs.len() == 1 {
        return first.clone();
    }
    let n = runs.len() as f64;
    let mean = |f: fn(&Measured) -> f64| runs.iter().map(f).sum::<f64>() / n;
    let mean_of = |f: fn(&Measured) -> Option<f64>| -> Option<f64> {
        let all: Option<Vec<f64>> = runs.iter().map(f).collect();
        all.map(|all| all.iter().sum::<f64>() / n)
    };
    let sum = |f: fn(&Measured) -> u64| runs.iter().map(f).sum::<u64>();
    let sum_usize = |f: fn(&Measured) -> usize| runs.iter().map(f).sum::<usize>();
    let max = |f: fn(&Measured) -> f64| runs.iter().map(f).fold(0.0, f64::max);
    let requests = |f: fn(&Measured) -> &Requests| {
        let mut all = Requests::new();
        for (what, count) in runs.iter().flat_map(f) {
            *all.entry(what.clone()).or_default() += count;
        }
        all
    };
    let samples = |f: fn(&Samples) -> &Vec<f64>| -> Vec<f64> {
        runs.iter().flat_map(|m| f(&m.samples)).copied().collect()
    };
    let all = Samples {
        create_to_pod_ms: samples(|s| &s.create_to_pod_ms),
        seen_pod_ms: samples(|s| &s.seen_pod_ms),
        replace_ms: samples(|s| &s.replace_ms),
        storm_newcomer_ms: samples(|s| &s.storm_newcomer_ms),
        bound_ms: samples(|s| &s.bound_ms),
        running_ms: samples(|s| &s.running_ms),
        failed_ms: samples(|s| &s.failed_ms),
        kwok_patch_ms: samples(|s| &s.kwok_patch_ms),
    };
    let mut pooled = Measured {
        controller: first.controller.clone(),
        rounds: runs.iter().map(|m| m.rounds.max(1)).sum(),
        agents: sum_usize(|m| m.agents),
        storm_agents: first.storm_agents,
        storm_s: first.storm_s,
        storm_backoff: first.storm_backoff.clone(),
        quiet_s: first.quiet_s,
        pods_running: sum_usize(|m| m.pods_running),
        converge_s: mean_of(|m| m.converge_s),
        create_to_pod_timed: sum_usize(|m| m.create_to_pod_timed),
        converge_cpu_s: mean(|m| m.converge_cpu_s),
        rss_converged_mib: max(|m| m.rss_converged_mib),
        converge_requests: requests(|m| &m.converge_requests),
        quiet_writes: sum(|m| m.quiet_writes),
        restarts: sum(|m| m.restarts),
        failures: sum(|m| m.failures),
        unreplaced: sum(|m| m.unreplaced),
        storm_newcomers: sum_usize(|m| m.storm_newcomers),
        storm_newcomers_timed: sum_usize(|m| m.storm_newcomers_timed),
        storm_requests: requests(|m| &m.storm_requests),
        storm_cpu_s: mean(|m| m.storm_cpu_s),
        storm_apiserver_cpu_s: mean_of(|m| m.storm_apiserver_cpu_s),
        storm_etcd_cpu_s: mean_of(|m| m.storm_etcd_cpu_s),
        storm_kwok_cpu_s: mean_of(|m| m.storm_kwok_cpu_s),
        storm_scheduler_cpu_s: mean_of(|m| m.storm_scheduler_cpu_s),
        storm_controller_manager_cpu_s: mean_of(|m| m.storm_controller_manager_cpu_s),
        cpu_total_s: mean(|m| m.cpu_total_s),
        rss_peak_mib: max(|m| m.rss_peak_mib),
        samples: all,
        ..Measured::default()
    };
    pooled.set_percentiles();
    pooled
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
    let rounds = op.rounds.max(1);
    let heading = match rounds {
        1 => format!("**{} agents**", op.agents),
        _ => format!(
            "**{} agents**, {rounds} rounds pooled (latencies from all their samples, counts summed, CPU seconds and times a round's mean)",
            op.agents / rounds
        ),
    };
    row(
        &heading,
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
    let per_minute =
        |m: &Measured| m.quiet_writes as f64 * 60.0 / (m.quiet_s * m.rounds.max(1) as f64);
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
    let restarts = |m: &Measured| m.restarts as f64 / m.rounds.max(1) as f64;
    row(
        match rounds {
            1 => "restarts done",
            _ => "restarts done in a storm (the rounds' mean)",
        },
        format!("{:.0}", restarts(op)),
        format!("{:.0}", restarts(bare)),
        ratio(num(restarts(op)), num(restarts(bare))),
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
    // Where the rest of a restart's time went: the scheduler's and kwok's steps (kwok runs a
    // bound pod with no delay set and fails it a second after it runs).
    let p50 = |samples: &[f64]| percentile(samples, 0.50);
    for (what, a, b) in [
        (
            "a storm pod's steps, p50: created → bound (the scheduler)",
            p50(&op.samples.bound_ms),
            p50(&bare.samples.bound_ms),
        ),
        (
            "bound → Running (kwok, no delay set)",
            p50(&op.samples.running_ms),
            p50(&bare.samples.running_ms),
        ),
        (
            "Running → Failed (kwok, 1 s delay set)",
            p50(&op.samples.failed_ms),
            p50(&bare.samples.failed_ms),
        ),
        (
            "kwok's pod status patch served, p50",
            p50(&op.samples.kwok_patch_ms),
            p50(&bare.samples.kwok_patch_ms),
        ),
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
    for ((what, a), (_, b)) in op
        .storm_plane_cpu_s()
        .into_iter()
        .zip(bare.storm_plane_cpu_s())
    {
        let seconds = |s: Option<f64>| s.map_or("—".into(), |s| format!("{s:.2}"));
        row(what, seconds(a), seconds(b), ratio(a, b));
    }
    // What a restart costs the machine: the controller's CPU and every control plane
    // process's measured, over the restarts of a round (when all of them were measured).
    let per_restart = |m: &Measured| {
        let plane = m.storm_plane_cpu_s().into_iter().map(|(_, s)| s);
        let all = plane.sum::<Option<f64>>()? + m.storm_cpu_s;
        (restarts(m) > 0.0).then(|| 1000.0 * all / restarts(m))
    };
    let (a, b) = (per_restart(op), per_restart(bare));
    let ms = |s: Option<f64>| s.map_or("—".into(), |s| format!("{s:.1} ms"));
    row(
        "CPU per restart, the controller and the control plane in all",
        ms(a),
        ms(b),
        ratio(a, b),
    );
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

/// Each round's storm apart, when there are several: Failed → next pod p50 and p99 of the
/// operator and the baseline in the same round, and their ratios.
pub fn by_round(ops: &[Measured], bares: &[Measured]) -> String {
    let mut out = String::new();
    if ops.len() < 2 {
        return out;
    }
    out.push_str("| storm of round | p50 agent-supervisor / bare | ratio | p99 agent-supervisor / bare | ratio |\n");
    out.push_str("|---|---|---|---|---|\n");
    for (i, (op, bare)) in ops.iter().zip(bares).enumerate() {
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} | {} / {} | {} |",
            i + 1,
            ms(op.replace_p50_ms),
            ms(bare.replace_p50_ms),
            ratio(op.replace_p50_ms, bare.replace_p50_ms),
            ms(op.replace_p99_ms),
            ms(bare.replace_p99_ms),
            ratio(op.replace_p99_ms, bare.replace_p99_ms),
        );
    }
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
    // (The process's CPU time counts in ticks of 10 ms: a converge of a few Agents can take
    // less than one, the whole run cannot.)
    check(m.cpu_total_s > 0.0, "no CPU time over the run");
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
        !m.samples.bound_ms.is_empty() && !m.samples.kwok_patch_ms.is_empty(),
        "no storm pod's binding or kwok status patch found in the audit log",
    );
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

#[cfg(test)]
mod tests {
    use super::*;

    fn round(replace_ms: &[f64], restarts: u64, storm_cpu_s: f64) -> Measured {
        Measured {
            controller: "operator".into(),
            rounds: 1,
            agents: 10,
            pods_running: 10,
            restarts,
            storm_cpu_s,
            storm_requests: Requests::from([("create pods".into(), restarts)]),
            samples: Samples {
                replace_ms: replace_ms.to_vec(),
                ..Samples::default()
            },
            ..Measured::default()
        }
        .with_percentiles()
    }

    impl Measured {
        fn with_percentiles(mut self) -> Self {
            self.set_percentiles();
            self
        }
    }

    #[test]
    fn pooled_rounds_take_percentiles_over_every_sample() {
        // The three slowest samples are all the first round's (its p99 the second slowest of
        // its 100); pooled, the p99 of 200 is the third slowest of all.
        let mut first: Vec<f64> = (1..=97).map(f64::from).collect();
        first.extend([500.0, 400.0, 300.0]);
        let second: Vec<f64> = (1..=100).map(f64::from).collect();
        let pooled = pool(&[round(&first, 30, 2.0), round(&second, 50, 4.0)]);
        assert_eq!(pooled.rounds, 2);
        assert_eq!(round(&first, 0, 0.0).replace_p99_ms, Some(400.0));
        assert_eq!(pooled.replace_p99_ms, Some(300.0));
        assert_eq!(pooled.replace_p50_ms, Some(50.0));
        assert_eq!(pooled.samples.replace_ms.len(), 200);
        // Counts summed, CPU a round's mean.
        assert_eq!(
            (pooled.restarts, pooled.agents, pooled.pods_running),
            (80, 20, 20)
        );
        assert_eq!(pooled.storm_requests["create pods"], 80);
        assert_eq!(pooled.storm_cpu_s, 3.0);
    }

    #[test]
    fn one_round_is_its_own_pool() {
        let only = round(&[3.0, 1.0, 2.0], 3, 1.0);
        let pooled = pool(std::slice::from_ref(&only));
        assert_eq!(pooled.replace_p99_ms, only.replace_p99_ms);
        assert_eq!(pooled.restarts, 3);
        let only = std::slice::from_ref(&only);
        assert!(by_round(only, only).is_empty());
    }

    #[test]
    fn the_table_gives_a_storm_s_restarts_as_the_rounds_mean() {
        let op = pool(&[round(&[5.0], 30, 1.0), round(&[5.0], 50, 1.0)]);
        let bare = pool(&[round(&[4.0], 40, 1.0), round(&[4.0], 40, 1.0)]);
        let table = table(&op, &bare);
        assert!(
            table.contains("| **10 agents**, 2 rounds pooled"),
            "{table}"
        );
        assert!(
            table.contains("| restarts done in a storm (the rounds' mean) | 40 | 40 | 1.00× |"),
            "{table}"
        );
    }

    #[test]
    fn the_table_gives_where_a_storm_pod_s_time_went() {
        let steps = |bound: &[f64], kwok: &[f64]| {
            let mut m = round(&[5.0], 10, 1.0);
            m.samples.bound_ms = bound.to_vec();
            m.samples.running_ms = vec![1000.0];
            m.samples.failed_ms = vec![2000.0, 3000.0, 2500.0];
            m.samples.kwok_patch_ms = kwok.to_vec();
            m
        };
        let op = pool(&[steps(&[50.0, 10.0], &[30.0]), steps(&[20.0], &[30.0])]);
        let bare = steps(&[400.0, 100.0, 200.0], &[15.0, 20.0, 25.0]);
        let table = table(&op, &bare);
        for row in [
            "| a storm pod's steps, p50: created → bound (the scheduler) | 20 ms | 200 ms | 0.10× |",
            "| bound → Running (kwok, no delay set) | 1.00 s | 1.00 s | 1.00× |",
            "| Running → Failed (kwok, 1 s delay set) | 2.50 s | 2.50 s | 1.00× |",
            "| kwok's pod status patch served, p50 | 30 ms | 20 ms | 1.50× |",
        ] {
            assert!(table.contains(row), "{row}\n{table}");
        }
    }

    #[test]
    fn a_restart_costs_the_cpu_of_every_process_measured_over_a_round_s_restarts() {
        let measured = |restarts, plane: f64| {
            let mut m = round(&[5.0], restarts, 1.0);
            m.storm_apiserver_cpu_s = Some(plane);
            m.storm_etcd_cpu_s = Some(plane);
            m.storm_kwok_cpu_s = Some(plane);
            m.storm_scheduler_cpu_s = Some(plane);
            m.storm_controller_manager_cpu_s = Some(plane);
            m
        };
        // Two rounds of 50 restarts each, 1 + 5 × 1.8 = 10 CPU seconds a round: 200 ms each.
        let op = pool(&[measured(50, 1.8), measured(50, 1.8)]);
        let bare = pool(&[measured(100, 1.8)]);
        let full = table(&op, &bare);
        assert!(
            full.contains(
                "| CPU per restart, the controller and the control plane in all | 200.0 ms | 100.0 ms | 2.00× |"
            ),
            "{full}"
        );
        // A process not measured: no figure, rather than a smaller one.
        let mut partial = measured(100, 1.8);
        partial.storm_kwok_cpu_s = None;
        let missing = table(&op, &partial);
        assert!(
            missing.contains("| CPU per restart, the controller and the control plane in all | 200.0 ms | — | — |"),
            "{missing}"
        );
    }
}
