//! The storm's rows of the table (`table::table`).

use crate::idle;
use crate::report::{Measured, percentile};
use crate::table::{Rows, of, per, ratio, total};

pub fn rows(out: &mut Rows, op: &Measured, bare: &Measured) {
    let num = |x: f64| Some(x);
    let rounds = op.rounds.max(1);
    let budget = op.restart_budget.as_deref().map_or_else(String::new, |b| {
        format!(", the operator's restart budget {b}")
    });
    out.heading(&format!(
        "**{} agents crash-looping for {:.0} s** ({}, no breaker, no limits{budget})",
        op.storm_agents,
        op.storm_s,
        op.storm_backoff.as_deref().map_or_else(
            || "Immediate".to_string(),
            |d| format!("the operator backing off {d}, the baseline not")
        )
    ));
    let mean = |n: u64, m: &Measured| n as f64 / m.rounds.max(1) as f64;
    let restarts = |m: &Measured| mean(m.restarts, m);
    out.row(
        match rounds {
            1 => "restarts done",
            _ => "restarts done in a storm (the rounds' mean)",
        },
        format!("{:.0}", restarts(op)),
        format!("{:.0}", restarts(bare)),
        ratio(num(restarts(op)), num(restarts(bare))),
    );
    out.ms(
        "pod Failed → next pod created, p50",
        op.replace_p50_ms,
        bare.replace_p50_ms,
    );
    out.ms("p90", op.replace_p90_ms, bare.replace_p90_ms);
    out.ms("p99", op.replace_p99_ms, bare.replace_p99_ms);
    // Where the rest of a restart's time went: the scheduler's and kwok's steps (kwok runs a
    // bound pod with no delay set and fails it a second after it runs).
    let p50 = |samples: &[f64]| percentile(samples, 0.50);
    out.ms(
        "a storm pod's steps, p50: created → bound (the scheduler)",
        p50(&op.samples.bound_ms),
        p50(&bare.samples.bound_ms),
    );
    out.ms(
        "bound → Running (kwok, no delay set)",
        p50(&op.samples.running_ms),
        p50(&bare.samples.running_ms),
    );
    out.ms(
        "Running → Failed (kwok, 1 s delay set)",
        p50(&op.samples.failed_ms),
        p50(&bare.samples.failed_ms),
    );
    out.ms(
        "kwok's pod status patch served, p50",
        p50(&op.samples.kwok_patch_ms),
        p50(&bare.samples.kwok_patch_ms),
    );
    out.row(
        "failures of the storm still unreplaced up to 10 s after it (timed as replaced then)",
        format!("{} of {}", op.unreplaced, op.failures),
        format!("{} of {}", bare.unreplaced, bare.failures),
        String::new(),
    );
    out.ms(
        "status lag: a storm pod seen Failed → its attempt seen in status.restartHistory by an Agent watch, p50",
        op.storm_status_lag_p50_ms,
        bare.storm_status_lag_p50_ms,
    );
    out.ms(
        "p99",
        op.storm_status_lag_p99_ms,
        bare.storm_status_lag_p99_ms,
    );
    out.ms(
        "max",
        op.storm_status_lag_max_ms,
        bare.storm_status_lag_max_ms,
    );
    let unrecorded = |m: &Measured| of(m, m.status_unrecorded, m.status_failures);
    out.row(
        "storm pods seen Failed whose attempt was not in status.restartHistory by the idle point (timed as seen then)",
        unrecorded(op),
        unrecorded(bare),
        String::new(),
    );
    out.ms(
        &format!(
            "{} Agents created during the storm, one at a time: created → pod created, p50",
            op.storm_newcomers_timed
        ),
        op.storm_newcomer_p50_ms,
        bare.storm_newcomer_p50_ms,
    );
    out.ms(
        "slowest",
        op.storm_newcomer_max_ms,
        bare.storm_newcomer_max_ms,
    );
    let per_restart = |requests, m: &Measured| total(requests) as f64 / m.restarts.max(1) as f64;
    out.row(
        "API requests per restart, in the storm's window",
        per(&op.storm_requests, op.restarts as f64),
        per(&bare.storm_requests, bare.restarts as f64),
        ratio(
            num(per_restart(&op.storm_requests, op)),
            num(per_restart(&bare.storm_requests, bare)),
        ),
    );
    out.row(
        "API requests per restart, counting everything from the storm's start until the controller is idle",
        per(&op.until_idle_requests, op.restarts as f64),
        per(&bare.until_idle_requests, bare.restarts as f64),
        ratio(
            num(per_restart(&op.until_idle_requests, op)),
            num(per_restart(&bare.until_idle_requests, bare)),
        ),
    );
    out.row(
        &format!(
            "idle point: the controller's last request after the storm's end{} (then {} s without one)",
            if rounds > 1 { ", the latest round's" } else { "" },
            idle::QUIET.as_secs()
        ),
        idle_point(op.idle_after_s),
        idle_point(bare.idle_after_s),
        String::new(),
    );
    let after = |m: &Measured| mean(m.restarts_after_storm, m);
    out.row(
        &format!(
            "restarts after the storm's end, until its pods stopped failing{} (in the requests until idle, not in the restarts)",
            if rounds > 1 { ", the rounds' mean" } else { "" }
        ),
        format!("{:.0}", after(op)),
        format!("{:.0}", after(bare)),
        String::new(),
    );
    let count = |n: Option<u64>| n.map_or("—".into(), |n| n.to_string());
    let as_f64 = |n: Option<u64>| n.map(|n| n as f64);
    for (what, a, b) in [
        (
            "most finished pods at once (Succeeded or Failed, not being deleted) from the storm's start until idle: one Agent's",
            op.peak_finished_per_agent,
            bare.peak_finished_per_agent,
        ),
        ("the namespace's", op.peak_finished, bare.peak_finished),
    ] {
        out.row(what, count(a), count(b), ratio(as_f64(a), as_f64(b)));
    }
    out.row(
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
        out.row(what, seconds(a), seconds(b), ratio(a, b));
    }
    // What a restart costs the machine: the controller's CPU and every control plane
    // process's measured, over the restarts of a round (when all of them were measured).
    let cpu_per_restart = |m: &Measured| {
        let plane = m.storm_plane_cpu_s().into_iter().map(|(_, s)| s);
        let all = plane.sum::<Option<f64>>()? + m.storm_cpu_s;
        (restarts(m) > 0.0).then(|| 1000.0 * all / restarts(m))
    };
    let (a, b) = (cpu_per_restart(op), cpu_per_restart(bare));
    let ms = |s: Option<f64>| s.map_or("—".into(), |s| format!("{s:.1} ms"));
    out.row(
        "CPU per restart, the controller and the control plane in all",
        ms(a),
        ms(b),
        ratio(a, b),
    );
}

/// An idle point in words: seconds after the phase's end, or that there was none.
pub fn idle_point(after: Option<f64>) -> String {
    match after {
        Some(s) => format!("{s:.1} s"),
        None => format!("not idle within {} s", idle::WAIT.as_secs()),
    }
}

#[cfg(test)]
mod tests {
    use crate::audit::Requests;
    use crate::pool::pool;
    use crate::pool::tests::round;
    use crate::table::table;

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

    #[test]
    fn the_storm_s_status_lag_requests_until_idle_and_finished_pods_are_rows() {
        let mut op = round(&[5.0], 100, 1.0);
        op.status_records = true;
        op.samples.storm_status_lag_ms = (1..=100).map(|i| f64::from(i) * 100.0).collect();
        (op.status_failures, op.status_unrecorded) = (100, 0);
        op.until_idle_requests = Requests::from([
            ("create pods".into(), 100),
            ("patch agents/status".into(), 30),
        ]);
        op.idle_after_s = Some(9.24);
        op.restarts_after_storm = 4;
        (op.peak_finished_per_agent, op.peak_finished) = (Some(3), Some(12));
        op.set_percentiles();
        // The baseline records nothing: every failure it saw is unrecorded, no lag is timed.
        let mut bare = round(&[4.0], 100, 1.0);
        (bare.status_failures, bare.status_unrecorded) = (100, 100);
        bare.until_idle_requests = Requests::from([("create pods".into(), 104)]);
        bare.idle_after_s = None;
        (bare.peak_finished_per_agent, bare.peak_finished) = (Some(30), Some(120));
        let table = table(&op, &bare);
        for row in [
            "| status lag: a storm pod seen Failed → its attempt seen in status.restartHistory by an Agent watch, p50 | 5.00 s | — | — |",
            "| p99 | 9.90 s | — | — |",
            "| max | 10.00 s | — | — |",
            "by the idle point (timed as seen then) | 0 of 100 | — |  |",
            "until the controller is idle | 1.30 (1.00 create pods, 0.30 patch agents/status) | 1.04 (1.04 create pods) | 1.25× |",
            "(then 15 s without one) | 9.2 s | not idle within 120 s |  |",
            "(in the requests until idle, not in the restarts) | 4 | 0 |  |",
            "until idle: one Agent's | 3 | 30 | 0.10× |",
            "| the namespace's | 12 | 120 | 0.10× |",
        ] {
            assert!(table.contains(row), "{row}\n{table}");
        }
    }
}
