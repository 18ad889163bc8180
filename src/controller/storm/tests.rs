use serde_json::json;

use super::*;
use crate::api::{GroupMembership, RestartRecord};

/// A record of `attempt`'s end, for `trigger`.
fn record(attempt: u32, trigger: &str) -> RestartRecord {
    serde_json::from_value(json!({ "attempt": attempt, "trigger": trigger })).expect("a record")
}

/// As written: attempt 2 pending, attempt 1's crash and restart recorded.
fn written() -> AgentStatus {
    AgentStatus {
        attempt: 2,
        phase: Some(Phase::Pending),
        restart_history: vec![record(1, "Failure")],
        ..AgentStatus::default()
    }
}

/// Attempt 2 crashed and attempt 3 was created for it.
fn restarted() -> Plan {
    Plan {
        status: AgentStatus {
            attempt: 3,
            phase: Some(Phase::Pending),
            restart_history: vec![record(2, "Failure"), record(1, "Failure")],
            ..AgentStatus::default()
        },
        ..Plan::default()
    }
}

#[test]
fn a_failure_and_its_restart_may_wait() {
    assert!(may_wait(&written(), &restarted(), false));
    // Its pod now runs: still only that restart to record.
    let mut running = restarted();
    running.status.phase = Some(Phase::Running);
    assert!(may_wait(&written(), &running, false));
}

#[test]
fn a_failure_waiting_for_its_backoff_may_wait_too() {
    let mut backing_off = restarted();
    backing_off.status.attempt = 2;
    backing_off.status.phase = Some(Phase::BackingOff);
    assert!(may_wait(&written(), &backing_off, false));
    // Its restart, made from the held record: still one failure unrecorded.
    assert!(may_wait(&written(), &restarted(), false));
    // The breaker opened instead: news, written at once.
    let mut opened = backing_off.clone();
    opened.status.phase = Some(Phase::CircuitOpen);
    assert!(!may_wait(&written(), &opened, false));
    // Stopped for good: written at once.
    let mut stopped = backing_off;
    stopped.status.phase = Some(Phase::Stopped);
    assert!(!may_wait(&written(), &stopped, false));
}

#[test]
fn failures_in_a_row_wait_together_up_to_a_bound() {
    // Attempt 3 crashed too before anything was written: attempt 4's record waits as well.
    let mut again = restarted();
    again.status.attempt = 4;
    again.status.restart_history.insert(0, record(3, "Failure"));
    assert!(may_wait(&written(), &again, false));
    // A second failure, of the attempt held back, backing off: waits too.
    let mut twice = restarted();
    twice.status.phase = Some(Phase::BackingOff);
    twice.status.restart_history.insert(0, record(3, "Failure"));
    assert!(may_wait(&written(), &twice, false));
    // As many as a successor rebuilds, no more.
    let mut many = restarted();
    for attempt in 3..=(1 + UNRECORDED as u32) {
        many.status
            .restart_history
            .insert(0, record(attempt, "Failure"));
    }
    many.status.attempt = 2 + UNRECORDED as u32;
    assert!(may_wait(&written(), &many, false));
    let mut more = many.clone();
    more.status
        .restart_history
        .insert(0, record(2 + UNRECORDED as u32, "Failure"));
    more.status.attempt += 1;
    assert!(!may_wait(&written(), &more, false));
    // One of them is not a failure (a person asked for it): written.
    let mut asked = again.clone();
    asked.status.restart_history[1] = record(2, "Manual");
    assert!(!may_wait(&written(), &asked, false));
    // An attempt missing from the history (a lower historyLimit cut it): written.
    let mut cut = again;
    cut.status.restart_history.truncate(1);
    assert!(!may_wait(&written(), &cut, false));
}

#[test]
fn a_first_pod_failed_before_anything_was_written_may_wait() {
    // Attempt 1 crashed, attempt 2 was created for it: a successor decides that failure again
    // from the first pod, as the first decision did.
    let never = AgentStatus::default();
    let mut first = restarted();
    first.status.attempt = 2;
    first.status.restart_history = vec![record(1, "Failure")];
    assert!(may_wait(&never, &first, false));
    // And attempt 2 crashed as well, before anything was written.
    let mut again = first.clone();
    again.status.attempt = 3;
    again.status.restart_history.insert(0, record(2, "Failure"));
    assert!(may_wait(&never, &again, false));
    // The first pod only pending or running: no failure to hold (its record is catch_up's).
    let mut pending = first.clone();
    pending.status.attempt = 1;
    pending.status.restart_history.clear();
    assert!(!may_wait(&never, &pending, false));
    // A history that does not start at the first attempt: written.
    let mut skipped = first.clone();
    skipped.status.restart_history = vec![record(2, "Failure")];
    assert!(!may_wait(&never, &skipped, false));
    // Watched, or a member of a group: written at once, as for a written status.
    assert!(!may_wait(&never, &first, true));
    let mut member = first;
    member.status.group = Some(GroupMembership {
        name: "g".into(),
        handled_reset: None,
    });
    assert!(!may_wait(&never, &member, false));
}

#[test]
fn only_what_a_successor_rebuilds_is_unrecorded() {
    // Written, but not running: a successor could not rebuild a failure from it.
    let mut stopped = written();
    stopped.phase = Some(Phase::Stopped);
    assert!(!may_wait(&stopped, &restarted(), false));
    // The written failure waited for its backoff: the restart alone is not what waits.
    let mut backing_off = written();
    backing_off.phase = Some(Phase::BackingOff);
    backing_off.restart_history.insert(0, record(2, "Failure"));
    assert!(!may_wait(&backing_off, &restarted(), false));
    // Nothing failed since the written attempt: nothing to hold.
    let mut same = restarted();
    same.status.attempt = 2;
    same.status.restart_history.remove(0);
    assert!(!may_wait(&written(), &same, false));
}

#[test]
fn what_others_read_or_a_person_asked_for_is_written_at_once() {
    assert!(!may_wait(&written(), &restarted(), true), "watched");
    let mut manual = restarted();
    manual.status.restart_history[0] = record(2, "Manual");
    assert!(!may_wait(&written(), &manual, false));
    let mut member = restarted();
    member.status.group = Some(GroupMembership {
        name: "g".into(),
        handled_reset: None,
    });
    assert!(!may_wait(&written(), &member, false));
    let mut killing = restarted();
    killing.delete_pod = Some("a-3".into());
    assert!(!may_wait(&written(), &killing, false));
    let mut stopped = restarted();
    stopped.status.phase = Some(Phase::BackingOff);
    assert!(!may_wait(&written(), &stopped, false));
}

fn agent(resource_version: &str) -> Agent {
    serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u1",
            "resourceVersion": resource_version},
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}},
        "status": {"attempt": 2},
    }))
    .expect("an Agent")
}

#[test]
fn a_held_record_lasts_while_the_agent_status_is_as_it_was_decided_on() {
    let held = Held::default();
    assert!(held.get(&agent("5")).is_none());
    held.hold(&agent("5"), restarted().status, Instant::now(), 0);
    let record = held.get(&agent("5")).expect("held");
    assert_eq!(record.status.attempt, 3);
    assert_eq!(record.apply(&agent("5")).status.map(|s| s.attempt), Some(3));
    // Its spec or annotations changed: still held.
    assert!(held.get(&agent("6")).is_some());
    // Someone else wrote its status: the record is dropped, for good.
    let mut patched = agent("7");
    patched.status.as_mut().expect("a status").restart_count = 9;
    assert!(held.get(&patched).is_none());
    assert!(held.get(&agent("7")).is_none());
    held.hold(&agent("5"), restarted().status, Instant::now(), 0);
    held.release(&agent("5"));
    assert!(held.get(&agent("5")).is_none());
}

#[test]
fn an_agents_records_wait_as_long_each_time_and_agents_differ() {
    let config = StormConfig::default();
    let waits: Vec<Duration> = (0..64)
        .map(|i| config.wait_of(&format!("uid-{i}"), 1, None))
        .collect();
    assert_eq!(
        config.wait_of("uid-7", 1, None),
        waits[7],
        "the same agent waits as long each time"
    );
    for wait in &waits {
        assert!(
            *wait <= config.wait && *wait > config.wait - config.spread,
            "{wait:?}"
        );
    }
    let shortest = waits.iter().min().unwrap();
    let longest = waits.iter().max().unwrap();
    assert!(
        *longest - *shortest > config.spread / 2,
        "spread over {shortest:?}..{longest:?}"
    );
    let exact = StormConfig {
        spread: Duration::ZERO,
        ..config
    };
    assert_eq!(exact.wait_of("uid-7", 1, None), exact.wait);
}

#[test]
fn records_wait_longer_when_many_wait_up_to_the_most_a_record_waits() {
    let config = StormConfig {
        spread: Duration::ZERO,
        ..StormConfig::default()
    };
    // At 5 a second, 50 records are written in `wait` (10 s): so many wait no longer.
    assert_eq!(config.wait_of("uid-7", 50, None), config.wait);
    assert_eq!(config.wait_of("uid-7", 200, None), Duration::from_secs(40));
    assert_eq!(config.wait_of("uid-7", 10_000, None), config.max_wait);
    // An agent's share of the spread is the same part of a longer wait.
    let spread = StormConfig::default();
    let (short, long) = (
        spread.wait_of("uid-7", 1, None),
        spread.wait_of("uid-7", 200, None),
    );
    assert!(
        short < spread.wait && long < Duration::from_secs(40),
        "{short:?} {long:?}"
    );
    assert_eq!(long.as_millis() / 100, (short * 4).as_millis() / 100);
}

/// Attempts 2 up to `last` crashed, each `every` seconds after the one before, and the last
/// was restarted: the plan while attempt 2 is written running.
fn crashed_every(every: i64, last: u32) -> Plan {
    let mut plan = restarted();
    plan.status.attempt = last + 1;
    plan.status.restart_history = (1..=last)
        .rev()
        .map(|attempt| {
            let mut r = record(attempt, "Failure");
            let at =
                jiff::Timestamp::from_second(1_800_000_000 + every * i64::from(attempt)).unwrap();
            r.failed_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
            r
        })
        .collect();
    plan
}

#[test]
fn a_record_waits_no_longer_than_until_its_last_failure_that_may_wait() {
    let written = AgentStatus {
        phase: Some(Phase::Running),
        ..written()
    };
    // One failure: its pace is not known yet.
    let one = crashed_every(3, 2);
    assert_eq!(unrecorded(&written, &one), Some(1));
    assert_eq!(until_full(&one, 1), None);
    // Failures 3 s apart: the last that may wait (the tenth) is due 27 s after the first.
    let last = UNRECORDED as u64 - 1;
    let three = crashed_every(3, 4);
    assert_eq!(unrecorded(&written, &three), Some(3));
    assert_eq!(until_full(&three, 3), Some(Duration::from_secs(3 * last)));
    // Faster than a second apart (the times are to the second): taken for a second.
    assert_eq!(
        until_full(&crashed_every(0, 4), 3),
        Some(Duration::from_secs(last))
    );
    // The wait: the sooner of that and the pace's, spread by agent as before.
    let config = StormConfig {
        spread: Duration::ZERO,
        ..StormConfig::default()
    };
    let full = Duration::from_secs(21);
    assert_eq!(config.wait_of("uid-7", 200, Some(full)), full);
    assert_eq!(config.wait_of("uid-7", 1, Some(full)), config.wait);
    let spread = StormConfig::default();
    assert!(spread.wait_of("uid-7", 200, Some(full)) < full);
}

#[test]
fn a_record_waits_behind_the_most_that_waited_with_it() {
    let held = Held::default();
    let now = Instant::now();
    let most = StormConfig::default().max_wait;
    for i in 0..200 {
        held.hold(&named(&format!("other-{i}")), restarted().status, now, i);
    }
    assert_eq!(
        held.queued(None, now, most),
        200,
        "a record begins to wait behind all"
    );
    held.hold(&named("a"), restarted().status, now, 200);
    let record = held.get(&named("a")).expect("held");
    for i in 200..240 {
        held.hold(&named(&format!("other-{i}")), restarted().status, now, i);
    }
    assert_eq!(
        held.queued(Some(&record), now, most),
        241,
        "records that begin to wait after it make it wait longer"
    );
    let record = Record {
        queued: 241,
        ..record
    };
    for i in 0..190 {
        held.release(&named(&format!("other-{i}")));
    }
    assert_eq!(held.count(now, most), 51);
    assert_eq!(
        held.queued(Some(&record), now, most),
        241,
        "records written meanwhile do not bring it forward"
    );
}

#[test]
fn records_held_longer_than_any_waits_are_not_counted() {
    let held = Held::default();
    let long_ago = Instant::now();
    let most = StormConfig::default().max_wait;
    let now = long_ago + most * 2;
    held.hold(&agent("5"), restarted().status, now, 0);
    let mut gone = agent("5");
    gone.metadata.name = Some("b".into());
    held.hold(&gone, restarted().status, long_ago, 0);
    assert_eq!(held.count(now, most), 1);
}

#[test]
fn records_of_agents_gone_unseen_are_forgotten_in_time() {
    let base = Instant::now();
    let later = base + Held::KEPT * 2;
    let record = |since| Record {
        uid: "u1".into(),
        written: AgentStatus::default(),
        status: restarted().status,
        since,
        queued: 0,
        turn: None,
    };
    let key = |name: &str| ("ns".to_string(), name.to_string());
    let mut records = Records::default();
    records.by_agent.insert(key("gone"), record(base));
    records
        .by_agent
        .insert(key("live"), record(later - Held::KEPT / 2));
    records.sweep(later);
    assert_eq!(records.by_agent.len(), 2, "not swept after one record");
    for _ in 0..1024 {
        records.sweep(later);
    }
    assert!(
        !records.by_agent.contains_key(&key("gone")),
        "held longer than KEPT"
    );
    assert!(
        records.by_agent.contains_key(&key("live")),
        "held within KEPT"
    );
}

#[test]
fn as_many_failures_wait_as_a_default_history_keeps() {
    let limit = crate::api::defaults::history_limit();
    assert_eq!(UNRECORDED, usize::try_from(limit).expect("a small number"));
}

fn named(name: &str) -> Agent {
    let mut agent = agent("5");
    agent.metadata.name = Some(name.into());
    agent
}

#[test]
fn records_due_together_are_written_in_turns_before_they_are_due() {
    let held = Held::default();
    let now = Instant::now();
    let due = now + Duration::from_secs(10);
    let turn = || Turn {
        now,
        due,
        per_second: 8.0,
    };
    let mut at: Vec<Instant> = (0..20)
        .map(|i| {
            held.hold_for_turn(
                &named(&format!("a-{i}")),
                restarted().status,
                now,
                0,
                turn(),
            )
        })
        .collect();
    assert!(at.iter().all(|t| *t <= due && *t >= now), "never late");
    assert!(
        at[0] > due - Duration::from_millis(125),
        "the first takes the last turn"
    );
    at.sort();
    at.dedup();
    assert_eq!(at.len(), 20, "one record a turn");
    for pair in at.windows(2) {
        let apart = pair[1] - pair[0];
        assert!(
            apart > Duration::from_millis(120) && apart < Duration::from_millis(130),
            "{apart:?}"
        );
    }
    // Taken again, a record's turn is the one it gave back; released, its turn is free.
    let again = held.hold_for_turn(&named("a-0"), restarted().status, now, 0, turn());
    assert_eq!(again, *at.last().unwrap());
    held.release(&named("a-0"));
    let next = held.hold_for_turn(&named("b"), restarted().status, now, 0, turn());
    assert_eq!(next, *at.last().unwrap());
}

#[test]
fn a_record_without_a_free_turn_is_written_when_due() {
    let held = Held::default();
    let now = Instant::now();
    let due = now + Duration::from_millis(300);
    let turn = |per_second| Turn {
        now,
        due,
        per_second,
    };
    let at: Vec<Instant> = (0..6)
        .map(|i| {
            held.hold_for_turn(
                &named(&format!("a-{i}")),
                restarted().status,
                now,
                0,
                turn(8.0),
            )
        })
        .collect();
    // Two or three turns come within 300 ms: those after them wait until they are due.
    let turned = at.iter().filter(|t| **t < due).count();
    assert!((2..=3).contains(&turned), "{turned} of {at:?}");
    assert!(at[turned..].iter().all(|t| *t == due));
    // No turns at all: every record is written when due.
    let none = held.hold_for_turn(&named("b"), restarted().status, now, 0, turn(0.0));
    assert_eq!(none, due);
}
