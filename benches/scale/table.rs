//! The table comparing two runs (each maybe of pooled rounds): its heading, the converge's rows
//! and the whole run's here, the storm's in `table_storm`; and each round's storm apart.

use std::fmt::Write as _;

use crate::audit::Requests;
use crate::report::Measured;
use crate::{idle, table_storm};

/// Markdown rows of four cells: what, the operator's, the baseline's, their ratio.
pub struct Rows(pub String);

impl Rows {
    pub fn row(&mut self, what: &str, a: String, b: String, r: String) {
        let _ = writeln!(self.0, "| {what} | {a} | {b} | {r} |");
    }

    /// A row of milliseconds figures and their ratio.
    pub fn ms(&mut self, what: &str, a: Option<f64>, b: Option<f64>) {
        self.row(what, ms(a), ms(b), ratio(a, b));
    }

    /// A heading row, its cells empty.
    pub fn heading(&mut self, what: &str) {
        self.row(what, String::new(), String::new(), String::new());
    }
}

pub fn total(requests: &Requests) -> u64 {
    requests.values().sum()
}

/// Requests per unit, as "9.1 (3.6 create events, 2.8 patch agents/status, ...)".
pub fn per(requests: &Requests, units: f64) -> String {
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

pub fn ms(x: Option<f64>) -> String {
    match x {
        None => "—".into(),
        Some(x) if x >= 1000.0 => format!("{:.2} s", x / 1000.0),
        Some(x) => format!("{x:.0} ms"),
    }
}

pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "—".into(),
    }
}

/// "missing of all", or "—" for a controller that records no status and recorded nothing.
pub fn of(m: &Measured, missing: u64, all: u64) -> String {
    if !m.status_records && missing == all {
        "—".into()
    } else {
        format!("{missing} of {all}")
    }
}

/// The one table: operator against bare baseline, with ratios.
pub fn table(op: &Measured, bare: &Measured) -> String {
    let mut out = Rows(String::new());
    let num = |x: f64| Some(x);
    let rounds = op.rounds.max(1);
    let heading = match rounds {
        1 => format!("**{} agents**", op.agents),
        _ => format!(
            "**{} agents**, {rounds} rounds pooled (latencies from all their samples, counts summed, CPU seconds and times a round's mean)",
            op.agents / rounds
        ),
    };
    out.row(
        &heading,
        "agent-supervisor".into(),
        "bare controller".into(),
        "ratio".into(),
    );
    out.0.push_str("|---|---|---|---|\n");
    out.row(
        "pods Running / Agents",
        format!("{} / {}", op.pods_running, op.agents),
        format!("{} / {}", bare.pods_running, bare.agents),
        String::new(),
    );
    let secs = |x: Option<f64>| x.map_or("—".into(), |x| format!("{x:.1} s"));
    out.row(
        "all pods Running after the Agents are created",
        secs(op.converge_s),
        secs(bare.converge_s),
        ratio(op.converge_s, bare.converge_s),
    );
    out.ms(
        "Agent created → its pod created, p50",
        op.create_to_pod_p50_ms,
        bare.create_to_pod_p50_ms,
    );
    out.ms(
        "Agent created → its pod created, p99",
        op.create_to_pod_p99_ms,
        bare.create_to_pod_p99_ms,
    );
    out.ms(
        "Agent created → its pod seen by a watch, p50",
        op.seen_pod_p50_ms,
        bare.seen_pod_p50_ms,
    );
    out.ms("p99", op.seen_pod_p99_ms, bare.seen_pod_p99_ms);
    out.ms(
        "status lag: Agent created → a status.phase seen by an Agent watch, p50",
        op.converge_status_lag_p50_ms,
        bare.converge_status_lag_p50_ms,
    );
    out.ms(
        "p99",
        op.converge_status_lag_p99_ms,
        bare.converge_status_lag_p99_ms,
    );
    out.ms(
        "max",
        op.converge_status_lag_max_ms,
        bare.converge_status_lag_max_ms,
    );
    out.ms(
        "by the API server's clock: Agent created → its status first written, p50",
        op.converge_written_p50_ms,
        bare.converge_written_p50_ms,
    );
    out.ms(
        "p99",
        op.converge_written_p99_ms,
        bare.converge_written_p99_ms,
    );
    out.ms(
        "max",
        op.converge_written_max_ms,
        bare.converge_written_max_ms,
    );
    let missing = |m: &Measured| of(m, m.converge_phase_missing as u64, m.agents as u64);
    out.row(
        "Agents with no phase seen by the end of the wait (timed as seen then)",
        missing(op),
        missing(bare),
        String::new(),
    );
    out.row(
        "CPU seconds to converge",
        format!("{:.2}", op.converge_cpu_s),
        format!("{:.2}", bare.converge_cpu_s),
        ratio(num(op.converge_cpu_s), num(bare.converge_cpu_s)),
    );
    out.row(
        "RSS after converging",
        format!("{:.0} MiB", op.rss_converged_mib),
        format!("{:.0} MiB", bare.rss_converged_mib),
        ratio(num(op.rss_converged_mib), num(bare.rss_converged_mib)),
    );
    out.row(
        &format!(
            "idle point: the controller's last request after every pod ran{} (then {} s without one)",
            if op.rounds > 1 { ", the latest round's" } else { "" },
            idle::QUIET.as_secs()
        ),
        table_storm::idle_point(op.converge_idle_after_s),
        table_storm::idle_point(bare.converge_idle_after_s),
        String::new(),
    );
    out.row(
        "API requests per Agent to converge, counting everything until idle",
        per(&op.converge_requests, op.agents as f64),
        per(&bare.converge_requests, bare.agents as f64),
        ratio(
            num(total(&op.converge_requests) as f64),
            num(total(&bare.converge_requests) as f64),
        ),
    );
    let per_minute =
        |m: &Measured| m.quiet_writes as f64 * 60.0 / (m.quiet_s * m.rounds.max(1) as f64);
    out.row(
        &format!(
            "writes per minute in steady state ({:.0} s from the idle point)",
            op.quiet_s
        ),
        format!("{:.1}", per_minute(op)),
        format!("{:.1}", per_minute(bare)),
        String::new(),
    );
    table_storm::rows(&mut out, op, bare);
    out.heading("**the whole run**");
    out.row(
        "CPU seconds",
        format!("{:.2}", op.cpu_total_s),
        format!("{:.2}", bare.cpu_total_s),
        ratio(num(op.cpu_total_s), num(bare.cpu_total_s)),
    );
    out.row(
        "peak RSS",
        format!("{:.0} MiB", op.rss_peak_mib),
        format!("{:.0} MiB", bare.rss_peak_mib),
        ratio(num(op.rss_peak_mib), num(bare.rss_peak_mib)),
    );
    out.0
}

/// The storm alone, of a run that measured only its storm (`phases::Options::storm_only`, such
/// as the operator at its restart budget's defaults), against the baseline's storm.
pub fn storm_table(op: &Measured, bare: &Measured) -> String {
    let mut out = Rows(String::new());
    let rounds = op.rounds.max(1);
    let pooled = match rounds {
        1 => String::new(),
        _ => format!(", {rounds} rounds pooled"),
    };
    out.row(
        &format!("**the storm alone**{pooled}"),
        format!("{} (storm only)", op.controller),
        "bare controller".into(),
        "ratio".into(),
    );
    out.0.push_str("|---|---|---|---|\n");
    table_storm::rows(&mut out, op, bare);
    out.0
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::pool;
    use crate::pool::tests::round;

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
    fn a_storm_only_run_has_a_table_of_its_storm_whose_heading_names_its_budget() {
        let mut budget = round(&[5.0], 20, 1.0);
        (budget.controller, budget.storm_only) = ("budget".into(), true);
        budget.restart_budget = Some("20/s, burst 100".into());
        let bare = round(&[4.0], 40, 1.0);
        let table = storm_table(&budget, &bare);
        for row in [
            "| **the storm alone** | budget (storm only) | bare controller | ratio |",
            "(Immediate, no breaker, no limits, the operator's restart budget 20/s, burst 100) |",
            "| restarts done | 20 | 40 | 0.50× |",
        ] {
            assert!(table.contains(row), "{row}\n{table}");
        }
        assert!(!table.contains("converge"), "{table}");
    }

    #[test]
    fn the_converge_s_status_lag_is_the_operator_s_and_not_applicable_to_the_baseline() {
        let mut op = round(&[5.0], 10, 1.0);
        op.status_records = true;
        op.samples.converge_status_lag_ms = vec![400.0, 1500.0, 200.0, 9000.0];
        op.samples.converge_written_ms = vec![300.0, 8000.0, 100.0];
        op.converge_phase_missing = 1;
        op.set_percentiles();
        // The baseline writes no status: no Agent's phase is ever seen.
        let mut bare = round(&[5.0], 10, 1.0);
        bare.converge_phase_missing = 10;
        let table = table(&op, &bare);
        for row in [
            "| status lag: Agent created → a status.phase seen by an Agent watch, p50 | 400 ms | — | — |",
            "| p99 | 9.00 s | — | — |",
            "| max | 9.00 s | — | — |",
            "| by the API server's clock: Agent created → its status first written, p50 | 300 ms | — | — |",
            "| max | 8.00 s | — | — |",
            "| Agents with no phase seen by the end of the wait (timed as seen then) | 1 of 10 | — |  |",
        ] {
            assert!(table.contains(row), "{row}\n{table}");
        }
    }
}
