//! Scenarios with supervision groups: a group restart is several writes of several objects (the
//! crashed member's status, the group's orders, each sibling's status and pod), and an operator
//! killed between any two of them must finish it exactly once — no member restarted twice or
//! left behind, no group restart counted twice or lost.

use agent_supervisor::api::{GroupPhase, GroupTrigger, Phase, Trigger};
use serde_json::{Value, json};

use crate::normal::End;
use crate::scenarios::{Scenario, fast_policy};
use crate::steps::Run;

fn members(names: &[&str]) -> Value {
    names.iter().map(|n| json!({ "agent": n })).collect()
}

/// Starts the agents, each under the fast policy (1s backoff, no jitter, breaker off), then
/// creates the group `name` with `spec` and waits until it runs them all. The group comes once
/// its members run: the operator's cache has them by then, so its first decision finds them
/// all, however its watches of different kinds interleave (an Agent seen late would be
/// reported missing first, an Event the uninterrupted run may not have).
async fn start(run: &Run, agents: &[&'static str], name: &str, spec: Value) {
    run.create_policy(fast_policy()).await;
    for agent in agents {
        run.on(agent).create_agent(json!({})).await;
    }
    for agent in agents {
        run.on(agent).running(1).await;
    }
    run.create_group(name, spec).await;
    group_running(run, name, "every member running", 0).await;
}

/// Waits until `group` is Running with at least `restarts` restarts counted.
async fn group_running(run: &Run, group: &str, what: &str, restarts: u32) {
    run.group_until(group, what, |s| {
        s.phase == Some(GroupPhase::Running) && s.restart_count >= restarts
    })
    .await;
}

pub const GROUP_ONE_FOR_ALL: Scenario = Scenario {
    name: "group-one-for-all",
    agents: &["alpha", "beta", "gamma"],
    groups: &["trio"],
    pending: false,
    drive: |run| Box::pin(one_for_all(run)),
    expect: |end| {
        let mut problems = restarted_once(end, "beta", Trigger::Failure);
        for sibling in ["alpha", "gamma"] {
            problems.extend(restarted_once(end, sibling, Trigger::Group));
        }
        problems.extend(group_restarted_once(
            end,
            "trio",
            ("beta", GroupTrigger::Failure),
            &["alpha", "beta", "gamma"],
        ));
        problems
    },
};

/// One member of a OneForAll group crashes: the group stops the other two and starts all three
/// again when the crashed one's backoff (1s) is over.
async fn one_for_all(run: &Run) {
    let agents = ["alpha", "beta", "gamma"];
    start(
        run,
        &agents,
        "trio",
        json!({ "strategy": "OneForAll", "members": members(&agents) }),
    )
    .await;
    run.focus();
    run.on("beta").end(1, 1, "Error", "tool call failed").await;
    for agent in agents {
        run.on(agent).running(2).await;
    }
    group_running(run, "trio", "the group restart done", 1).await;
    for agent in agents {
        run.on(agent).pod_stopped(1).await;
    }
}

pub const GROUP_REST_FOR_ONE: Scenario = Scenario {
    name: "group-rest-for-one",
    agents: &["planner", "tools", "worker"],
    groups: &["crew"],
    pending: false,
    drive: |run| Box::pin(rest_for_one(run)),
    expect: |end| {
        let mut problems = restarted_once(end, "tools", Trigger::Failure);
        problems.extend(restarted_once(end, "worker", Trigger::Group));
        let planner = end.agent("planner");
        expect(
            &mut problems,
            "agent planner: (attempt, restartCount, pods) untouched",
            (
                planner.attempt,
                planner.restart_count,
                &planner.pods_created,
            ),
            (1, 0, &vec!["planner-1".to_string()]),
        );
        problems.extend(group_restarted_once(
            end,
            "crew",
            ("tools", GroupTrigger::Failure),
            &["tools", "worker"],
        ));
        problems
    },
};

/// The middle member of a RestForOne group crashes: it and the one after it restart; the one
/// before it keeps its first pod.
async fn rest_for_one(run: &Run) {
    let agents = ["planner", "tools", "worker"];
    start(
        run,
        &agents,
        "crew",
        json!({ "strategy": "RestForOne", "members": members(&agents) }),
    )
    .await;
    run.focus();
    run.on("tools")
        .end(1, 1, "Error", "too many open files")
        .await;
    run.on("tools").running(2).await;
    run.on("worker").running(2).await;
    group_running(run, "crew", "the group restart done", 1).await;
    run.on("worker").pod_stopped(1).await;
}

pub const GROUP_ESCALATION: Scenario = Scenario {
    name: "group-escalation",
    agents: &["scout"],
    groups: &["root", "team"],
    pending: false,
    drive: |run| Box::pin(escalation(run)),
    expect: |end| {
        let mut problems = restarted_once(end, "scout", Trigger::Failure);
        problems.extend(group_restarted_once(
            end,
            "root",
            ("team", GroupTrigger::Escalation),
            &["team"],
        ));
        let team = end.group("team");
        expect(
            &mut problems,
            "group team: (incarnation, gave up, phase)",
            (team.incarnation, &team.gave_up, team.phase),
            (2, &None, Some(GroupPhase::Running)),
        );
        problems
    },
};

/// A child group with intensity 0 under a root group: its agent's crash makes it give up, the
/// root restarts it (a new incarnation), and it restarts the agent.
async fn escalation(run: &Run) {
    run.create_policy(fast_policy()).await;
    run.create_agent(json!({})).await;
    run.running(1).await;
    // Each group once what it names is known to the operator (see `start`): the child group
    // after the agent runs, the root after the child (the same watch, in order).
    run.create_group(
        "team",
        json!({ "maxRestarts": 0, "members": [{ "agent": "scout" }] }),
    )
    .await;
    run.create_group(
        "root",
        json!({ "maxRestarts": 5, "members": [{ "group": "team" }] }),
    )
    .await;
    group_running(run, "root", "the child group running", 0).await;
    run.focus();
    run.end(1, 1, "Error", "lost the plot").await;
    run.running(2).await;
    group_running(run, "root", "the child group restarted", 1).await;
    run.group_until("team", "its second incarnation running", |s| {
        s.incarnation >= 2 && s.phase == Some(GroupPhase::Running)
    })
    .await;
}

pub const GROUP_RESET: Scenario = Scenario {
    name: "group-give-up-reset",
    agents: &["first", "second"],
    groups: &["solo"],
    pending: false,
    drive: |run| Box::pin(give_up_reset(run)),
    expect: |end| {
        let mut problems = Vec::new();
        for agent in ["first", "second"] {
            let a = end.agent(agent);
            expect(
                &mut problems,
                &format!("agent {agent}: (phase, attempt, restartCount)"),
                (a.phase, a.attempt, a.restart_count),
                (Some(Phase::Running), 2, 1),
            );
        }
        let solo = end.group("solo");
        expect(
            &mut problems,
            "group solo: (phase, gave up, reset handled)",
            (
                solo.phase,
                &solo.gave_up,
                solo.handled_reset_request.as_deref(),
            ),
            (Some(GroupPhase::Running), &None, Some("after-the-incident")),
        );
        problems
    },
};

/// A root group with intensity 0 gives up at its first crash, stopping both members; a person
/// resets it, and both start again.
async fn give_up_reset(run: &Run) {
    let agents = ["first", "second"];
    start(
        run,
        &agents,
        "solo",
        json!({ "strategy": "OneForAll", "maxRestarts": 0, "members": members(&agents) }),
    )
    .await;
    run.focus();
    run.end(1, 1, "Error", "boom").await;
    run.group_until("solo", "given up", |s| {
        s.phase == Some(GroupPhase::Escalated)
    })
    .await;
    for agent in agents {
        run.on(agent)
            .until("stopped by its group", |s| s.phase == Some(Phase::Stopped))
            .await;
    }
    run.on("second").pod_stopped(1).await;
    run.patch_group(
        "solo",
        json!({ "metadata": { "annotations": {
            "supervisor.dev/reset-requested-at": "after-the-incident" } } }),
    )
    .await;
    for agent in agents {
        run.on(agent).running(2).await;
    }
    run.group_until("solo", "running again", |s| {
        s.phase == Some(GroupPhase::Running) && s.gave_up.is_none()
    })
    .await;
}

/// `agent` ran attempt 2 after exactly one restart, recorded once with `trigger`, and no pod
/// but its first two was ever created.
pub(crate) fn restarted_once(end: &End, agent: &str, trigger: Trigger) -> Vec<String> {
    let a = end.agent(agent);
    let mut problems = Vec::new();
    expect(
        &mut problems,
        &format!("agent {agent}: (phase, attempt, restartCount)"),
        (a.phase, a.attempt, a.restart_count),
        (Some(Phase::Running), 2, 1),
    );
    let triggers: Vec<Trigger> = a.history.iter().map(|r| r.trigger).collect();
    expect(
        &mut problems,
        &format!("agent {agent}: history triggers"),
        triggers,
        vec![trigger],
    );
    expect(
        &mut problems,
        &format!("agent {agent}: pods created"),
        a.pods_created.clone(),
        vec![format!("{agent}-1"), format!("{agent}-2")],
    );
    problems
}

/// `group` is Running after exactly one restart: `member` crashed (`trigger`), and `restarted`
/// were restarted.
fn group_restarted_once(
    end: &End,
    group: &str,
    (member, trigger): (&str, GroupTrigger),
    restarted: &[&str],
) -> Vec<String> {
    let g = end.group(group);
    let mut problems = Vec::new();
    expect(
        &mut problems,
        &format!("group {group}: (phase, restartCount)"),
        (g.phase, g.restart_count),
        (Some(GroupPhase::Running), 1),
    );
    let history: Vec<_> = g
        .history
        .iter()
        .map(|r| (r.member.as_deref(), r.trigger, r.restarted.clone()))
        .collect();
    let restarted: Vec<String> = restarted.iter().map(|s| s.to_string()).collect();
    expect(
        &mut problems,
        &format!("group {group}: history (member, trigger, restarted)"),
        history,
        vec![(Some(member), trigger, restarted)],
    );
    problems
}

fn expect<T: PartialEq + std::fmt::Debug>(problems: &mut Vec<String>, what: &str, got: T, want: T) {
    if got != want {
        problems.push(format!("{what}: want {want:?}, got {got:?}"));
    }
}
