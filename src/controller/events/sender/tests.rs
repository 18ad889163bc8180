//! Merging, the per-object limit and the bounded queue of the Event sender.

use std::time::Duration;

use super::*;
use crate::controller::events::{kube_event, related};

#[test]
fn events_sent_at_once_about_one_agent_have_names_of_their_own() {
    let regarding = related("supervisor.dev/v1alpha1", "Agent", "a", Some("team".into()));
    let event = kube_event("Crashed", true, "exit 1", None);
    let now = jiff::Timestamp::now();
    let once = Pending::new(event, now);
    let names: std::collections::HashSet<String> = (0..1000)
        .map(|_| event_object(&once, &regarding).metadata.name.unwrap())
        .collect();
    assert_eq!(names.len(), 1000);
    let object = event_object(&once, &regarding);
    assert_eq!(object.series, None, "told once: no series");
    assert_eq!(object.type_.as_deref(), Some("Warning"));
    assert_eq!(object.reason.as_deref(), Some("Crashed"));
    assert_eq!(object.regarding, Some(regarding));
    assert!(object.metadata.name.unwrap().starts_with("a."));
}

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

#[test]
fn the_events_of_one_reason_become_one_event_that_tells_every_one() {
    let merged = merge(vec![
        pending("Crashed", "Pod a-1 failed", "a-1", 10),
        pending("Crashed", "Pod a-2 failed", "a-2", 12),
        pending("CircuitOpened", "open", "a-2", 12),
        pending("Crashed", "Pod a-3 failed", "a-3", 14),
    ]);
    let told: Vec<(&str, &str, i64, &str)> = merged
        .iter()
        .map(|p| {
            (
                p.event.reason.as_str(),
                p.event.note.as_deref().unwrap(),
                p.at.as_second(),
                p.event.secondary.as_ref().unwrap().name.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        told,
        [
            (
                "Crashed",
                "Pod a-1 failed | Pod a-2 failed | Pod a-3 failed",
                10,
                "a-3"
            ),
            ("CircuitOpened", "open", 12, "a-2"),
        ]
    );
}

const LIMIT: BudgetConfig = BudgetConfig {
    rate: 1.0,
    burst: 2,
};

#[test]
fn an_object_sends_its_burst_at_once_then_waits_and_merges_what_came_meanwhile() {
    let mut objects = Objects::new(100);
    let t0 = Instant::now();
    // A decision with no Events (what every caller hands over) starts nothing.
    assert_eq!(objects.offer(&key("u1"), [], LIMIT, t0), (false, 0));
    assert!(objects.by_key.is_empty());
    let first = [
        pending("Crashed", "1", "a-1", 1),
        pending("Restarted", "r1", "a-2", 1),
    ];
    assert_eq!(
        objects.offer(&key("u1"), first, LIMIT, t0),
        (true, 0),
        "a task starts"
    );
    let again = [pending("Crashed", "2", "a-2", 2)];
    assert_eq!(
        objects.offer(&key("u1"), again, LIMIT, t0),
        (false, 0),
        "one already sends"
    );
    // The burst: two at once.
    assert_eq!(objects.reserve(&key("u1"), t0), Some(t0));
    let sent = objects.take_one(&key("u1")).unwrap();
    assert_eq!(
        (sent.event.reason.as_str(), sent.count),
        ("Crashed", 2),
        "merged with a count"
    );
    assert_eq!(sent.event.note.as_deref(), Some("1 | 2"));
    assert_eq!(objects.reserve(&key("u1"), t0), Some(t0));
    let sent = objects.take_one(&key("u1")).unwrap();
    assert_eq!(sent.event.reason, "Restarted");
    assert_eq!(objects.queued, 0);
    // Nothing waits: the task ends, and the object's limit is remembered while it refills.
    assert_eq!(objects.reserve(&key("u1"), t0), None);
    let later = [pending("Crashed", "3", "a-3", 3)];
    assert_eq!(objects.offer(&key("u1"), later, LIMIT, t0), (true, 0));
    let at = objects.reserve(&key("u1"), t0).unwrap();
    assert_eq!(
        at,
        t0 + Duration::from_secs(1),
        "the burst is spent: one a second"
    );
    // A namesake created since is another object, with a limit of its own.
    let other = [pending("Crashed", "x", "a-1", 3)];
    assert_eq!(objects.offer(&key("u2"), other, LIMIT, t0), (true, 0));
    assert_eq!(objects.reserve(&key("u2"), t0), Some(t0));
}

#[test]
fn events_past_the_queue_are_dropped_and_counted_until_some_are_sent() {
    let mut objects = Objects::new(3);
    let t0 = Instant::now();
    let two = [
        pending("Crashed", "1", "a-1", 1),
        pending("Restarted", "2", "a-2", 1),
    ];
    assert_eq!(objects.offer(&key("u1"), two, LIMIT, t0), (true, 0));
    let two = [
        pending("Crashed", "x", "b-1", 1),
        pending("Crashed", "y", "b-2", 1),
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
    // Once one is sent, there is room again.
    objects.reserve(&key("u1"), t0);
    objects.take_one(&key("u1")).unwrap();
    let one = [pending("Crashed", "z", "c-1", 2)];
    assert_eq!(objects.offer(&key("u3"), one, LIMIT, t0), (true, 0));
}

#[test]
fn objects_with_nothing_waiting_are_forgotten_once_their_limit_is_whole() {
    let mut objects = Objects::new(100_000);
    let t0 = Instant::now();
    for i in 0..2000 {
        let key = key(&format!("u{i}"));
        objects.offer(&key, [pending("Crashed", "1", "a-1", 1)], LIMIT, t0);
        objects.reserve(&key, t0);
        objects.take_one(&key);
        assert_eq!(objects.reserve(&key, t0), None);
    }
    assert_eq!(objects.by_key.len(), 2000, "their limits are not whole yet");
    let later = t0 + Duration::from_secs(5);
    for i in 0..1100 {
        objects.offer(
            &key("again"),
            [pending("Crashed", &i.to_string(), "a", 1)],
            LIMIT,
            later,
        );
    }
    assert_eq!(
        objects.by_key.len(),
        1,
        "only the one with Events waiting is left"
    );
}

proptest::proptest! {
    #[test]
    fn merging_loses_no_note_keeps_each_reasons_order_and_stays_within_the_limit(
        events in proptest::collection::vec((0..3usize, "[a-z ]{0,400}"), 0..40)
    ) {
        let reasons = ["Crashed", "Restarted", "CircuitOpened"];
        let input: Vec<Pending> = events
            .iter()
            .enumerate()
            .map(|(i, (r, note))| pending(reasons[*r], note, "a-1", i as i64))
            .collect();
        let merged = merge(input);
        proptest::prop_assert!(merged.len() <= reasons.len());
        proptest::prop_assert_eq!(merged.iter().map(|p| p.count as usize).sum::<usize>(), events.len());
        for p in &merged {
            proptest::prop_assert!(p.event.note.as_deref().unwrap().len() <= NOTE_LIMIT);
            proptest::prop_assert!(p.at <= p.last);
        }
        for reason in reasons {
            let of_reason: Vec<&Pending> =
                merged.iter().filter(|p| p.event.reason == reason).collect();
            let want: Vec<&str> = events
                .iter()
                .filter(|(r, _)| reasons[*r] == reason)
                .map(|(_, note)| note.as_str())
                .collect();
            proptest::prop_assert_eq!(of_reason.len(), usize::from(!want.is_empty()), "one Event a reason");
            // The note tells each in order, as many as it holds.
            if let Some(p) = of_reason.first() {
                let told: Vec<&str> = p.event.note.as_deref().unwrap().split(JOIN).collect();
                proptest::prop_assert_eq!(&want[..told.len()], &told[..]);
                proptest::prop_assert_eq!(p.count as usize, want.len());
            }
        }
    }
}
