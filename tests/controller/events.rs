//! The operator's Events as Kubernetes' own recorder makes them: a repeat updates the Event it
//! made before, each object has a limit, and the Event that says why an agent stopped is never
//! held behind the others.

use agent_supervisor::api::Phase;
use agent_supervisor::controller::budget::BudgetConfig;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use serde_json::json;

use crate::setup_with;
use crate::support::kubelet::{REACT, told};
use crate::support::{TestNamespace, eventually};

/// The agent's Event objects with `reason`, once `check` holds of them.
async fn once_events(
    ns: &TestNamespace,
    agent: &str,
    reason: &str,
    what: &str,
    check: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    eventually(REACT, &format!("{agent}: {what}"), || async {
        let events: Vec<Event> = ns
            .event_objects(agent)
            .await
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect();
        check(&events).then_some(events)
    })
    .await
}

#[tokio::test]
async fn a_crash_loop_is_one_crashed_event_whose_count_rises_and_its_stop_is_told_at_once() {
    // Six Events at once and none more within the test: the loop's own Events spend the limit.
    const BURST: u32 = 6;
    let limit = BudgetConfig {
        rate: 1.0 / 3600.0,
        burst: BURST,
    };
    let (ns, _operator) = setup_with(|config| config.event_limit = limit).await;
    // The seventh crash is one restart too many.
    const CRASHES: u32 = 7;
    ns.create_policy(
        "limited",
        json!({
            "backoff": { "type": "Immediate" },
            "limits": { "maxRestarts": CRASHES - 1, "window": "1h" },
            "circuitBreaker": { "failureThreshold": 0 },
        }),
    )
    .await;
    ns.create_agent(
        "looper",
        json!({ "restartPolicyRef": { "name": "limited" } }),
    )
    .await;
    let crash = |n: u32| {
        let ns = &ns;
        async move {
            let pod = format!("looper-{n}");
            ns.wait_running(&pod).await;
            ns.terminate(&pod, 1, "Error", &format!("failure number {n}"))
                .await;
        }
    };

    crash(1).await;
    let first = once_events(&ns, "looper", "Crashed", "a Crashed Event", |e| {
        e.len() == 1
    })
    .await;
    let name = first[0].metadata.name.clone().expect("a name");
    assert_eq!(told(&first[0]), 1, "{first:?}");
    // The second crash updates that Event: its count, and the newest note.
    crash(2).await;
    let second = once_events(
        &ns,
        "looper",
        "Crashed",
        "the Crashed Event counts 2",
        |e| e.iter().map(told).sum::<usize>() == 2,
    )
    .await;
    assert_eq!(
        second.len(),
        1,
        "one Event object, not one a crash: {second:?}"
    );
    assert_eq!(second[0].metadata.name.as_ref(), Some(&name));
    let series = second[0].series.as_ref().expect("a series");
    assert_eq!(series.count, 2);
    let note = second[0].note.as_deref().unwrap_or_default();
    assert!(note.contains("failure number 2"), "the newest note: {note}");
    // What `kubectl describe` reads, through the core API: the same count, and the newest time.
    let core: kube::Api<CoreEvent> = ns.api();
    let described = core
        .get(&name)
        .await
        .expect("the Event, through the core API");
    assert_eq!(described.count, Some(2));
    assert_eq!(described.series.as_ref().and_then(|s| s.count), Some(2));
    assert!(described.last_timestamp.is_some(), "{described:?}");
    let last = described.series.and_then(|s| s.last_observed_time);
    assert!(
        last.map(|t| t.0) > described.event_time.map(|t| t.0),
        "last seen after first seen"
    );

    // Deleted meanwhile (by a person, or the API server's TTL): the next repeat makes it again,
    // under its name, with the whole count.
    core.delete(&name, &Default::default())
        .await
        .expect("delete the Event");
    crash(3).await;
    let third = once_events(&ns, "looper", "Crashed", "the Crashed Event again", |e| {
        e.iter().map(told).sum::<usize>() == 3
    })
    .await;
    assert_eq!(third.len(), 1, "{third:?}");
    assert_eq!(third[0].metadata.name.as_ref(), Some(&name));
    assert_ne!(third[0].metadata.uid, second[0].metadata.uid, "made again");

    for n in 4..=CRASHES {
        crash(n).await;
    }
    ns.wait_status("looper", "Stopped", |s| s.phase == Some(Phase::Stopped))
        .await;
    // Told at once, though the crashes spent every token long ago (none comes back for an hour).
    ns.wait_event("looper", "RestartLimitExceeded").await;
    let events = ns.event_objects("looper").await;
    let crashed: Vec<&Event> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Crashed"))
        .collect();
    assert_eq!(crashed.len(), 1, "one Crashed Event object: {crashed:?}");
    assert_eq!(crashed[0].metadata.name.as_ref(), Some(&name));
    let others: usize = events
        .iter()
        .filter(|e| e.reason.as_deref() != Some("RestartLimitExceeded"))
        .map(told)
        .sum();
    assert_eq!(
        others, BURST as usize,
        "the limit was spent before the stop: {events:?}"
    );
    assert!(
        told(crashed[0]) < CRASHES as usize,
        "the later crashes wait for a token: {crashed:?}"
    );
    // One Event object for each reason.
    let mut reasons: Vec<&str> = events.iter().filter_map(|e| e.reason.as_deref()).collect();
    let all = reasons.len();
    reasons.sort_unstable();
    reasons.dedup();
    assert_eq!(reasons.len(), all, "{events:?}");
}
