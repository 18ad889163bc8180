//! Builders shared by the group scenarios: the clock, specs, members as a group sees them, and
//! `G`, a group whose status is carried from one decision to the next.

use agent_supervisor::api::GroupTrigger;
use agent_supervisor::api::{
    AgentGroupSpec, AgentGroupStatus, AutoShutdown, Condition, Duration, GroupPhase, Member,
    MemberKey, MemberStatus, Phase, Shutdown, ShutdownType, StartOrder, StopReason, Strategy,
};
use agent_supervisor::supervise::conditions;
use agent_supervisor::supervise::group::{
    AgentView, ChildView, Crash, Directive, GroupEventReason, GroupFacts, GroupInput, GroupPlan,
    MemberFacts, MemberState, decide_group,
};
use jiff::Timestamp;

pub const GROUP: &str = "team";
pub const UID: &str = "5c1d-team";

pub use crate::clock::t;

/// A spec naming Agents (a `+` prefix names a group instead), with a small intensity.
pub fn spec(strategy: Strategy, members: &[&str]) -> AgentGroupSpec {
    AgentGroupSpec {
        strategy,
        members: members
            .iter()
            .map(|m| match m.strip_prefix('+') {
                Some(group) => Member::group(group),
                None => Member::agent(m),
            })
            .collect(),
        max_restarts: 3,
        window: Duration::from_secs(300),
        start_order: StartOrder::Parallel,
        auto_shutdown: AutoShutdown::Never,
        budget: None,
    }
}

/// An Agent running and ready in its attempt `attempt`.
pub fn running(attempt: u32) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::Running),
        attempt,
        ready: true,
        ..AgentView::default()
    })
}

/// An Agent whose pod of attempt `attempt` is created and not running yet.
pub fn pending(attempt: u32) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::Pending),
        attempt,
        ..AgentView::default()
    })
}

/// An Agent whose attempt `attempt` crashed (exit code non-zero); its policy restarts it at `due`.
pub fn crashed(attempt: u32, due: Option<i64>) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::BackingOff),
        attempt,
        crash: Some(Crash {
            attempt,
            reason: "Error".to_string(),
            trigger: GroupTrigger::Failure,
            due: due.map(t),
            counted: true,
        }),
        ..AgentView::default()
    })
}

/// An Agent whose attempt `attempt` was evicted: restarted at once, counted toward nothing.
pub fn evicted(attempt: u32) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::BackingOff),
        attempt,
        crash: Some(Crash {
            attempt,
            reason: "Evicted".to_string(),
            trigger: GroupTrigger::Disruption,
            due: None,
            counted: false,
        }),
        ..AgentView::default()
    })
}

/// A child group in its incarnation `incarnation`; `gave_up`: the incarnation that gave up.
pub fn child(incarnation: u32, phase: GroupPhase, gave_up: Option<u32>) -> MemberState {
    MemberState::Group(ChildView {
        phase: Some(phase),
        incarnation,
        restart_count: 0,
        gave_up,
        shutdown: None,
        spend: None,
    })
}

pub fn shutdown(kind: ShutdownType, source: &str) -> Shutdown {
    Shutdown {
        kind,
        reason: Some("budget exhausted".to_string()),
        message: None,
        at: None,
        source: Some(source.to_string()),
    }
}

/// An Agent that shut down itself (`source` says who decided).
pub fn shut_down(kind: ShutdownType, source: &str) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::Shutdown),
        attempt: 1,
        shutdown: Some(shutdown(kind, source)),
        ..AgentView::default()
    })
}

/// An Agent stopped (by its group) in attempt `attempt`.
pub fn stopped(attempt: u32) -> MemberState {
    MemberState::Agent(AgentView {
        phase: Some(Phase::Stopped),
        attempt,
        ..AgentView::default()
    })
}

/// A group's orders to a member: listed, nothing else.
pub fn listed(group: &str) -> Directive {
    Directive {
        group: group.to_string(),
        listed: true,
        ..Directive::default()
    }
}

/// A group, its members' states and its status, decided again and again.
pub struct G {
    pub input: GroupInput,
}

impl G {
    /// A group whose members all run in attempt 1 and that has already taken them in.
    pub fn new(spec: AgentGroupSpec) -> G {
        let mut g = G::fresh(spec);
        g.step();
        g
    }

    /// A group never decided before.
    pub fn fresh(spec: AgentGroupSpec) -> G {
        let members = spec
            .members
            .iter()
            .map(|m| MemberFacts {
                key: m.key(),
                significant: m.significant,
                state: match m.key().kind {
                    agent_supervisor::api::MemberKind::Agent => running(1),
                    agent_supervisor::api::MemberKind::AgentGroup => {
                        child(1, GroupPhase::Running, None)
                    }
                },
            })
            .collect();
        G {
            input: GroupInput {
                now: t(0),
                group: GroupFacts {
                    name: GROUP.to_string(),
                    uid: UID.to_string(),
                    generation: 1,
                    created: jiff::Timestamp::MIN,
                    spec,
                    reset_requested: None,
                },
                status: AgentGroupStatus::default(),
                parent: None,
                members,
            },
        }
    }

    pub fn at(&mut self, secs: i64) -> &mut Self {
        self.input.now = t(secs);
        self
    }

    /// Member `name` is now in `state`.
    pub fn set(&mut self, name: &str, state: MemberState) -> &mut Self {
        let member = self
            .input
            .members
            .iter_mut()
            .find(|m| m.key.name == name)
            .unwrap_or_else(|| panic!("{name} is a member"));
        member.state = state;
        self
    }

    /// Decides and writes the status, checking that the decision is repeatable.
    pub fn step(&mut self) -> GroupPlan {
        let plan = decide_group(self.input.clone());
        assert_eq!(decide_group(self.input.clone()), plan, "repeatable");
        self.input.status = plan.status.clone();
        plan
    }

    pub fn status(&self) -> &AgentGroupStatus {
        &self.input.status
    }

    /// What member `name` reads of its orders.
    pub fn directive(&self, name: &str) -> Directive {
        let key = self
            .input
            .members
            .iter()
            .find(|m| m.key.name == name)
            .map(|m| m.key.clone())
            .unwrap_or_else(|| MemberKey::agent(name));
        Directive::read(GROUP, Some(&self.input.status), &key)
    }
}

#[track_caller]
pub fn entry<'a>(status: &'a AgentGroupStatus, name: &str) -> &'a MemberStatus {
    status
        .members
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("{name} is listed: {:?}", status.members))
}

/// Member `name`'s restart order: (attempt, due).
pub fn order(status: &AgentGroupStatus, name: &str) -> Option<(u32, Timestamp)> {
    entry(status, name)
        .restart
        .as_ref()
        .map(|r| (r.attempt, r.due.0))
}

/// The members that have a restart order, in member order.
pub fn ordered(status: &AgentGroupStatus) -> Vec<&str> {
    status
        .members
        .iter()
        .filter(|m| m.restart.is_some())
        .map(|m| m.name.as_str())
        .collect()
}

/// The members told to wait, and for whom.
pub fn waiting(status: &AgentGroupStatus) -> Vec<(&str, &str)> {
    status
        .members
        .iter()
        .filter_map(|m| m.waiting_for.as_deref().map(|w| (m.name.as_str(), w)))
        .collect()
}

/// Every member's stop order's reason.
pub fn stops(status: &AgentGroupStatus) -> Vec<Option<StopReason>> {
    status
        .members
        .iter()
        .map(|m| m.stop.as_ref().map(|s| s.reason))
        .collect()
}

pub fn reasons(plan: &GroupPlan) -> Vec<GroupEventReason> {
    plan.events.iter().map(|e| e.reason).collect()
}

#[track_caller]
pub fn condition<'a>(status: &'a AgentGroupStatus, type_: &str) -> &'a Condition {
    conditions::get(&status.conditions, type_)
        .unwrap_or_else(|| panic!("condition {type_} is set: {:?}", status.conditions))
}

/// A condition's status and reason.
#[track_caller]
pub fn cond(status: &AgentGroupStatus, type_: &str) -> (String, String) {
    let c = condition(status, type_);
    (c.status.clone(), c.reason.clone())
}

pub fn is(status: &str, reason: &str) -> (String, String) {
    (status.to_string(), reason.to_string())
}

/// A OneForAll group of a, b, c with intensity 0, after b crashed at t(100).
pub fn given_up() -> G {
    let mut zero = spec(Strategy::OneForAll, &["a", "b", "c"]);
    zero.max_restarts = 0;
    let mut g = G::new(zero);
    g.at(100).set("b", crashed(1, Some(110))).step();
    g
}
