//! Where the operator is made to crash: which of the uninterrupted run's mutating requests,
//! and how many times each.

use crate::support::faults::Mutation;

/// Quick mode explores at most this many crash points per scenario.
const QUICK_POINTS: usize = 8;

/// The crash points to explore, given the uninterrupted run's requests: `FAULTS_K=3,7` picks
/// them; `FAULTS=thorough` takes every one; else (quick) the requests that act or record —
/// everything but Events, whose loss only loses that Event — at most `QUICK_POINTS` of them,
/// spread evenly from the first to the last (or from the first after the story's focus). The
/// requests of the proof that the operator settled are not the story's: no crash is put there.
pub fn crash_points(baseline: &[Mutation], focus: Option<usize>, story_end: usize) -> Vec<usize> {
    if let Ok(list) = std::env::var("FAULTS_K") {
        return list
            .split(',')
            .map(|k| k.trim().parse().expect("FAULTS_K is a list of numbers"))
            .collect();
    }
    if std::env::var("FAULTS").is_ok_and(|v| v == "thorough") {
        return (1..=story_end.min(baseline.len())).collect();
    }
    let acts: Vec<usize> = baseline
        .iter()
        .filter(|m| !is_event(&m.path) && m.index > focus.unwrap_or(0))
        .filter(|m| m.index <= story_end)
        .map(|m| m.index)
        .collect();
    if acts.len() <= QUICK_POINTS {
        return acts;
    }
    let mut points: Vec<usize> = (0..QUICK_POINTS)
        .map(|i| acts[i * (acts.len() - 1) / (QUICK_POINTS - 1)])
        .collect();
    points.dedup();
    points
}

/// How many times each crash point is run (`FAULTS_REPEAT`, default 1): the operator's
/// requests interleave differently from run to run, and so do some of its bugs.
pub fn repeat() -> usize {
    std::env::var("FAULTS_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Whether a request creates or updates an Event (`…/events`, `…/events/<name>`): not a point
/// the quick exploration spends a crash on.
fn is_event(path: &str) -> bool {
    path.ends_with("/events") || path.rsplit('/').nth(1) == Some("events")
}
