//! Heartbeats: whether a running pod is alive, by its heartbeat Lease, its grace period and
//! its timeout.

use agent_supervisor::api::FailureReason;
use agent_supervisor::supervise::classify::{Liveness, Verdict, classify};
use agent_supervisor::supervise::{LeaseFacts, PodFacts};
use jiff::Timestamp;

use super::{POD, STARTUP, ended, heartbeat, lease, no_heartbeat, running_pod};
use crate::clock::t;

#[test]
fn heartbeats_decide_whether_a_running_pod_is_alive() {
    // The pod started at t(10); heartbeats are required 60s after that, within 30s of each other.
    let hb = heartbeat(30, Some(60));
    let pod = running_pod(t(10));
    let grace_end = t(70);
    struct Row {
        name: &'static str,
        lease: Option<LeaseFacts>,
        now: Timestamp,
        /// `Some(deadline)`: still alive until then; `None`: lost.
        alive_until: Option<Timestamp>,
        message: &'static str,
    }
    let rows = [
        Row {
            name: "no lease, within grace",
            lease: None,
            now: t(69),
            alive_until: Some(grace_end),
            message: "",
        },
        Row {
            name: "no lease at all after grace",
            lease: None,
            now: t(71),
            alive_until: None,
            message: "no heartbeat within 1m of starting",
        },
        Row {
            name: "renewed recently by this pod",
            lease: Some(lease(Some(POD), Some(t(100)))),
            now: t(120),
            alive_until: Some(t(130)),
            message: "",
        },
        Row {
            name: "renewal expired",
            lease: Some(lease(Some(POD), Some(t(100)))),
            now: t(131),
            alive_until: None,
            message: "no heartbeat for 31s (timeout 30s)",
        },
        Row {
            name: "an expired renewal within grace is not yet lost",
            lease: Some(lease(Some(POD), Some(t(11)))),
            now: t(69),
            alive_until: Some(grace_end),
            message: "",
        },
        Row {
            name: "held by a stale pod, within grace",
            lease: Some(lease(Some("researcher-2"), Some(t(100)))),
            now: t(50),
            alive_until: Some(grace_end),
            message: "",
        },
        Row {
            name: "held by a stale pod that renews it, after grace",
            lease: Some(lease(Some("researcher-2"), Some(t(100)))),
            now: t(101),
            alive_until: None,
            message: "the heartbeat Lease is held by researcher-2, not by this pod",
        },
        Row {
            name: "a lease nobody holds, after grace",
            lease: Some(lease(None, None)),
            now: t(80),
            alive_until: None,
            message: "no heartbeat within 1m of starting",
        },
    ];
    for row in rows {
        let liveness = Liveness {
            heartbeat: Some(&hb),
            lease: row.lease.as_ref(),
        };
        match (classify(&pod, STARTUP, liveness, row.now), row.alive_until) {
            (
                Verdict::Running {
                    since,
                    ready,
                    heartbeat_deadline,
                },
                Some(deadline),
            ) => {
                assert_eq!(since, t(10), "{}", row.name);
                assert!(ready, "{}", row.name);
                assert_eq!(heartbeat_deadline, Some(deadline), "{}", row.name);
                assert!(row.now < deadline, "{}: the deadline is ahead", row.name);
            }
            (Verdict::Ended { ending, kill }, None) => {
                assert_eq!(ending.reason, FailureReason::HeartbeatLost, "{}", row.name);
                assert!(kill, "{}: a hung pod is still live and must go", row.name);
                assert_eq!(ending.message.as_deref(), Some(row.message), "{}", row.name);
                assert_eq!(ending.container.as_deref(), Some("agent"), "{}", row.name);
                assert_eq!(ending.started_at, Some(t(10)), "{}", row.name);
                assert_eq!(ending.exit_code, None, "{}", row.name);
            }
            (verdict, want) => panic!("{}: got {verdict:?}, want alive until {want:?}", row.name),
        }
    }
}

#[test]
fn grace_defaults_to_the_timeout() {
    let hb = heartbeat(45, None);
    let pod = running_pod(t(0));
    let at = |now| {
        classify(
            &pod,
            STARTUP,
            Liveness {
                heartbeat: Some(&hb),
                lease: None,
            },
            now,
        )
    };
    assert!(matches!(
        at(t(44)),
        Verdict::Running { heartbeat_deadline: Some(d), .. } if d == t(45)
    ));
    let (ending, _) = ended(at(t(46)));
    assert_eq!(ending.reason, FailureReason::HeartbeatLost);
}

#[test]
fn without_a_heartbeat_a_running_pod_is_trusted() {
    let pod = running_pod(t(0));
    let verdict = classify(&pod, STARTUP, no_heartbeat(), t(1_000_000));
    assert_eq!(
        verdict,
        Verdict::Running {
            since: t(0),
            ready: true,
            heartbeat_deadline: None
        }
    );
}

#[test]
fn a_pod_adopted_while_running_gets_its_grace_from_its_adoption() {
    // A Sandbox's pod started at t(10) and was taken as an attempt at t(100): it could not have
    // renewed as that attempt before, so its 60s of grace run from t(100), and its attempt still
    // began when it started.
    let hb = heartbeat(30, Some(60));
    let mut pod = running_pod(t(10));
    pod.adopted_at = Some(t(100));
    let at = |pod: &PodFacts, now| {
        classify(
            pod,
            STARTUP,
            Liveness {
                heartbeat: Some(&hb),
                lease: None,
            },
            now,
        )
    };
    assert_eq!(
        at(&pod, t(159)),
        Verdict::Running {
            since: t(10),
            ready: true,
            heartbeat_deadline: Some(t(160)),
        }
    );
    let (ending, kill) = ended(at(&pod, t(161)));
    assert_eq!(ending.reason, FailureReason::HeartbeatLost);
    assert!(kill);
    assert_eq!(
        ending.message.as_deref(),
        Some("no heartbeat within 1m of its adoption")
    );
    assert_eq!(ending.started_at, Some(t(10)));

    // Adopted before it started (the usual case: a fresh pod still pending), the grace runs from
    // its start as for any pod.
    pod.adopted_at = Some(t(5));
    assert!(matches!(
        at(&pod, t(69)),
        Verdict::Running { heartbeat_deadline: Some(d), .. } if d == t(70)
    ));
    let (ending, _) = ended(at(&pod, t(71)));
    assert_eq!(
        ending.message.as_deref(),
        Some("no heartbeat within 1m of starting")
    );
}
