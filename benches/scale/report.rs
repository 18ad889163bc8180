//! What a run measured (`Measured`), and the samples its percentiles come from. Rounds are
//! pooled in `pool`, the table is `table`'s, the sanity checks `check`'s.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::audit::Requests;

/// The figures of one controller's run, or of its rounds pooled (`pool::pool`).
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
    /// Whether the controller records every change in its Agents' status (the operator): its
    /// status lag figures are then required. The baseline writes none (or, with `--records`, a
    /// storm's every tenth restart), and its figures are only shown.
    #[serde(default)]
    pub status_records: bool,
    /// Only the storm was run (`phases::Options::storm_only`): the converge's figures are none.
    #[serde(default)]
    pub storm_only: bool,
    /// The operator's restart budget in words, when it was set to bind.
    #[serde(default)]
    pub restart_budget: Option<String>,
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
    /// The converge's status lag: Agent's create returned → a `status.phase` first seen by an
    /// Agent watch; Agents with none seen by the end of the wait are timed as seen then (a lower
    /// bound), and counted in `converge_phase_missing`.
    #[serde(default)]
    pub converge_status_lag_p50_ms: Option<f64>,
    #[serde(default)]
    pub converge_status_lag_p99_ms: Option<f64>,
    #[serde(default)]
    pub converge_status_lag_max_ms: Option<f64>,
    #[serde(default)]
    pub converge_phase_missing: usize,
    /// The same by the API server's clock (the audit log): Agent created → its status first
    /// written, for the Agents whose status was written.
    #[serde(default)]
    pub converge_written_p50_ms: Option<f64>,
    #[serde(default)]
    pub converge_written_p99_ms: Option<f64>,
    #[serde(default)]
    pub converge_written_max_ms: Option<f64>,
    pub converge_cpu_s: f64,
    pub rss_converged_mib: f64,
    pub converge_requests: Requests,
    /// The controller's last request after every pod ran, in seconds after it, followed by
    /// `idle::QUIET` without one; none when it was not idle within `idle::WAIT`.
    #[serde(default)]
    pub converge_idle_after_s: Option<f64>,
    pub quiet_writes: u64,
    pub restarts: u64,
    /// Failures in the storm's window, and those still unreplaced at its end (timed as if
    /// replaced then: a lower bound).
    pub failures: u64,
    pub unreplaced: u64,
    pub replace_p50_ms: Option<f64>,
    pub replace_p90_ms: Option<f64>,
    pub replace_p99_ms: Option<f64>,
    /// The storm's status lag: each storm pod seen Failed by the pod watch → its attempt first
    /// seen in the Agent's `status.restartHistory` by an Agent watch, for `status_failures`
    /// failures; those never seen there by the idle point (`status_unrecorded`) are timed as
    /// seen then (a lower bound).
    #[serde(default)]
    pub status_failures: u64,
    #[serde(default)]
    pub status_unrecorded: u64,
    #[serde(default)]
    pub storm_status_lag_p50_ms: Option<f64>,
    #[serde(default)]
    pub storm_status_lag_p99_ms: Option<f64>,
    #[serde(default)]
    pub storm_status_lag_max_ms: Option<f64>,
    /// Agents created during the storm (not crashing): created → first pod created, by the
    /// API server's clock, for `storm_newcomers_timed` of the `storm_newcomers`.
    pub storm_newcomers: usize,
    pub storm_newcomers_timed: usize,
    pub storm_newcomer_p50_ms: Option<f64>,
    pub storm_newcomer_max_ms: Option<f64>,
    /// The controller's requests in the storm's window (the newcomers' left out).
    pub storm_requests: Requests,
    /// The controller's requests from the storm's start until it was idle after it (the
    /// newcomers' left out): what it deferred past the window counts too.
    #[serde(default)]
    pub until_idle_requests: Requests,
    /// The controller's last request after the storm's end, in seconds after it (0 when it sent
    /// none), followed by `idle::QUIET` without one; none when it was not idle within
    /// `idle::WAIT` (its requests are then counted until the wait ended).
    #[serde(default)]
    pub idle_after_s: Option<f64>,
    /// Pods replacing a failure after the storm's end, until its pods stopped failing (their
    /// requests are in `until_idle_requests`, they are not in `restarts`).
    #[serde(default)]
    pub restarts_after_storm: u64,
    /// The most finished pods (Succeeded or Failed, not being deleted) one Agent had at once,
    /// and the storm's namespace had at once, from the storm's start until the idle point.
    #[serde(default)]
    pub peak_finished_per_agent: Option<u64>,
    #[serde(default)]
    pub peak_finished: Option<u64>,
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
    pub fn storm_plane_cpu_s(&self) -> [(&'static str, Option<f64>); 5] {
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
        self.converge_status_lag_p50_ms = percentile(&s.converge_status_lag_ms, 0.50);
        self.converge_status_lag_p99_ms = percentile(&s.converge_status_lag_ms, 0.99);
        self.converge_status_lag_max_ms = percentile(&s.converge_status_lag_ms, 1.0);
        self.converge_written_p50_ms = percentile(&s.converge_written_ms, 0.50);
        self.converge_written_p99_ms = percentile(&s.converge_written_ms, 0.99);
        self.converge_written_max_ms = percentile(&s.converge_written_ms, 1.0);
        self.replace_p50_ms = percentile(&s.replace_ms, 0.50);
        self.replace_p90_ms = percentile(&s.replace_ms, 0.90);
        self.replace_p99_ms = percentile(&s.replace_ms, 0.99);
        self.storm_status_lag_p50_ms = percentile(&s.storm_status_lag_ms, 0.50);
        self.storm_status_lag_p99_ms = percentile(&s.storm_status_lag_ms, 0.99);
        self.storm_status_lag_max_ms = percentile(&s.storm_status_lag_ms, 1.0);
        self.storm_newcomer_p50_ms = percentile(&s.storm_newcomer_ms, 0.50);
        self.storm_newcomer_max_ms = percentile(&s.storm_newcomer_ms, 1.0);
    }
}

/// The latencies a run timed, in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Samples {
    pub create_to_pod_ms: Vec<f64>,
    pub seen_pod_ms: Vec<f64>,
    /// Agent created → a phase in its status (`Measured::converge_status_lag_p50_ms`).
    #[serde(default)]
    pub converge_status_lag_ms: Vec<f64>,
    /// Agent created → its status first written (`Measured::converge_written_p50_ms`).
    #[serde(default)]
    pub converge_written_ms: Vec<f64>,
    pub replace_ms: Vec<f64>,
    /// Storm pod Failed → its attempt in `status.restartHistory`
    /// (`Measured::storm_status_lag_p50_ms`).
    #[serde(default)]
    pub storm_status_lag_ms: Vec<f64>,
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

/// The nearest-rank percentile `p` (0..1) of `samples`; 1.0 is the largest.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_the_max_is_the_largest() {
        let samples: Vec<f64> = (1..=200).rev().map(f64::from).collect();
        assert_eq!(percentile(&samples, 0.50), Some(100.0));
        assert_eq!(percentile(&samples, 0.99), Some(198.0));
        assert_eq!(percentile(&samples, 1.0), Some(200.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn the_status_lags_percentiles_come_from_their_own_samples() {
        let mut m = Measured {
            samples: Samples {
                storm_status_lag_ms: vec![9000.0, 100.0, 200.0, 12_000.0],
                converge_status_lag_ms: vec![300.0],
                replace_ms: vec![5.0],
                ..Samples::default()
            },
            ..Measured::default()
        };
        m.set_percentiles();
        assert_eq!(m.storm_status_lag_p50_ms, Some(200.0));
        assert_eq!(m.storm_status_lag_p99_ms, Some(12_000.0));
        assert_eq!(m.storm_status_lag_max_ms, Some(12_000.0));
        assert_eq!(m.converge_status_lag_max_ms, Some(300.0));
        assert_eq!(m.replace_p99_ms, Some(5.0));
    }
}
