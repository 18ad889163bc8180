//! Merging, windows and the bounded queue of the Event sender.

use super::*;
use crate::controller::events::{kube_event, related};

#[test]
fn events_sent_at_once_about_one_agent_have_names_of_their_own() {
    let regarding = related("supervisor.dev/v1alpha1", "Agent", "a", Some("team".into()));
    let event = kube_event("Crashed", true, "exit 1", None);
    let now = jiff::Timestamp::now();
    let names: std::collections::HashSet<String> = (0..1000)
        .map(|_| event_object(&event, &regarding, now).metadata.name.unwrap())
        .collect();
    assert_eq!(names.len(), 1000);
    let object = event_object(&event, &regarding, now);
    assert_eq!(object.type_.as_deref(), Some("Warning"));
    assert_eq!(object.reason.as_deref(), Some("Crashed"));
    assert_eq!(object.regarding, Some(regarding));
    assert!(object.metadata.name.unwrap().starts_with("a."));
}

fn pending(reason: &str, note: &str, pod: &str, second: i64) -> Pending {
    let related = related("v1", "Pod", pod, Some("team".into()));
    Pending {
        at: jiff::Timestamp::from_second(second).unwrap(),
        event: kube_event(reason, reason == "Crashed", note, Some(related)),
    }
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

#[test]
fn a_window_keeps_what_comes_while_it_is_open_and_closes_when_nothing_came() {
    let mut windows = Windows::new(100);
    // A decision with no Events (what every caller hands over) opens no window.
    let (sent, dropped) = windows.offer(&key("u1"), []);
    assert!(sent.is_none() && dropped == 0);
    assert!(windows.open.is_empty());
    let (sent, dropped) = windows.offer(&key("u1"), [pending("Crashed", "1", "a-1", 1)]);
    assert_eq!(sent.map(|s| s.len()), Some(1), "the first is sent at once");
    assert_eq!(dropped, 0);
    for n in ["2", "3"] {
        let (sent, _) = windows.offer(&key("u1"), [pending("Crashed", n, "a-2", 2)]);
        assert!(sent.is_none(), "kept for the window's end");
    }
    // A namesake created since is another object, with a window of its own.
    let (sent, _) = windows.offer(&key("u2"), [pending("Crashed", "x", "a-1", 3)]);
    assert!(sent.is_some());
    let next = windows.take_or_close(&key("u1")).expect("what waited");
    let notes: Vec<_> = next.iter().map(|p| p.event.note.clone().unwrap()).collect();
    assert_eq!(notes, ["2", "3"]);
    assert!(windows.take_or_close(&key("u1")).is_none(), "nothing came");
    assert!(
        !windows.open.contains_key(&key("u1")),
        "closed: nothing kept"
    );
    let (sent, _) = windows.offer(&key("u1"), [pending("Crashed", "4", "a-4", 30)]);
    assert!(sent.is_some(), "closed: the next is sent at once");
}

#[test]
fn events_past_the_queue_are_dropped_and_counted_until_some_are_sent() {
    let mut windows = Windows::new(3);
    let (sent, dropped) = windows.offer(
        &key("u1"),
        [
            pending("Crashed", "1", "a-1", 1),
            pending("Restarted", "2", "a-2", 1),
        ],
    );
    assert_eq!((sent.map(|s| s.len()), dropped), (Some(2), 0));
    let (sent, dropped) = windows.offer(
        &key("u2"),
        [
            pending("Crashed", "x", "b-1", 1),
            pending("Crashed", "y", "b-2", 1),
        ],
    );
    assert_eq!(
        (sent.map(|s| s.len()), dropped),
        (Some(1), 1),
        "one fits, one over"
    );
    let (sent, dropped) = windows.offer(&key("u3"), [pending("Crashed", "z", "c-1", 1)]);
    assert!(sent.is_none(), "nothing accepted opens no window");
    assert_eq!(dropped, 1);
    assert!(!windows.open.contains_key(&key("u3")));
    // Once the first two are sent, there is room again.
    windows.sent(2);
    let (sent, dropped) = windows.offer(&key("u3"), [pending("Crashed", "z", "c-1", 2)]);
    assert_eq!((sent.map(|s| s.len()), dropped), (Some(1), 0));
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
        proptest::prop_assert!(merged.len() <= events.len());
        for p in &merged {
            proptest::prop_assert!(p.event.note.as_deref().unwrap().len() <= NOTE_LIMIT);
        }
        // In time order, as they happened.
        for pair in merged.windows(2) {
            proptest::prop_assert!(pair[0].at <= pair[1].at);
        }
        for reason in reasons {
            let of_reason: Vec<&KubeEvent> =
                merged.iter().map(|p| &p.event).filter(|e| e.reason == reason).collect();
            let told: Vec<&str> = of_reason
                .iter()
                .flat_map(|e| e.note.as_deref().unwrap().split(JOIN))
                .collect();
            let want: Vec<&str> = events
                .iter()
                .filter(|(r, _)| reasons[*r] == reason)
                .map(|(_, note)| note.as_str())
                .collect();
            proptest::prop_assert_eq!(told, want);
            // A reason's next Event begins only when the one before could take no more.
            for pair in of_reason.windows(2) {
                let (a, b) = (pair[0].note.as_deref().unwrap(), pair[1].note.as_deref().unwrap());
                let first = b.split(JOIN).next().unwrap();
                proptest::prop_assert!(a.len() + JOIN.len() + first.len() > NOTE_LIMIT);
            }
        }
    }
}
