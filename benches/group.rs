//! How long a supervision group's decisions take.
//!
//! `cargo bench --bench group`. Every input is built once, outside the timed loop, and checked to
//! take the path its name says before it is timed.

use std::hint::black_box;
use std::time::Duration as StdDuration;

use agent_supervisor::api::{
    AgentGroupSpec, AgentGroupStatus, AutoShutdown, Duration, GroupPhase, GroupTrigger, Member,
    MemberKey, Phase, StartOrder, Strategy,
};
use agent_supervisor::supervise::group::{
    AgentView, Crash, GroupEventReason, GroupFacts, GroupInput, GroupSpecView, MemberFacts,
    MemberState, Membership, decide_group,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use jiff::{SignedDuration, Timestamp};

const MEMBERS: usize = 8;
/// Every member's current attempt in the steady group.
const ATTEMPT: u32 = 12;

/// The decision's clock: not on a whole second, as a real clock is not.
fn now() -> Timestamp {
    "2025-06-01T12:00:00.734215Z".parse().expect("a timestamp")
}

fn name(i: usize) -> String {
    format!("researcher-{i}")
}

fn spec(strategy: Strategy) -> AgentGroupSpec {
    AgentGroupSpec {
        strategy,
        members: (0..MEMBERS).map(|i| Member::agent(&name(i))).collect(),
        max_restarts: 5,
        window: Duration::from_secs(600),
        start_order: StartOrder::Sequential,
        auto_shutdown: AutoShutdown::Never,
        budget: None,
    }
}

/// A member running and ready in attempt `attempt`, after some restarts.
fn running(attempt: u32) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::Running),
        attempt,
        restart_count: attempt - 1,
        ready: true,
        ..AgentView::default()
    })
}

/// A group of `MEMBERS` running Agents whose status is the one its last decision wrote: two
/// whole-group restarts in its history, an hour ago, every order carried out since.
fn steady(strategy: Strategy) -> GroupInput {
    let members = (0..MEMBERS)
        .map(|i| MemberFacts {
            key: MemberKey::agent(&name(i)),
            significant: false,
            state: running(ATTEMPT - 2),
        })
        .collect();
    let mut input = GroupInput {
        now: now() - SignedDuration::from_secs(3600),
        group: GroupFacts {
            name: "research-team".to_string(),
            uid: "7a1c9e52-0f3b-4d8e-b6a1-2c4d6e8f0a1b".to_string(),
            generation: 2,
            created: jiff::Timestamp::MIN,
            spec: spec(strategy),
            reset_requested: None,
        },
        status: AgentGroupStatus::default(),
        parent: None,
        members,
    };
    input.status = decide_group(input.clone()).status;
    // Member 2 crashed twice; each time every member restarted.
    for attempt in [ATTEMPT - 2, ATTEMPT - 1] {
        input.now += SignedDuration::from_secs(60);
        input.members[2].state = crashed(attempt);
        input.status = decide_group(input.clone()).status;
        for m in &mut input.members {
            m.state = running(attempt + 1);
        }
    }
    input.now = now();
    input.status = decide_group(input.clone()).status;
    input
}

fn crashed(attempt: u32) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::BackingOff),
        attempt,
        restart_count: attempt - 1,
        crash: Some(Crash {
            attempt,
            reason: "OOMKilled".to_string(),
            trigger: GroupTrigger::Failure,
            due: Some(now() + SignedDuration::from_secs(20)),
            counted: true,
        }),
        ..AgentView::default()
    })
}

/// The steady group, and member 5 has just crashed.
fn crash_one_for_all() -> GroupInput {
    let mut input = steady(Strategy::OneForAll);
    input.members[5].state = crashed(ATTEMPT);
    input
}

/// `decide_group` takes its input by value: each iteration gets a fresh copy, made outside the
/// timed section.
fn bench_decide(c: &mut Criterion, name: &str, input: GroupInput) {
    c.bench_function(&format!("decide_group/{name}"), |b| {
        b.iter_batched(
            || input.clone(),
            |input| decide_group(black_box(input)),
            BatchSize::PerIteration,
        )
    });
}

fn decide_group_steady(c: &mut Criterion) {
    let input = steady(Strategy::OneForAll);
    let plan = decide_group(input.clone());
    assert_eq!(plan.events, [], "nothing to say");
    assert_eq!(plan.status, input.status, "nothing to write");
    assert_eq!(plan.status.phase, Some(GroupPhase::Running));
    assert_eq!(plan.status.restart_history.len(), 2);
    bench_decide(c, "steady_8_members", input);
}

fn decide_group_crash(c: &mut Criterion) {
    let input = crash_one_for_all();
    let plan = decide_group(input.clone());
    let reasons: Vec<_> = plan.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, [GroupEventReason::GroupRestart]);
    assert_eq!(plan.status.restart_history[0].restarted.len(), MEMBERS);
    assert!(plan.status.members.iter().all(|m| m.restart.is_some()));
    assert_eq!(plan.status.phase, Some(GroupPhase::Restarting));
    bench_decide(c, "crash_one_for_all_8_members", input);
}

/// 100 groups of 8 members in one namespace: ten chains of ten groups, each group naming seven
/// Agents and the next group of its chain (the last of a chain an eighth Agent), and every
/// tenth group also claiming an Agent of another group (a conflict).
fn namespace() -> Vec<(String, Timestamp, Vec<Member>)> {
    (0..100)
        .map(|g| {
            let mut members: Vec<Member> = (0..7)
                .map(|a| Member::agent(&format!("agent-{g:03}-{a}")))
                .collect();
            members.push(if g % 10 == 9 {
                Member::agent(&format!("agent-{g:03}-7"))
            } else {
                Member::group(&format!("group-{:03}", g + 1))
            });
            if g % 10 == 5 {
                members[6] = Member::agent(&format!("agent-{:03}-0", (g + 50) % 100));
            }
            let created = now() - SignedDuration::from_secs(86_400 - g as i64 * 60);
            (format!("group-{g:03}"), created, members)
        })
        .collect()
}

fn membership_resolve(c: &mut Criterion) {
    let groups = namespace();
    let views: Vec<GroupSpecView<'_>> = groups
        .iter()
        .map(|(name, created, members)| GroupSpecView {
            name,
            created: *created,
            members,
        })
        .collect();
    let m = Membership::resolve(&views);
    assert_eq!(m.owner(&MemberKey::group("group-001")), Some("group-000"));
    assert_eq!(m.group_of_agent("agent-099-7"), Some("group-099"));
    // group-005 is older than group-055: it keeps agent-055-0 from it.
    assert_eq!(m.group_of_agent("agent-055-0"), Some("group-005"));
    assert!(
        m.refusal("group-055", &MemberKey::agent("agent-005-0"))
            .is_some()
    );
    c.bench_function("membership_resolve/100_groups_8_members", |b| {
        b.iter(|| Membership::resolve(black_box(&views)))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(StdDuration::from_secs(1))
        .measurement_time(StdDuration::from_secs(3));
    targets = decide_group_steady, decide_group_crash, membership_resolve
}
criterion_main!(benches);
