//! examples/agent-team.yaml: the crew starts in order; when the tool server crashes, it and the
//! workers after it restart and the planner before it keeps running; after more than 2 restarts
//! in 2 minutes the crew gives up and the team restarts it.
//!
//! kwok crashes the tool server 20 s after each start, so the crew gives up about 70 s in. The
//! team gives up on the crew's next give-up, about 3 minutes in: that last step is left to
//! `make demo`, not waited for here.

use std::collections::HashMap;
use std::time::Duration;

use agent_supervisor::api::{
    AGENT_LABEL, ATTEMPT_LABEL, AgentGroup, GroupPhase, GroupTrigger, Trigger,
};
use k8s_openapi::api::core::v1::Pod;

use super::{apply, setup};
use crate::support::groups::condition;
use crate::support::{self, Change, Recorder, TestNamespace, eventually};

/// The crew's members, in start order.
const CREW: [&str; 4] = ["planner", "tools", "worker-a", "worker-b"];

#[tokio::test]
async fn the_agent_team_restarts_the_rest_for_one_and_escalates() {
    let (ns, _operator) = setup().await;
    let pods = ns.record_pods().await;
    let crew = Recorder::start(ns.api::<AgentGroup>(), Some("metadata.name=crew")).await;
    apply(&ns, "agent-team.yaml").await;

    // Started in order (checked below over the whole recording).
    pods.wait_for("pod worker-b-1 to run", running("worker-b-1"))
        .await;

    // The tool server's first crash, 20 s after it started: it and the workers after it
    // restart, the planner before it keeps its first pod.
    let status = eventually(
        Duration::from_secs(60),
        "the crew's first restart",
        || async {
            let status = ns.group_status("crew").await;
            (!status.restart_history.is_empty()).then_some(status)
        },
    )
    .await;
    let first = status.restart_history.last().expect("a restart");
    assert_eq!(first.member.as_deref(), Some("tools"));
    assert_eq!(first.reason.as_deref(), Some("Error"));
    assert_eq!(first.restarted, ["tools", "worker-a", "worker-b"]);
    assert_eq!(first.trigger, GroupTrigger::Failure);
    for pod in ["tools-2", "worker-a-2", "worker-b-2"] {
        pods.wait_for(&format!("pod {pod} to run"), running(pod))
            .await;
    }
    let planner = ns.status("planner").await;
    assert_eq!(
        (planner.attempt, planner.restart_count),
        (1, 0),
        "the planner keeps its first pod: {planner:?}"
    );
    assert!(planner.restart_history.is_empty(), "{planner:?}");
    let tools = ns.status("tools").await;
    let failure = tools.last_failure.expect("the tool server's failure");
    assert_eq!(failure.exit_code, Some(1));
    assert_eq!(
        failure.message.as_deref(),
        Some("tool server: too many open files")
    );
    for worker in ["worker-a", "worker-b"] {
        let status = ns.status(worker).await;
        let record = status.restart_history.last().expect("a restart");
        assert_eq!(
            (record.attempt, record.trigger, record.reason),
            (1, Trigger::Group, None),
            "{worker} restarted by its group: {status:?}"
        );
        assert_eq!(status.consecutive_failures, 0, "{worker}: not its failure");
    }
    assert_printed(&ns).await;

    // The third crash within 2 minutes: the crew gives up, stopping every member, and the team
    // restarts the whole crew with a fresh count.
    let team = eventually(
        Duration::from_secs(120),
        "the team to restart the crew",
        || async {
            let status = ns.group_status("team").await;
            (!status.restart_history.is_empty()).then_some(status)
        },
    )
    .await;
    let escalation = &team.restart_history[0];
    assert_eq!(escalation.member.as_deref(), Some("crew"));
    assert_eq!(escalation.reason.as_deref(), Some("GroupGaveUp"));
    assert_eq!(escalation.restarted, ["crew"]);
    assert_eq!(escalation.trigger, GroupTrigger::Escalation);
    assert_eq!(team.restart_count, 1);
    let (escalated, ..) = condition(&team, "Escalated").expect("the team's Escalated condition");
    assert_eq!(escalated, "False", "the team restarts the crew once");
    let gave_up = crew
        .wait_for("the crew to give up", |g| {
            g.status.as_ref().is_some_and(|s| s.gave_up.is_some())
        })
        .await
        .status
        .expect("a status");
    assert_eq!(gave_up.phase, Some(GroupPhase::Escalated), "{gave_up:?}");
    let (escalated, ..) = condition(&gave_up, "Escalated").expect("the Escalated condition");
    assert_eq!(escalated, "True", "{gave_up:?}");
    assert_eq!(
        gave_up.gave_up.and_then(|g| g.member).as_deref(),
        Some("tools")
    );
    let note = ns.wait_group_event("crew", "GroupEscalated").await;
    assert!(note.contains("escalating to group team"), "{note}");
    let restarted = crew
        .wait_for("the crew restarted by the team", |g| {
            g.status.as_ref().is_some_and(|s| s.incarnation == 2)
        })
        .await
        .status
        .expect("a status");
    let record = &restarted.restart_history[0];
    assert_eq!(record.trigger, GroupTrigger::Group);
    assert_eq!(record.restarted, CREW, "the whole crew restarted");
    assert!(
        restarted.recent_restarts.is_empty(),
        "a fresh count: {restarted:?}"
    );
    // The whole crew starts again, in order: the planner too, this time.
    pods.wait_for("pod planner-2 to run", running("planner-2"))
        .await;
    let worker_b = eventually(support::kubelet::REACT, "worker-b's next pod", || async {
        let status = ns.status("worker-b").await;
        (status.attempt >= 4).then_some(status.attempt)
    })
    .await;
    let pod = format!("worker-b-{worker_b}");
    pods.wait_for(&format!("pod {pod} to run"), running(&pod))
        .await;

    assert!(pods.gaps().is_empty(), "the pod recording has gaps");
    // Every member's pod of the crew that gave up ended. (A member may read the team's restart
    // before the crew's stop: then its Event is RestartScheduled rather than GroupGaveUp.)
    for pod in ["planner-1", "tools-3", "worker-a-3", "worker-b-3"] {
        assert!(
            pods.versions().iter().any(|p| {
                p.metadata.name.as_deref() == Some(pod)
                    && (p.metadata.deletion_timestamp.is_some()
                        || p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
            }),
            "pod {pod} was stopped"
        );
    }
    assert_started_in_order(&pods.all());
    assert_planner_kept_until_the_crew_gave_up(&pods.all());
}

/// Whether a pod is `name` and Running.
fn running(name: &str) -> impl Fn(&Pod) -> bool + '_ {
    move |p: &Pod| p.metadata.name.as_deref() == Some(name) && is_running(p)
}

fn is_running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The crew member a pod belongs to, and its attempt.
fn member_of(pod: &Pod) -> (String, u32) {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let attempt = labels
        .get(ATTEMPT_LABEL)
        .and_then(|a| a.parse().ok())
        .expect("an attempt label");
    (labels[AGENT_LABEL].clone(), attempt)
}

/// Every pod of a crew member was created while the newest pod of every member before it was
/// Running (Sequential), on the first start and on every restart. The recording follows the
/// API server's order of changes, so "while" is exact: no clocks are compared.
fn assert_started_in_order(changes: &[(Change, Pod)]) {
    // Each member's newest pod: (attempt, running).
    let mut newest: HashMap<String, (u32, bool)> = HashMap::new();
    for (change, pod) in changes {
        let (member, attempt) = member_of(pod);
        let name = pod.metadata.name.clone().unwrap_or_default();
        if *change == Change::Added {
            let position = CREW
                .iter()
                .position(|m| *m == member)
                .expect("a crew member");
            for before in &CREW[..position] {
                assert!(
                    newest.get(*before).is_some_and(|(_, running)| *running),
                    "pod {name} was created while {before}'s newest pod was not running ({:?})",
                    newest.get(*before)
                );
            }
        }
        let current = newest.get(&member).map_or(0, |(a, _)| *a);
        if attempt >= current {
            let running = *change != Change::Deleted && is_running(pod);
            newest.insert(member, (attempt, running));
        }
    }
}

/// The planner's first pod was neither deleted nor followed by another until the crew gave up:
/// the tool server's crashes before that restarted only the members after it.
fn assert_planner_kept_until_the_crew_gave_up(changes: &[(Change, Pod)]) {
    let tools_crashed = |n: u32| {
        changes.iter().position(|(_, p)| {
            p.metadata.name.as_deref() == Some(&format!("tools-{n}"))
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
        })
    };
    let third_crash = tools_crashed(3).expect("the tool server's third crash recorded");
    let planner_changes: Vec<String> = changes[..third_crash]
        .iter()
        .filter(|(change, p)| {
            member_of(p).0 == "planner"
                && (*change == Change::Deleted
                    || p.metadata.deletion_timestamp.is_some()
                    || p.metadata.name.as_deref() != Some("planner-1"))
        })
        .map(|(change, p)| format!("{change:?} {}", p.metadata.name.clone().unwrap_or_default()))
        .collect();
    assert!(
        planner_changes.is_empty(),
        "the planner was restarted before the crew gave up: {planner_changes:?}"
    );
}

/// `kubectl get agg` shows each group's strategy, ready members, restarts, phase and age;
/// `kubectl describe agg crew` its members and its restart history.
async fn assert_printed(ns: &TestNamespace) {
    let get = kubectl(ns, &["get", "agg"]);
    let rows: Vec<Vec<&str>> = get
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "STRATEGY", "READY", "RESTARTS", "PHASE", "AGE"],
        "{get}"
    );
    let row = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("no {name} in:\n{get}"))
            .clone()
    };
    let crew = row("crew");
    assert_eq!(crew[1], "RestForOne", "{get}");
    assert!(crew[2].ends_with("/4"), "ready members of 4:\n{get}");
    assert!(
        crew[3].parse::<u32>().is_ok_and(|n| n >= 1),
        "restarts:\n{get}"
    );
    assert!(
        ["Running", "Restarting", "Starting"].contains(&crew[4]),
        "{get}"
    );
    let team = row("team");
    assert_eq!(
        (team[1], team[2].ends_with("/1")),
        ("OneForOne", true),
        "{get}"
    );

    let describe = kubectl(ns, &["describe", "agg", "crew"]);
    // Compare words, not alignment.
    let lines: Vec<String> = describe
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let has = |line: &str| lines.iter().any(|l| l == line);
    for member in CREW {
        assert!(
            has(&format!("Name: {member}")),
            "member {member}:\n{describe}"
        );
    }
    for line in [
        "Strategy: RestForOne",
        "Start Order: Sequential",
        "Restart History:",
        "Member: tools",
        "Reason: Error",
        "Trigger: Failure",
        "worker-a",
        "worker-b",
    ] {
        assert!(has(line), "`{line}` in:\n{describe}");
    }
    assert!(
        lines.iter().any(|l| l.starts_with("Normal GroupRestart")
            && l.contains("Agent tools crashed (Error): restarting tools, worker-a, worker-b")),
        "the GroupRestart Event:\n{describe}"
    );
}

/// `kubectl ARGS -n NS`'s output; panics unless it succeeds.
fn kubectl(ns: &TestNamespace, args: &[&str]) -> String {
    let out = support::kubectl()
        .args(args)
        .args(["-n", &ns.name])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}
