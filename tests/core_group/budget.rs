//! A group's spend budget: its members' spend summed; used up, every member is told to shut
//! down (the Budget order), once said; raised, the order goes. A group above whose budget is
//! used up passes its order down.

use agent_supervisor::api::{Budget, Spend, StopOrder, StopReason, Strategy};
use agent_supervisor::supervise::group::{Directive, GroupEventReason, MemberState};

use super::build::*;

fn spent(cost: &str) -> Option<Spend> {
    Some(Spend {
        cost: Some(cost.to_string()),
        tokens: None,
    })
}

fn with_spend(state: MemberState, cost: &str) -> MemberState {
    match state {
        MemberState::Agent(mut a) => {
            a.spend = spent(cost);
            MemberState::Agent(a)
        }
        MemberState::Group(mut g) => {
            g.spend = spent(cost);
            MemberState::Group(g)
        }
        other => other,
    }
}

fn budgeted(max_cost: &str, members: &[&str]) -> G {
    let mut spec = spec(Strategy::OneForOne, members);
    spec.budget = Some(Budget {
        max_cost: Some(max_cost.to_string()),
        max_tokens: None,
        window: None,
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
    assert_eq!(plan.status.spend, spent("0.70"));
    assert!(plan.status.members.iter().all(|m| m.stop.is_none()));

    g.set("b", with_spend(running(1), "0.30"));
    let plan = g.at(20).step();
    assert_eq!(plan.status.spend, spent("1.00"));
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
