//! Which Event a repeat updates, the per-object limit, the reasons never held, the bounded queue
//! and memory of the Event sender.

use std::time::Duration;

use futures::FutureExt;

use super::*;
use crate::controller::events::{kube_event, related};

fn pending(reason: &str, note: &str, pod: &str, second: i64) -> Pending {
    let related = related("v1", "Pod", pod, Some("team".into()));
    Pending::new(
        kube_event(reason, reason == "Crashed", note, Some(related)),
        jiff::Timestamp::from_second(second).unwrap(),
    )
}

fn key(uid: &str) -> WindowKey {
    WindowKey {
        namespace: Some("team".into()),
        name: Some("a".into()),
        uid: Some(uid.into()),
    }
}

fn objects() -> Objects {
    Objects::new(100, 100)
}

/// Offers one Event about `key` at `now` and returns what is sent next.
/// `u1` sends its whole burst of `Crashed` Events at `t0`.
fn spend_the_burst(objects: &mut Objects, t0: Instant) {
    for i in 0..25 {
        offer_and_send(objects, &key("u1"), pending("Crashed", "c", "a", i), t0);
    }
}

fn offer_and_send(objects: &mut Objects, key: &WindowKey, p: Pending, now: Instant) -> Send {
    objects.offer(key, [p], LIMIT, now);
    let send = match objects.next(key, now) {
        Step::Send(send) => *send,
        Step::Wait(..) => panic!("waits for a token"),
        Step::Done => panic!("nothing to send"),
    };
    assert!(
        matches!(objects.next(key, now), Step::Done),
        "nothing else waits"
    );
    send
}

fn is_waiting(step: Step) -> Option<Instant> {
    match step {
        Step::Wait(at, _) => Some(at),
        _ => None,
    }
}

#[test]
fn a_repeat_updates_the_event_its_reason_made_until_its_window_is_over() {
    let mut objects = objects();
    let t0 = Instant::now();
    let first = offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Crashed", "exit 1", "a-1", 10),
        t0,
    );
    assert!(!first.update, "the first is made");
    assert_eq!((first.count, first.name.starts_with("a.")), (1, true));
    let t1 = t0 + Duration::from_secs(30);
    let repeat = offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Crashed", "exit 2", "a-2", 40),
        t1,
    );
    assert!(repeat.update, "a repeat updates it");
    assert_eq!(repeat.name, first.name);
    assert_eq!(repeat.count, 2);
    assert_eq!(
        repeat.first.as_second(),
        10,
        "first seen when the first happened"
    );
    assert_eq!(repeat.last.as_second(), 40);
    assert_eq!(
        repeat.event.note.as_deref(),
        Some("exit 2"),
        "the newest note"
    );
    let pod = repeat
        .event
        .secondary
        .as_ref()
        .and_then(|r| r.name.as_deref());
    assert_eq!(pod, Some("a-2"), "the newest pod");
    // Another reason makes its own Event; so does the same reason as a Normal Event.
    let other = offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Restarted", "r", "a-2", 41),
        t1,
    );
    assert!(!other.update);
    assert_ne!(other.name, first.name);
    // A namesake created since is another object.
    let namesake = offer_and_send(
        &mut objects,
        &key("u2"),
        pending("Crashed", "x", "a-1", 42),
        t1,
    );
    assert!(!namesake.update);
    // Within the window of its last send, a repeat still updates; after it, a new one is made.
    let t2 = t1 + WINDOW - Duration::from_secs(1);
    let third = offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Crashed", "exit 3", "a-3", 50),
        t2,
    );
    assert_eq!(
        (third.update, third.count, &third.name),
        (true, 3, &first.name)
    );
    let t3 = t2 + WINDOW;
    let later = offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Crashed", "exit 4", "a-4", 60),
        t3,
    );
    assert!(!later.update, "the window is over: a new Event");
    assert_ne!(later.name, first.name);
    assert_eq!((later.count, later.first.as_second()), (1, 60));
}

#[test]
fn the_limit_is_a_burst_of_25_then_a_token_every_five_minutes_updates_included() {
    let mut objects = objects();
    let t0 = Instant::now();
    for i in 0..25 {
        let send = offer_and_send(
            &mut objects,
            &key("u1"),
            pending("Crashed", "c", "a", i),
            t0,
        );
        assert_eq!(
            send.count,
            i as u32 + 1,
            "each repeat is an update that takes a token"
        );
    }
    // The burst is spent: the repeats that come wait for a token, counted into one.
    let (start, dropped) =
        objects.offer(&key("u1"), [pending("Crashed", "26", "a", 26)], LIMIT, t0);
    assert_eq!(
        (start, dropped),
        (true, 0),
        "the task of the object starts again"
    );
    let at = is_waiting(objects.next(&key("u1"), t0)).expect("waits");
    assert_eq!(at, t0 + Duration::from_secs(300));
    let (start, _) = objects.offer(&key("u1"), [pending("Crashed", "27", "a", 27)], LIMIT, t0);
    assert!(!start, "its task already runs");
    assert_eq!(objects.queued, 1, "a repeat of one waiting takes no room");
    let Step::Send(send) = objects.next(&key("u1"), at) else {
        panic!("a token is back")
    };
    assert_eq!((send.update, send.count), (true, 27), "every repeat told");
    assert_eq!(send.event.note.as_deref(), Some("27"));
    assert!(matches!(objects.next(&key("u1"), at), Step::Done));
}

#[test]
fn an_event_that_says_why_an_agent_stopped_is_never_held_behind_others() {
    for reason in NEVER_HELD {
        let mut objects = objects();
        let t0 = Instant::now();
        spend_the_burst(&mut objects, t0);
        objects.offer(&key("u1"), [pending("Crashed", "held", "a", 30)], LIMIT, t0);
        let Step::Wait(_, wake) = objects.next(&key("u1"), t0) else {
            panic!("the burst is spent")
        };
        let (start, _) = objects.offer(&key("u1"), [pending(reason, "why", "a", 31)], LIMIT, t0);
        assert!(!start);
        assert!(
            wake.notified().now_or_never().is_some(),
            "{reason} wakes the task"
        );
        let Step::Send(send) = objects.next(&key("u1"), t0) else {
            panic!("{reason} waits for a token")
        };
        assert_eq!(send.event.reason, reason);
        // The Crashed repeat still waits for its token; nothing is lost.
        assert!(
            is_waiting(objects.next(&key("u1"), t0)).is_some(),
            "{reason}"
        );
        assert_eq!(objects.queued, 1);
    }
    // A warning about an error with such a reason is alike (a refused replacement).
    let mut objects = objects();
    let t0 = Instant::now();
    spend_the_burst(&mut objects, t0);
    let refused = kube_event("ReplacementRefused", true, "exceeded quota", None);
    objects.offer(
        &key("u1"),
        [Pending::new(refused, jiff::Timestamp::now())],
        LIMIT,
        t0,
    );
    assert!(matches!(objects.next(&key("u1"), t0), Step::Send(_)));
    // Others wait.
    objects.offer(
        &key("u1"),
        [pending("CircuitClosed", "c", "a", 40)],
        LIMIT,
        t0,
    );
    assert!(is_waiting(objects.next(&key("u1"), t0)).is_some());
}

#[test]
fn events_past_the_queue_are_dropped_and_counted_repeats_of_waiting_ones_are_not() {
    let mut objects = Objects::new(3, 100);
    let t0 = Instant::now();
    // A decision with no Events (what every caller hands over) starts nothing, keeps nothing.
    assert_eq!(objects.offer(&key("u1"), [], LIMIT, t0), (false, 0));
    assert!(objects.by_key.is_empty());
    let two = [
        pending("Crashed", "1", "a-1", 1),
        pending("Restarted", "2", "a-2", 1),
    ];
    assert_eq!(objects.offer(&key("u1"), two, LIMIT, t0), (true, 0));
    let two = [
        pending("Crashed", "x", "b-1", 1),
        pending("Restarted", "y", "b-2", 1),
    ];
    assert_eq!(
        objects.offer(&key("u2"), two, LIMIT, t0),
        (true, 1),
        "one fits, one over"
    );
    let one = [pending("Crashed", "z", "c-1", 1)];
    assert_eq!(objects.offer(&key("u3"), one, LIMIT, t0), (false, 1));
    assert!(
        !objects.by_key.contains_key(&key("u3")),
        "nothing accepted: nothing kept"
    );
    let repeat = [pending("Crashed", "x2", "b-3", 2)];
    assert_eq!(
        objects.offer(&key("u2"), repeat, LIMIT, t0),
        (false, 0),
        "counted in"
    );
    // Once one is sent, there is room again.
    assert!(matches!(objects.next(&key("u1"), t0), Step::Send(_)));
    let one = [pending("Crashed", "z", "c-1", 2)];
    assert_eq!(objects.offer(&key("u3"), one, LIMIT, t0), (true, 0));
}

#[test]
fn an_object_is_forgotten_once_idle_its_tokens_back_and_its_window_over() {
    let limit = BudgetConfig {
        rate: 1.0,
        burst: 2,
    };
    let mut objects = Objects::new(100_000, 100_000);
    let t0 = Instant::now();
    for i in 0..2000 {
        let key = key(&format!("u{i}"));
        objects.offer(&key, [pending("Crashed", "1", "a-1", 1)], limit, t0);
        assert!(matches!(objects.next(&key, t0), Step::Send(_)));
        assert!(matches!(objects.next(&key, t0), Step::Done));
    }
    // Their tokens are back in a second, but a repeat would still update their Event.
    let soon = t0 + Duration::from_secs(5);
    for i in 0..2100 {
        objects.offer(
            &key("again"),
            [pending("Crashed", &i.to_string(), "a", 1)],
            limit,
            soon,
        );
    }
    assert_eq!(objects.by_key.len(), 2001, "remembered within their window");
    let later = t0 + WINDOW;
    for i in 0..2100 {
        objects.offer(
            &key("again"),
            [pending("Crashed", &i.to_string(), "a", 1)],
            limit,
            later,
        );
    }
    assert_eq!(
        objects.by_key.len(),
        1,
        "only the one with Events waiting is left"
    );
}

#[test]
fn past_what_is_kept_the_objects_idle_longest_are_forgotten_never_one_with_events_waiting() {
    let mut objects = Objects::new(100, 16);
    let t0 = Instant::now();
    // One object with an Event waiting for a token, used first.
    let busy = key("busy");
    for i in 0..26 {
        objects.offer(&busy, [pending("Crashed", "c", "a", i)], LIMIT, t0);
        let _ = objects.next(&busy, t0);
    }
    assert_eq!(objects.queued, 1);
    for i in 0..100u64 {
        let now = t0 + Duration::from_millis(i + 1);
        let key = key(&format!("u{i}"));
        offer_and_send(&mut objects, &key, pending("Crashed", "c", "a", 1), now);
        assert!(
            objects.by_key.len() <= 16,
            "{} objects",
            objects.by_key.len()
        );
        assert!(
            objects.by_key.contains_key(&busy),
            "the one waiting is kept"
        );
    }
    assert!(
        objects.by_key.contains_key(&key("u99")),
        "the newest is kept"
    );
    assert!(
        !objects.by_key.contains_key(&key("u0")),
        "the oldest is forgotten"
    );
}

#[test]
fn the_event_object_tells_its_count_first_and_newest_time_and_newest_note() {
    let regarding = ObjectReference {
        uid: Some("u1".into()),
        ..related("supervisor.dev/v1alpha1", "Agent", "a", Some("team".into()))
    };
    let mut objects = objects();
    let t0 = Instant::now();
    let once = offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Crashed", "exit 1", "a-1", 10),
        t0,
    );
    let object = event_object(&once, &regarding);
    assert_eq!(object.series, None, "told once: no series");
    assert_eq!(object.count, Some(1));
    assert_eq!(object.involved_object, regarding);
    assert_eq!(object.metadata.name, Some(once.name.clone()));
    assert_eq!(object.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(object.type_.as_deref(), Some("Warning"));
    assert_eq!(object.reporting_component.as_deref(), Some(FIELD_MANAGER));
    let t1 = t0 + Duration::from_secs(1);
    offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Crashed", "exit 2", "a-2", 20),
        t1,
    );
    let third = offer_and_send(
        &mut objects,
        &key("u1"),
        pending("Crashed", "exit 3", "a-3", 30),
        t1,
    );
    let patch = update(&third);
    assert_eq!(patch["series"]["count"], 3);
    assert_eq!(patch["count"], 3);
    assert_eq!(patch["message"], "exit 3");
    assert_eq!(patch["related"]["name"], "a-3");
    assert_eq!(
        patch["series"]["lastObservedTime"],
        "1970-01-01T00:00:30.000000Z"
    );
    assert_eq!(patch["lastTimestamp"], "1970-01-01T00:00:30Z");
    let object = event_object(&third, &regarding);
    assert_eq!(object.event_time.unwrap().0.as_second(), 10, "first seen");
    // Names are unique, however many are made at once.
    let names: std::collections::HashSet<String> =
        (0..1000).map(|_| objects::unique_name("a")).collect();
    assert_eq!(names.len(), 1000);
}
