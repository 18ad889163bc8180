//! A group's spend budget: its members' spend counted as it grows; used up, every member is
//! told to shut down (the Budget order), once said; raised, or its window moved on, the order
//! goes. A group above whose budget is used up passes its order down. What was counted stays
//! counted: a decision made again adds nothing, a member that leaves takes nothing with it, a
//! member whose own window begins again adds its new total.

use agent_supervisor::api::{Budget, Duration, StopOrder, StopReason, Strategy, Time};
use agent_supervisor::supervise::group::{Directive, GroupEventReason, MemberState, SpendSeen};

use super::build::*;

/// The group's total cost, as its status says.
fn total(plan: &agent_supervisor::supervise::group::GroupPlan) -> Option<&str> {
    plan.status.spend.as_ref().and_then(|s| s.cost.as_deref())
}

/// A member's state reporting `cost` in all, counted since `since` (seconds).
fn spending(state: MemberState, cost: &str, since: i64) -> MemberState {
    let seen = Some(SpendSeen {
        cost: Some(cost.to_string()),
        tokens: None,
        since: Some(Time(t(since))),
    });
    match state {
        MemberState::Agent(mut a) => {
            a.spend = seen;
            MemberState::Agent(a)
        }
        MemberState::Group(mut g) => {
            g.spend = seen;
            MemberState::Group(g)
        }
        other => other,
    }
}

fn with_spend(state: MemberState, cost: &str) -> MemberState {
    spending(state, cost, 0)
}

fn budgeted(max_cost: &str, members: &[&str]) -> G {
    budgeted_for(max_cost, None, members)
}

fn budgeted_for(max_cost: &str, window: Option<u64>, members: &[&str]) -> G {
    let mut spec = spec(Strategy::OneForOne, members);
    spec.budget = Some(Budget {
        max_cost: Some(max_cost.to_string()),
        max_tokens: None,
        window: window.map(Duration::from_secs),
        warn_at: 0.8,
    });
    G::new(spec)
}

#[test]
fn the_members_spend_is_summed_and_a_spent_budget_shuts_every_member_down() {
    let mut g = budgeted("1.00", &["a", "b", "c", "+sub"]);
    g.set("a", with_spend(running(1), "0.40"));
    g.set(
        "sub",
        with_spend(
            child(1, agent_supervisor::api::GroupPhase::Running, None),
            "0.30",
        ),
    );
    let plan = g.at(10).step();
    assert_eq!(total(&plan), Some("0.70"));
    assert_eq!(plan.status.spend.as_ref().unwrap().since, Some(Time(t(10))));
    assert!(plan.status.members.iter().all(|m| m.stop.is_none()));

    g.set("b", with_spend(running(1), "0.30"));
    let plan = g.at(20).step();
    assert_eq!(total(&plan), Some("1.00"));
    for member in &plan.status.members {
        let stop = member.stop.as_ref().expect("every member is stopped");
        assert_eq!(stop.reason, StopReason::Budget, "{}", member.name);
        assert!(
            stop.message
                .as_deref()
                .unwrap_or_default()
                .contains("1.00 of 1.00")
        );
    }
    assert_eq!(reasons(&plan), [GroupEventReason::BudgetExhausted]);
    assert!(plan.events[0].warning);
    // Said once.
    assert_eq!(g.at(30).step().events, []);
    assert_eq!(
        g.directive("c").stop.map(|s| s.reason),
        Some(StopReason::Budget)
    );

    // Raised: the order goes, and the members lift their own shutdowns.
    g.input.group.spec.budget.as_mut().unwrap().max_cost = Some("2.00".into());
    let plan = g.at(40).step();
    assert!(plan.status.members.iter().all(|m| m.stop.is_none()));
    assert_eq!(g.directive("a").stop, None);
}

#[test]
fn a_budget_order_from_above_is_passed_down() {
    let mut g = G::new(spec(Strategy::OneForOne, &["a", "b"]));
    g.input.parent = Some(Directive {
        stop: Some(StopOrder {
            reason: StopReason::Budget,
            kind: Some(agent_supervisor::api::ShutdownType::Economic),
            message: Some("group org's spend budget is used up: 9.00 of 9.00".into()),
        }),
        ..listed("org")
    });
    let plan = g.at(10).step();
    for member in &plan.status.members {
        let stop = member.stop.as_ref().expect("stopped from above");
        assert_eq!(stop.reason, StopReason::Budget);
        assert_eq!(
            stop.message.as_deref(),
            Some("group org's spend budget is used up: 9.00 of 9.00")
        );
    }
}

#[test]
fn each_members_growth_is_counted_once_and_stays_counted_when_it_leaves() {
    let mut g = budgeted("5.00", &["a", "b"]);
    g.set("a", with_spend(running(1), "0.40"));
    g.set("b", with_spend(running(1), "0.25"));
    assert_eq!(total(&g.at(10).step()), Some("0.65"));
    // Looked at again with nothing new (a lost write, another trigger): nothing added.
    assert_eq!(total(&g.at(11).step()), Some("0.65"));
    assert_eq!(total(&g.at(12).step()), Some("0.65"));
    // a grows by 0.10: only that is added.
    g.set("a", with_spend(running(2), "0.50"));
    assert_eq!(total(&g.at(20).step()), Some("0.75"));
    // b leaves the group: what it spent while in it was spent.
    g.input
        .group
        .spec
        .members
        .retain(|m| m.agent.as_deref() != Some("b"));
    g.input.members.retain(|m| m.key.name != "b");
    let plan = g.at(30).step();
    assert_eq!(total(&plan), Some("0.75"));
    let kept: Vec<&str> = plan
        .status
        .spend
        .as_ref()
        .unwrap()
        .members
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(kept, ["a"]);
}

#[test]
fn a_member_whose_own_window_begins_again_adds_its_new_total() {
    let mut g = budgeted("5.00", &["a"]);
    g.set("a", spending(running(1), "0.90", 0));
    assert_eq!(total(&g.at(10).step()), Some("0.90"));
    // Its own policy's window began again at 100: its total went back to 0.20, all of it new.
    g.set("a", spending(running(2), "0.20", 100));
    assert_eq!(total(&g.at(110).step()), Some("1.10"));
    g.set("a", spending(running(2), "0.30", 100));
    assert_eq!(total(&g.at(120).step()), Some("1.20"));
}

#[test]
fn a_group_budget_window_begins_the_count_again_and_its_members_resume() {
    let mut g = budgeted_for("1.00", Some(3600), &["a", "b"]);
    g.set("a", with_spend(running(1), "0.60"));
    let plan = g.at(100).step();
    assert_eq!(total(&plan), Some("0.60"));
    // Decide again when the window ends, whatever happens before.
    assert_eq!(plan.wake, Some(std::time::Duration::from_secs(3600)));
    g.set("b", with_spend(running(1), "0.40"));
    let plan = g.at(200).step();
    assert_eq!(total(&plan), Some("1.00"));
    assert!(plan.status.members.iter().all(|m| {
        m.stop
            .as_ref()
            .is_some_and(|s| s.reason == StopReason::Budget)
    }));
    assert!(
        plan.events[0].note.contains("window begins again at"),
        "{}",
        plan.events[0].note
    );

    // Not yet: still spent.
    assert!(
        g.at(3699)
            .step()
            .status
            .members
            .iter()
            .all(|m| m.stop.is_some())
    );
    // The window has run: the count begins again from what the members have now, and the
    // order goes.
    let plan = g.at(3700).step();
    assert_eq!(total(&plan), Some("0.00"));
    assert_eq!(
        plan.status.spend.as_ref().unwrap().since,
        Some(Time(t(3700)))
    );
    assert_eq!(plan.wake, Some(std::time::Duration::from_secs(3600)));
    assert!(plan.status.members.iter().all(|m| m.stop.is_none()));
    // Only what they spend in the new window counts.
    g.set("a", with_spend(running(2), "0.90"));
    assert_eq!(total(&g.at(3800).step()), Some("0.30"));
}

#[test]
fn without_a_window_nothing_wakes_the_group() {
    let mut g = budgeted("1.00", &["a"]);
    g.set("a", with_spend(running(1), "0.60"));
    assert_eq!(g.at(100).step().wake, None);
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config {
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    })]

    /// Members' spend grows in any order, the group looks in between, and some of its writes are
    /// lost (the next look starts from the status before): every cent is counted once.
    #[test]
    fn every_growth_is_counted_once_whatever_the_looks_and_lost_writes(
        steps in proptest::collection::vec((0..3usize, 0..4u64, proptest::bool::ANY), 1..40)
    ) {
        let names = ["a", "b", "c"];
        let mut g = budgeted("1000.00", &names);
        let mut cents = [0u64; 3];
        for (i, (who, grow, lost)) in steps.into_iter().enumerate() {
            cents[who] += grow * 5;
            let cost = format!("{}.{:02}", cents[who] / 100, cents[who] % 100);
            g.set(names[who], with_spend(running(1), &cost));
            let before = g.input.status.clone();
            g.at(10 + i as i64).step();
            if lost {
                g.input.status = before;
            }
        }
        let plan = g.at(100).step();
        let sum: u64 = cents.iter().sum();
        let counted = total(&plan).map(str::to_string);
        let expected = (sum > 0 || plan.status.spend.is_some())
            .then(|| format!("{}.{:02}", sum / 100, sum % 100));
        proptest::prop_assert_eq!(counted, expected);
    }
}
