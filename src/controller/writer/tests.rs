//! The writer's edges, what may wait, and what it forgets.

use prometheus_client::metrics::gauge::Gauge;

use super::*;
use crate::api::{Phase, RestartRecord, Trigger};
use crate::supervise::Plan;

fn agent(name: &str, uid: &str, status: AgentStatus) -> Agent {
    let mut agent = Agent::new(
        name,
        serde_json::from_value(serde_json::json!({
            "template": { "spec": { "containers": [{ "name": "a", "image": "a" }] } }
        }))
        .unwrap(),
    );
    agent.metadata.namespace = Some("team".into());
    agent.metadata.uid = Some(uid.into());
    agent.status = Some(status);
    agent
}

fn running(attempt: u32) -> AgentStatus {
    AgentStatus {
        attempt,
        phase: Some(Phase::Running),
        ..AgentStatus::default()
    }
}

fn failed(attempt: u32, trigger: Trigger) -> RestartRecord {
    let trigger = serde_json::to_value(trigger).unwrap();
    serde_json::from_value(serde_json::json!({ "attempt": attempt, "trigger": trigger })).unwrap()
}

/// A plan that records the failures of `attempts` (newest last), each restarted, with the pod of
/// the attempt after the last pending.
fn restarted(attempts: std::ops::RangeInclusive<u32>) -> Plan {
    let mut status = AgentStatus {
        attempt: attempts.end() + 1,
        phase: Some(Phase::Pending),
        ..AgentStatus::default()
    };
    for attempt in attempts {
        status
            .restart_history
            .insert(0, failed(attempt, Trigger::Failure));
    }
    Plan {
        status,
        ..Plan::default()
    }
}

#[test]
fn a_quiet_agent_is_written_at_once_and_a_busy_one_when_its_interval_is_up() {
    let writer = Writer::new(Duration::from_secs(10), Gauge::default());
    let a = agent("a", "u1", running(1));
    let t0 = Instant::now();
    assert_eq!(writer.when(&a, t0), When::Now, "never written");
    assert_eq!(writer.wrote(&a, t0), None, "nothing was pending");
    let t1 = t0 + Duration::from_secs(2);
    let When::At(due) = writer.when(&a, t1) else {
        panic!("written 2 s ago: the change waits");
    };
    // When its interval is up, less the time to serve the write and a little by agent.
    assert!(due <= t0 + Duration::from_secs(9));
    assert!(due >= t0 + Duration::from_secs(8));
    assert_eq!(writer.when(&a, t0 + Duration::from_secs(10)), When::Now);
    assert_eq!(
        writer.when(&a, due),
        When::Now,
        "due: written, not held again"
    );
    // Another agent is not concerned.
    assert_eq!(writer.when(&agent("b", "u2", running(1)), t1), When::Now);
}

#[test]
fn a_slow_api_server_has_trailing_writes_sent_sooner_by_its_longest_round_trip_lately() {
    let trips = RoundTrips::new(Duration::from_secs(10));
    let writer = Writer::new(Duration::from_secs(10), Gauge::default()).timed_by(trips.clone());
    let unmeasured = Writer::new(Duration::from_secs(10), Gauge::default());
    let a = agent("a", "u1", running(1));
    let t0 = Instant::now();
    writer.wrote(&a, t0);
    unmeasured.wrote(&a, t0);
    let t1 = t0 + Duration::from_secs(1);
    let due = |w: &Writer| match w.when(&a, t1) {
        When::At(due) => due,
        When::Now => panic!("written a second ago: the change waits"),
    };
    assert_eq!(
        due(&writer),
        due(&unmeasured),
        "answered quickly: as before"
    );
    // Answers of up to 2 s lately: sent 2 s sooner.
    trips.observe(Duration::from_millis(300), t1);
    trips.observe(Duration::from_secs(2), t1);
    assert_eq!(due(&unmeasured) - due(&writer), Duration::from_secs(2));
    // A first record too.
    let new = agent("n", "u2", AgentStatus::default());
    assert_eq!(
        unmeasured.first_due(&new, t1) - writer.first_due(&new, t1),
        Duration::from_secs(2)
    );
    // Never sooner than half the interval (and the agent's share of the spread) before it is up.
    trips.observe(Duration::from_secs(30), t1);
    let sooner = due(&unmeasured) - due(&writer);
    assert_eq!(
        sooner,
        Duration::from_secs(4),
        "the second of SERVED and 4 s more"
    );
    assert!(due(&writer) >= t0 + Duration::from_secs(4));
    // Round trips two intervals old no longer count.
    let later = t0 + Duration::from_secs(30);
    writer.wrote(&a, later);
    unmeasured.wrote(&a, later);
    assert_eq!(writer.when(&a, later), unmeasured.when(&a, later));
}

#[test]
fn a_pending_status_is_decided_from_and_moved_onto_what_someone_else_writes() {
    let writer = Writer::new(Duration::from_secs(10), Gauge::default());
    let a = agent("a", "u1", running(1));
    let t0 = Instant::now();
    let decided = restarted(1..=1).status;
    writer.hold(&a, decided.clone(), t0, t0 + Duration::from_secs(10));
    let pending = writer.pending(&a).expect("held");
    assert_eq!(pending.status, decided);
    assert_eq!(pending.apply(&a).status, Some(decided.clone()));
    // A later change keeps the time of the first one not written.
    writer.hold(&a, restarted(1..=2).status, t0 + Duration::from_secs(3), t0);
    assert_eq!(writer.pending(&a).unwrap().since, t0);
    // Someone else writes the status (a shutdown): what was pending is moved onto theirs, never
    // dropped; it keeps its first change's time, and is what the next decision starts from.
    let mut theirs = running(1);
    theirs.handled_restart_request = Some("by hand".into());
    let changed = agent("a", "u1", theirs);
    let rebased = writer.pending(&changed).expect("rebased, not dropped");
    assert_eq!(rebased.since, t0);
    assert_eq!(
        rebased.status.restart_history.len(),
        2,
        "the failures it held"
    );
    assert_eq!(rebased.status.attempt, 3);
    assert_eq!(
        rebased.status.handled_restart_request.as_deref(),
        Some("by hand"),
        "what they wrote"
    );
    assert_eq!(rebased.written.status, changed.status, "the new base");
    assert_eq!(
        writer.pending(&changed).expect("kept").status,
        rebased.status
    );
    // A namesake with another uid is another Agent.
    writer.hold(&a, decided, t0, t0);
    assert!(writer.pending(&agent("a", "u9", running(1))).is_none());
}

#[test]
fn writing_takes_what_was_pending_and_a_stop_takes_everything() {
    let writer = Writer::new(Duration::from_secs(10), Gauge::default());
    let (a, b) = (agent("a", "u1", running(1)), agent("b", "u2", running(1)));
    let t0 = Instant::now();
    writer.hold(&a, restarted(1..=1).status, t0, t0);
    writer.hold(&b, restarted(1..=1).status, t0, t0);
    assert_eq!(writer.wrote(&a, t0 + Duration::from_secs(1)), Some(t0));
    assert!(writer.pending(&a).is_none());
    let taken = writer.take_pending();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].written.metadata.name.as_deref(), Some("b"));
    assert!(writer.take_pending().is_empty());
}

#[test]
fn a_deleted_agent_is_forgotten_and_idle_ones_are_swept() {
    let writer = Writer::new(Duration::from_secs(10), Gauge::default());
    let t0 = Instant::now();
    for i in 0..100 {
        let a = agent(&format!("a{i}"), &format!("u{i}"), running(1));
        writer.wrote(&a, t0);
        writer.hold(&a, restarted(1..=1).status, t0, t0);
    }
    assert_eq!((writer.len(), writer.pending.get()), (100, 100));
    for i in 0..50 {
        writer.forget(&agent(&format!("a{i}"), &format!("u{i}"), running(1)));
    }
    assert_eq!((writer.len(), writer.pending.get()), (50, 50));
    // Kept while written within the interval, or pending until an interval past due.
    writer.sweep(t0 + Duration::from_secs(5));
    assert_eq!(writer.len(), 50, "written within the interval: kept");
    let b = agent("b", "ub", running(1));
    writer.hold(
        &b,
        restarted(1..=1).status,
        t0,
        t0 + Duration::from_secs(20),
    );
    writer.sweep(t0 + Duration::from_secs(25));
    assert_eq!(writer.len(), 1, "only the one pending, due 5 s ago");
    writer.sweep(t0 + Duration::from_secs(31));
    assert!(writer.is_empty(), "due an interval ago: its Agent is gone");
    // Deleted, as the watch tells it.
    writer.hold(&b, restarted(1..=1).status, t0, t0);
    assert_eq!(writer.pending.get(), 1);
    writer.forget_named("team", "b");
    assert!(writer.is_empty());
    assert_eq!(writer.pending.get(), 0, "counted out");
}

#[test]
fn only_failures_restarted_by_their_pods_may_wait() {
    let written = running(1);
    assert!(may_wait(&written, &restarted(1..=1), false));
    assert!(may_wait(&written, &restarted(1..=4), false));
    assert!(
        !may_wait(&written, &restarted(1..=5), false),
        "more than MAX_UNRECORDED failures: written now"
    );
    assert!(!may_wait(&written, &restarted(1..=1), true), "watched");
    assert!(
        !may_wait(&AgentStatus::default(), &restarted(1..=1), false),
        "never written"
    );
    // The pod now runs: a phase may wait.
    let mut settled = Plan {
        status: running(1),
        ..Plan::default()
    };
    settled.status.phase = Some(Phase::Running);
    assert!(may_wait(
        &AgentStatus {
            phase: Some(Phase::Pending),
            ..running(1)
        },
        &settled,
        false
    ));
    // Anything else goes at once.
    let mut manual = restarted(1..=1);
    manual.status.restart_history[0].trigger = Trigger::Manual;
    assert!(!may_wait(&written, &manual, false));
    let mut kill = restarted(1..=1);
    kill.delete_pod = Some("a-2".into());
    assert!(!may_wait(&written, &kill, false));
    let mut open = restarted(1..=1);
    open.status.phase = Some(Phase::CircuitOpen);
    assert!(!may_wait(&written, &open, false));
    let mut stopped = restarted(1..=1);
    stopped.status.phase = Some(Phase::Stopped);
    assert!(!may_wait(&written, &stopped, false));
    let mut handled = restarted(1..=1);
    handled.status.handled_reset_request = Some("1".into());
    assert!(!may_wait(&written, &handled, false));
    let mut member = restarted(1..=1);
    member.status.group = Some(crate::api::GroupMembership {
        name: "g".into(),
        handled_reset: None,
    });
    assert!(!may_wait(&written, &member, false));
}

#[test]
fn a_new_agents_first_pod_waits_for_its_interval_from_its_first_decision() {
    let writer = Writer::new(Duration::from_secs(10), Gauge::default());
    let never = AgentStatus::default();
    let a = agent("a", "u1", never.clone());
    let mut first = Plan {
        status: AgentStatus {
            attempt: 1,
            phase: Some(Phase::Pending),
            ..AgentStatus::default()
        },
        ..Plan::default()
    };
    assert!(first_may_wait(&never, &first, false));
    let t0 = Instant::now();
    let due = writer.first_due(&a, t0);
    assert!(due <= t0 + Duration::from_secs(9) && due >= t0 + Duration::from_secs(8));
    writer.hold(&a, first.status.clone(), t0, due);
    // Its pod runs: still due when the first decision's interval is up.
    first.status.phase = Some(Phase::Running);
    assert!(first_may_wait(&never, &first, false));
    assert_eq!(writer.first_due(&a, t0 + Duration::from_secs(3)), due);
    // It crashed, or is watched, or someone wrote its status: not a first record.
    assert!(!first_may_wait(&never, &restarted(1..=1), false));
    assert!(!first_may_wait(&never, &first, true));
    assert!(!first_may_wait(&running(1), &first, false));
}

#[test]
fn a_new_agents_first_record_is_due_an_interval_after_its_creation() {
    let writer = Writer::new(Duration::from_secs(10), Gauge::default());
    let mut a = agent("a", "u-a", AgentStatus::default());
    let t0 = Instant::now();
    // Decided 4 s after it was created (it waited in the queue): due 4 s sooner.
    let created = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(4);
    a.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        created,
    ));
    let due = writer.first_due(&a, t0);
    assert!(due <= t0 + Duration::from_secs(5), "{:?}", due - t0);
    assert!(due >= t0 + Duration::from_secs(4) - Duration::from_millis(100));
    // Created long ago and never written (a successor finds it so): overdue, written at once.
    a.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3600),
    ));
    assert!(writer.first_due(&a, t0) <= t0);
}
