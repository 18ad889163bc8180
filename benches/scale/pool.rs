//! One controller's rounds pooled into one run's figures.

use crate::audit::Requests;
use crate::report::{Measured, Samples};

/// One controller's rounds as one run: the latency percentiles of all their samples together,
/// counts and requests summed (`rounds` says over how many), CPU seconds and times the mean of
/// the rounds', memory and finished pods the most any round had, the idle point the latest of
/// any round's (none when a round was never idle). One round is returned as it is.
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
        converge_status_lag_ms: samples(|s| &s.converge_status_lag_ms),
        converge_written_ms: samples(|s| &s.converge_written_ms),
        replace_ms: samples(|s| &s.replace_ms),
        storm_status_lag_ms: samples(|s| &s.storm_status_lag_ms),
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
        status_records: runs.iter().any(|m| m.status_records),
        storm_only: runs.iter().all(|m| m.storm_only),
        restart_budget: first.restart_budget.clone(),
        pods_running: sum_usize(|m| m.pods_running),
        converge_s: mean_of(|m| m.converge_s),
        create_to_pod_timed: sum_usize(|m| m.create_to_pod_timed),
        converge_phase_missing: sum_usize(|m| m.converge_phase_missing),
        converge_cpu_s: mean(|m| m.converge_cpu_s),
        rss_converged_mib: max(|m| m.rss_converged_mib),
        converge_requests: requests(|m| &m.converge_requests),
        converge_idle_after_s: latest(runs.iter().map(|m| m.converge_idle_after_s)),
        quiet_writes: sum(|m| m.quiet_writes),
        restarts: sum(|m| m.restarts),
        failures: sum(|m| m.failures),
        unreplaced: sum(|m| m.unreplaced),
        status_failures: sum(|m| m.status_failures),
        status_unrecorded: sum(|m| m.status_unrecorded),
        storm_newcomers: sum_usize(|m| m.storm_newcomers),
        storm_newcomers_timed: sum_usize(|m| m.storm_newcomers_timed),
        storm_requests: requests(|m| &m.storm_requests),
        until_idle_requests: requests(|m| &m.until_idle_requests),
        idle_after_s: latest(runs.iter().map(|m| m.idle_after_s)),
        restarts_after_storm: sum(|m| m.restarts_after_storm),
        peak_finished_per_agent: runs.iter().filter_map(|m| m.peak_finished_per_agent).max(),
        peak_finished: runs.iter().filter_map(|m| m.peak_finished).max(),
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

/// The latest of the rounds' idle points; none when any round had none.
fn latest(idle: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    idle.collect::<Option<Vec<f64>>>()?
        .into_iter()
        .reduce(f64::max)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::table::by_round;

    /// One round's figures: its storm's Failed → next pod samples, restarts and CPU seconds.
    pub(crate) fn round(replace_ms: &[f64], restarts: u64, storm_cpu_s: f64) -> Measured {
        let mut m = Measured {
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
        };
        m.set_percentiles();
        m
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
    fn pooled_status_lags_finished_pods_and_idle_points() {
        let storm = |lags: &[f64], unrecorded, peak, idle: Option<f64>| {
            let mut m = round(&[5.0], 10, 1.0);
            m.status_records = true;
            m.samples.storm_status_lag_ms = lags.to_vec();
            m.status_failures = lags.len() as u64;
            m.status_unrecorded = unrecorded;
            m.peak_finished_per_agent = Some(peak);
            m.peak_finished = Some(peak * 3);
            m.idle_after_s = idle;
            m.until_idle_requests = Requests::from([("patch agents/status".into(), 7)]);
            m
        };
        // 100 samples: the slowest (the max) is the second round's, p99 the first's.
        let first: Vec<f64> = (1..=98).map(f64::from).collect();
        let first = storm(&first, 2, 4, Some(8.5));
        let second = storm(&[9_000.0, 15_000.0], 0, 6, Some(3.0));
        let pooled = pool(&[first.clone(), second.clone()]);
        assert_eq!(pooled.storm_status_lag_p50_ms, Some(50.0));
        assert_eq!(pooled.storm_status_lag_p99_ms, Some(9_000.0));
        assert_eq!(pooled.storm_status_lag_max_ms, Some(15_000.0));
        assert_eq!((pooled.status_failures, pooled.status_unrecorded), (100, 2));
        assert_eq!(
            pooled.peak_finished_per_agent,
            Some(6),
            "the most of any round"
        );
        assert_eq!(pooled.peak_finished, Some(18));
        assert_eq!(pooled.idle_after_s, Some(8.5), "the latest of the rounds'");
        assert_eq!(pooled.until_idle_requests["patch agents/status"], 14);
        assert!(pooled.status_records);
        // A round never idle: the pool was not idle either.
        let never = storm(&[1.0], 0, 1, None);
        assert_eq!(pool(&[first, never, second]).idle_after_s, None);
    }
}
