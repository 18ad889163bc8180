//! Exploring one scenario: an uninterrupted run counts the operator's M mutating requests and
//! gives the end state; then, for each chosen k in 1..=M, a run whose operator crashes right
//! after its k-th mutating request and is replaced by a fresh one must end in the same state,
//! with the invariants held throughout.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use agent_supervisor::controller::WatchFaults;
use futures::FutureExt;
use tokio::sync::Semaphore;

use crate::monitor::Monitor;
use crate::normal::End;
use crate::points::{crash_points, repeat};
use crate::scenarios::Scenario;
use crate::settle::settle;
use crate::steps::Run;
use crate::support::faults::{Faults, Mutation};
use crate::support::{Operator, TestNamespace};

/// Each object's Events go out at once, up to a hundred a second here (the Events are compared
/// to tell decisions, not how they were limited, which the controller tests show): the last
/// decisions' Events are counted this long after the operator settled.
const EVENTS_OUT: Duration = Duration::from_millis(500);

/// The status interval of the scenarios whose statuses wait (`Scenario::pending`): their
/// crashes come well within it. Others are written at once, or nearly.
const PENDING_INTERVAL: Duration = Duration::from_secs(5);
const PROMPT_INTERVAL: Duration = Duration::from_millis(100);

/// The runs mostly wait (for backoffs, intervals and the operator's requests): on 2 cores, with
/// the control plane on the same machine, the whole binary took 704 s at 4 at once and 360 s at
/// 8, the machine still 70 to 80% idle. More at once shortens it less (the longest scenario's
/// runs follow one another) and loads the API server more.
const SLOTS_DEFAULT: usize = 8;

/// Runs at once across the whole binary (`FAULTS_CONCURRENCY`, default `SLOTS_DEFAULT`).
static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| {
    let permits = std::env::var("FAULTS_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SLOTS_DEFAULT);
    Semaphore::new(permits)
});

/// What one run ended with.
struct Outcome {
    /// The end state (or the state it was stuck in).
    end: End,
    /// Why the scenario never reached its end.
    stuck: Option<String>,
    /// The first operator's mutating requests (all of them, for an uninterrupted run).
    mutations: Vec<Mutation>,
    /// Whether the crash happened.
    crashed: bool,
    /// The mutating requests of the operator started after the crash.
    after_crash: Vec<Mutation>,
    violations: Vec<String>,
    /// The Events recorded about the agents and groups, as `name/Reason`, with how many of each.
    events: BTreeMap<String, usize>,
    /// How many requests the first operator had made when the story reached its focus.
    focus: Option<usize>,
    /// How many it had made when the story ended, before the proof that it settled.
    story_end: usize,
}

/// Explores `scenario` and panics with every broken invariant and every diverging end state.
pub async fn explore(scenario: &'static Scenario) {
    let started = Instant::now();
    let baseline = run_once(scenario, None, WatchFaults::default()).await;
    if let Some(e) = &baseline.stuck {
        panic!(
            "{}: the uninterrupted run failed: {e}\nstate: {:#?}",
            scenario.name, baseline.end
        );
    }
    let want = baseline.end.clone();
    assert!(
        baseline.violations.is_empty(),
        "{}: the uninterrupted run broke invariants: {:?}",
        scenario.name,
        baseline.violations
    );
    let unexpected = (scenario.expect)(&want);
    assert!(
        unexpected.is_empty(),
        "{}: the uninterrupted run did not end as the story says:\n    - {}\nend state: {want:#?}",
        scenario.name,
        unexpected.join("\n    - ")
    );
    let m = baseline.mutations.len();
    eprintln!(
        "faults: {}: uninterrupted run: {m} mutating requests:\n  {}",
        scenario.name,
        lines(&baseline.mutations)
    );

    let points = crash_points(&baseline.mutations, baseline.focus, baseline.story_end);
    let runs: Vec<_> = points
        .iter()
        .flat_map(|&k| std::iter::repeat_n(k, repeat()))
        .map(|k| {
            let run = run_once(scenario, Some(k), WatchFaults::default());
            (k, tokio::spawn(run))
        })
        .collect();
    let explored = runs.len();
    let mut failures = Vec::new();
    let mut not_reached = Vec::new();
    for (k, run) in runs {
        let outcome = run.await.expect("a run's own panics are caught");
        if !outcome.crashed {
            not_reached.push(k);
        }
        let mut problems = outcome.violations.clone();
        problems.extend(outcome.stuck.iter().map(|e| format!("stuck: {e}")));
        problems.extend(want.diff(&outcome.end));
        let events = event_diff(&baseline.events, &outcome.events);
        let at = outcome
            .mutations
            .get(k - 1)
            .map_or("(not reached)".to_string(), |m| m.to_string());
        if problems.is_empty() {
            if events.contains('+') {
                // An Event the uninterrupted run never had: a decision it never made.
                eprintln!(
                    "faults: {}: k={k}, crash after {at}: extra Events: {events}; requests of the restarted operator:\n  {}",
                    scenario.name,
                    lines(&outcome.after_crash)
                );
            } else if !events.is_empty() {
                eprintln!(
                    "faults: {}: k={k}, crash after {at}: Events lost: {events}",
                    scenario.name
                );
            }
            continue;
        }
        failures.push(format!(
            "k={k}, crash after {at}:\n    - {}\n    Events: {}\n    requests before the crash:\n      {}\n    requests of the restarted operator:\n      {}",
            problems.join("\n    - "),
            if events.is_empty() { "as uninterrupted" } else { &events },
            lines(&outcome.mutations).replace("\n  ", "\n      "),
            lines(&outcome.after_crash).replace("\n  ", "\n      "),
        ));
    }
    eprintln!(
        "faults: {}: explored {} crash points ({m} mutating requests) in {:.0}s{}",
        scenario.name,
        explored,
        started.elapsed().as_secs_f64(),
        if not_reached.is_empty() {
            String::new()
        } else {
            format!("; crash point not reached (fewer requests this time): k={not_reached:?}")
        }
    );
    assert!(
        failures.is_empty(),
        "{}: the end state after a crash differs from the uninterrupted run's\n{want:#?}\nin {} of {} runs:\n  {}",
        scenario.name,
        failures.len(),
        explored,
        failures.join("\n  ")
    );
}

fn lines(mutations: &[Mutation]) -> String {
    if mutations.is_empty() {
        return "(none)".into();
    }
    mutations
        .iter()
        .map(Mutation::to_string)
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Event reasons missing or extra, as `-Reason +Reason`.
fn event_diff(want: &BTreeMap<String, usize>, got: &BTreeMap<String, usize>) -> String {
    let mut words = Vec::new();
    for (reason, &n) in want {
        let g = got.get(reason).copied().unwrap_or(0);
        if g < n {
            words.push(format!("-{reason}x{}", n - g));
        }
    }
    for (reason, &n) in got {
        let w = want.get(reason).copied().unwrap_or(0);
        if n > w {
            words.push(format!("+{reason}x{}", n - w));
        }
    }
    words.join(" ")
}

/// The operator's watches late by `lag` and coalesced (Sieve's stale and unobserved states: it
/// decides on caches behind the server, and never sees the states in between).
pub fn late_and_coalesced(lag: Duration) -> WatchFaults {
    WatchFaults {
        lag: Some(lag),
        coalesce: true,
        pods_only: false,
    }
}

/// Only the operator's pod watch late by `lag`: it sees each Agent's changes before the changes
/// its pods went through earlier.
pub fn pod_watch_late(lag: Duration) -> WatchFaults {
    WatchFaults {
        lag: Some(lag),
        coalesce: false,
        pods_only: true,
    }
}

/// Runs `scenario` uninterrupted, then with the operator's watches as `faults` says; both must
/// end alike, nothing done twice.
pub async fn explore_late(scenario: &'static Scenario, faults: WatchFaults) {
    let started = Instant::now();
    let baseline = run_once(scenario, None, WatchFaults::default()).await;
    if let Some(e) = &baseline.stuck {
        panic!("{}: the uninterrupted run failed: {e}", scenario.name);
    }
    ends_alike(scenario, &baseline, faults, started).await;
}

/// Runs `scenario` with the watches `faults` describes; it must end as `baseline` did.
async fn ends_alike(
    scenario: &'static Scenario,
    baseline: &Outcome,
    faults: WatchFaults,
    started: Instant,
) {
    let lag = faults.lag.unwrap_or_default();
    let how = if faults.pods_only {
        format!("the pod watch {lag:?} late")
    } else {
        format!("watches {lag:?} late and coalesced")
    };
    let late = run_once(scenario, None, faults).await;
    let mut problems = late.violations.clone();
    problems.extend(late.stuck.iter().map(|e| format!("stuck: {e}")));
    problems.extend(baseline.end.diff(&late.end));
    let events = event_diff(&baseline.events, &late.events);
    eprintln!(
        "faults: {}: {how}: {} in {:.0}s{}",
        scenario.name,
        if problems.is_empty() {
            "same end state"
        } else {
            "DIFFERENT end state"
        },
        started.elapsed().as_secs_f64(),
        if events.is_empty() {
            String::new()
        } else {
            format!("; Events: {events}")
        },
    );
    assert!(
        problems.is_empty(),
        "{}: with {how} the run ends differently:\n    - {}\n    requests:\n      {}",
        scenario.name,
        problems.join("\n    - "),
        lines(&late.mutations).replace("\n  ", "\n      "),
    );
    assert!(
        !events.contains('+'),
        "{}: with {how} the operator decided something twice: Events {events}",
        scenario.name
    );
}

/// One run of `scenario` in a fresh namespace; with `crash_at`, the operator crashes right
/// after its k-th mutating request and a fresh one takes over.
async fn run_once(
    scenario: &'static Scenario,
    crash_at: Option<usize>,
    watch: WatchFaults,
) -> Outcome {
    let _slot = SLOTS
        .acquire()
        .await
        .expect("the semaphore is never closed");
    let ns = TestNamespace::new().await;
    static CRDS: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    CRDS.get_or_init(|| crate::support::install_crds(&ns.client))
        .await;
    let monitor = Monitor::start(&ns).await;
    let faults = crash_at.map_or_else(Faults::counting, Faults::crash_after);
    let fresh = Faults::counting();
    let config = agent_supervisor::controller::Config {
        namespaces: vec![ns.name.clone()],
        faults: watch,
        event_limit: agent_supervisor::controller::budget::BudgetConfig {
            rate: 100.0,
            burst: 100,
        },
        status_interval: if scenario.pending {
            PENDING_INTERVAL
        } else {
            PROMPT_INTERVAL
        },
        ..Default::default()
    };
    let operator = Operator::start_with_config(faults.client().await, config.clone());
    let supervisor = tokio::spawn(restart_on_crash(
        faults.clone(),
        operator,
        fresh.clone(),
        config,
    ));
    let run = Run::new(ns, scenario.agents[0], faults.clone());
    let driven = AssertUnwindSafe((scenario.drive)(&run))
        .catch_unwind()
        .await;
    let mut story_end = faults.mutations().len();
    let stuck = match driven {
        Ok(()) => {
            // Events that reached a late watch before the story ended are delivered by now.
            tokio::time::sleep(watch.lag.unwrap_or_default()).await;
            story_end = faults.mutations().len();
            let crashed_before_the_end = faults.has_crashed();
            settle(&run.ns, scenario.agents, scenario.groups).await;
            if faults.has_crashed() && !crashed_before_the_end {
                // Crashed while settling: the fresh operator must settle too.
                settle(&run.ns, scenario.agents, scenario.groups).await;
            }
            tokio::time::sleep(EVENTS_OUT).await;
            None
        }
        Err(panic) => Some(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the scenario panicked".into()),
        ),
    };
    let created = monitor.created();
    let end = End::read(&run.ns, scenario.agents, scenario.groups, &created).await;
    let mut violations = monitor.violations();
    violations.extend(end.unexpected_pods(&created));
    // What was told, not how it was sent: Events of one reason close together go out as one,
    // their notes joined, and how many go together depends on timing.
    let told = |note: &str| note.split(" | ").count();
    let mut events = BTreeMap::new();
    for &agent in scenario.agents {
        for (reason, note) in run.ns.events(agent).await {
            *events.entry(format!("{agent}/{reason}")).or_insert(0) += told(&note);
        }
    }
    for &group in scenario.groups {
        for (reason, note) in run.ns.group_events(group).await {
            *events.entry(format!("{group}/{reason}")).or_insert(0) += told(&note);
        }
    }
    supervisor.abort();
    let _ = supervisor.await;
    Outcome {
        end,
        stuck,
        mutations: faults.mutations(),
        crashed: faults.has_crashed(),
        after_crash: fresh.mutations(),
        violations,
        events,
        focus: run.focused_at(),
        story_end,
    }
}

/// Holds the operator; when it crashes, kills it and starts a fresh one on a healthy client,
/// held until this task is aborted.
async fn restart_on_crash(
    faults: Faults,
    operator: Operator,
    fresh: Faults,
    config: agent_supervisor::controller::Config,
) {
    faults.crashed().await;
    operator.kill().await;
    let _operator = Operator::start_with_config(fresh.client().await, config);
    std::future::pending::<()>().await;
}
