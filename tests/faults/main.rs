//! Fault injection against the real API server (Sieve's "intermediate states"): every scenario
//! is run once uninterrupted, then once per crash point k, with the operator crashing right
//! after its k-th mutating request and a fresh operator taking over. Each crashed run must end
//! in the uninterrupted run's state, with at most one live pod per Agent and no pod created
//! twice at every moment, and no Agent's or group's counters ever going back.
//!
//! Scenarios have one agent, several agents sharing an outage (`outage.rs`), or several agents
//! and their groups (`groups.rs`): there, a crash
//! can fall between any two writes of a group restart (the crashed member's status, the
//! group's orders, each sibling's status and pod), and the restart must still happen exactly
//! once for every member.
//!
//! Then, Sieve's "stale" and "unobserved" states: every scenario also runs with the operator's
//! watches two seconds late and coalesced (it decides on caches behind the server and never sees
//! the states in between), and must end as the uninterrupted run does; and with only the pod
//! watch late (watches of different kinds keep no order: an Agent's change may be seen before
//! its pod's earlier one).
//!
//! By default (quick) each scenario explores at most 8 crash points, spread over its requests
//! that act or record (not Events) — for a story with a focus (the group scenarios' crash),
//! those after it; `FAULTS=thorough` explores every crash point; `FAULTS_K=3,7`
//! only those; `FAULTS_REPEAT=n` runs each n times (some bugs depend on how requests
//! interleave); `FAULTS_CONCURRENCY` runs at once across the binary [8].

#[path = "../support/mod.rs"]
mod support;

mod budget;
mod explore;
mod group_normal;
mod groups;
mod layer;
mod monitor;
mod normal;
mod outage;
mod points;
mod scenarios;
mod settle;
mod steps;
mod stops;
mod waiting;

use std::time::Duration;

use explore::explore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_backoff_restart() {
    explore(&scenarios::CRASH_RESTART).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_in_a_row_wait_for_the_interval() {
    explore(&scenarios::CRASH_STORM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_with_backoff_wait_for_the_interval() {
    explore(&scenarios::CRASH_STORM_BACKOFF).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chained_crashes_wait_together() {
    explore(&scenarios::CRASH_STORM_CHAIN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unplaced_crashes_wait_together() {
    explore(&scenarios::CRASH_STORM_FIRST).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_restart() {
    explore(&scenarios::MANUAL_RESTART).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout() {
    explore(&scenarios::ROLLOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_kill() {
    explore(&scenarios::HEARTBEAT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_open_probe_reopen() {
    explore(&scenarios::BREAKER).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_resume() {
    explore(&scenarios::SUSPEND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_termination_message() {
    explore(&scenarios::SHUTDOWN_MESSAGE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_by_status_patch() {
    explore(&scenarios::SHUTDOWN_EXTERNAL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_resume_poison() {
    explore(&scenarios::CHECKPOINTS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_one_for_all() {
    explore(&groups::GROUP_ONE_FOR_ALL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_rest_for_one() {
    explore(&groups::GROUP_REST_FOR_ONE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_escalation() {
    explore(&groups::GROUP_ESCALATION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_give_up_reset() {
    explore(&groups::GROUP_RESET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_hold_probe_release() {
    explore(&outage::OUTAGE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_spent_raised() {
    explore(&budget::BUDGET).await;
}

/// Every scenario, at once, with the operator's watches as `faults` says: each must end as its
/// uninterrupted run does.
async fn every_scenario_ends_alike(faults: agent_supervisor::controller::WatchFaults) {
    let runs: Vec<_> = scenarios::ALL
        .iter()
        .map(|scenario| tokio::spawn(explore::explore_late(scenario, faults)))
        .collect();
    let mut failures = Vec::new();
    for run in runs {
        if let Err(e) = run.await {
            failures.push(e.to_string());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_ends_alike_with_late_and_coalesced_watches() {
    every_scenario_ends_alike(explore::late_and_coalesced(Duration::from_secs(2))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_ends_alike_with_a_late_pod_watch() {
    every_scenario_ends_alike(explore::pod_watch_late(Duration::from_secs(2))).await;
}
