//! `bench-scale table --check`: what is missing or absurd in a run's figures (a harness fault,
//! or a figure the controller must have and does not), never a speed.

use crate::audit;
use crate::report::Measured;

/// What is missing or absurd in one run's figures.
pub fn problems(m: &Measured) -> Vec<String> {
    let who = &m.controller;
    let mut out = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            out.push(format!("{who}: {what}"));
        }
    };
    if !m.storm_only {
        converge_problems(m, &mut check);
    }
    storm_problems(m, &mut check);
    check(m.cpu_total_s > 0.0, "no CPU time over the run");
    check(m.cpu_total_s >= m.converge_cpu_s, "CPU time went backwards");
    out
}

/// What is missing or absurd in the converge's figures (a run that had one).
fn converge_problems(m: &Measured, check: &mut impl FnMut(bool, &str)) {
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
    check(
        m.rss_converged_mib > 1.0 && m.rss_peak_mib >= m.rss_converged_mib,
        "no memory figures",
    );
    check(
        audit::writes(&m.converge_requests) >= m.agents as u64,
        "fewer writes in the audit log than pods created while converging",
    );
    check(
        m.converge_idle_after_s.is_some(),
        "not idle after converging: its requests and the steady state are not apart",
    );
    check(
        !m.status_records
            || (m.converge_status_lag_p50_ms.is_some() && m.converge_written_p50_ms.is_some()),
        "no status lag (Agent created → phase, → status written)",
    );
    check(
        m.converge_status_lag_p50_ms <= m.converge_status_lag_p99_ms
            && m.converge_status_lag_p99_ms <= m.converge_status_lag_max_ms
            && m.converge_written_p50_ms <= m.converge_written_p99_ms
            && m.converge_written_p99_ms <= m.converge_written_max_ms,
        "converge status lag percentiles out of order",
    );
}

/// What is missing or absurd in the storm's figures.
fn storm_problems(m: &Measured, check: &mut impl FnMut(bool, &str)) {
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
    // Everything until idle includes the storm's window.
    check(
        m.storm_requests
            .iter()
            .all(|(what, n)| m.until_idle_requests.get(what).is_some_and(|all| all >= n)),
        "fewer requests until idle than in the storm's window",
    );
    check(
        m.idle_after_s.is_some(),
        "not idle after the storm: its requests until idle are not all counted",
    );
    check(
        m.peak_finished_per_agent.is_some_and(|n| n > 0)
            && m.peak_finished >= m.peak_finished_per_agent,
        "no finished pods seen in the storm",
    );
    check(
        m.status_failures >= m.failures,
        "fewer storm pods seen Failed for the status lag than failures in the storm's window",
    );
    // The status lag figures: the operator's are required, the baseline's only shown.
    check(
        !m.status_records || m.storm_status_lag_p50_ms.is_some(),
        "no status lag (pod Failed → restartHistory)",
    );
    check(
        m.storm_status_lag_p50_ms <= m.storm_status_lag_p99_ms
            && m.storm_status_lag_p99_ms <= m.storm_status_lag_max_ms,
        "storm status lag percentiles out of order",
    );
    check(
        [m.storm_apiserver_cpu_s, m.storm_etcd_cpu_s]
            .iter()
            .all(|s| s.is_none_or(|s| s > 0.0)),
        "no CPU time of the control plane during the storm",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Requests;
    use crate::report::Samples;

    /// A run whose every figure is present and sane.
    fn sane(status_records: bool) -> Measured {
        let requests = Requests::from([("create pods".into(), 40)]);
        let mut m = Measured {
            controller: "operator".into(),
            rounds: 1,
            agents: 5,
            pods_running: 5,
            converge_s: Some(1.0),
            create_to_pod_timed: 5,
            converge_requests: Requests::from([("create pods".into(), 5)]),
            rss_converged_mib: 20.0,
            rss_peak_mib: 25.0,
            cpu_total_s: 1.0,
            restarts: 30,
            failures: 30,
            storm_newcomers: 2,
            storm_newcomers_timed: 2,
            storm_requests: requests.clone(),
            until_idle_requests: Requests::from([("create pods".into(), 45)]),
            idle_after_s: Some(4.0),
            converge_idle_after_s: Some(9.0),
            peak_finished_per_agent: Some(2),
            peak_finished: Some(6),
            status_records,
            status_failures: 33,
            samples: Samples {
                create_to_pod_ms: vec![10.0],
                seen_pod_ms: vec![12.0],
                replace_ms: vec![20.0, 30.0],
                storm_newcomer_ms: vec![15.0, 16.0],
                bound_ms: vec![5.0],
                kwok_patch_ms: vec![2.0],
                ..Samples::default()
            },
            ..Measured::default()
        };
        if status_records {
            m.samples.storm_status_lag_ms = vec![1000.0, 9000.0];
            m.samples.converge_status_lag_ms = vec![800.0];
            m.samples.converge_written_ms = vec![700.0];
        }
        m.set_percentiles();
        m
    }

    #[test]
    fn a_sane_run_has_no_problem() {
        assert_eq!(problems(&sane(true)), Vec::<String>::new());
        assert_eq!(problems(&sane(false)), Vec::<String>::new());
    }

    #[test]
    fn the_operator_s_status_lag_is_required_and_the_baseline_s_is_not() {
        let mut op = sane(true);
        op.samples.storm_status_lag_ms.clear();
        op.set_percentiles();
        assert_eq!(
            problems(&op),
            ["operator: no status lag (pod Failed → restartHistory)"]
        );
        for clear in [
            |s: &mut Samples| s.converge_status_lag_ms.clear(),
            |s: &mut Samples| s.converge_written_ms.clear(),
        ] {
            let mut op = sane(true);
            clear(&mut op.samples);
            op.set_percentiles();
            assert_eq!(problems(&op).len(), 1, "{:?}", problems(&op));
        }
        // The baseline without records: no lag, and no problem.
        assert!(sane(false).storm_status_lag_p50_ms.is_none());
    }

    #[test]
    fn a_storm_only_run_needs_no_converge_but_its_storm_as_any() {
        let mut m = sane(true);
        m.storm_only = true;
        (m.pods_running, m.converge_s, m.create_to_pod_timed) = (0, None, 0);
        m.converge_requests.clear();
        m.rss_converged_mib = 0.0;
        m.samples.create_to_pod_ms.clear();
        m.samples.seen_pod_ms.clear();
        m.samples.converge_status_lag_ms.clear();
        m.samples.converge_written_ms.clear();
        m.converge_idle_after_s = None;
        m.set_percentiles();
        assert_eq!(problems(&m), Vec::<String>::new());
        m.samples.storm_status_lag_ms.clear();
        m.restarts = 0;
        m.set_percentiles();
        assert_eq!(
            problems(&m),
            [
                "operator: no restarts in the storm",
                "operator: no status lag (pod Failed → restartHistory)"
            ]
        );
    }

    #[test]
    fn requests_until_idle_finished_pods_and_the_idle_point_are_required() {
        let mut m = sane(false);
        m.until_idle_requests = Requests::from([("create pods".into(), 39)]);
        m.idle_after_s = None;
        m.peak_finished_per_agent = None;
        assert_eq!(
            problems(&m),
            [
                "operator: fewer requests until idle than in the storm's window",
                "operator: not idle after the storm: its requests until idle are not all counted",
                "operator: no finished pods seen in the storm",
            ]
        );
        // A request kind of the window missing until idle is missing too.
        let mut m = sane(false);
        m.storm_requests.insert("patch agents/status".into(), 1);
        assert_eq!(problems(&m).len(), 1);
    }
}
