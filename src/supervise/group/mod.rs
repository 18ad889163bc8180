//! Supervision groups, the pure part: who belongs to which group ([`membership`]), what a group
//! does when its members change ([`decide_group`]), and what a member reads of its group's orders
//! ([`Directive`]).
//!
//! How a group restart goes, each step one write of one object:
//! 1. A member's own decision records its crash (a pending restart in its history, or an open
//!    breaker) and waits: a member of a group restarts after a crash only once its group has
//!    taken the crash in.
//! 2. The group's decision sees the crash. It counts it toward the group's intensity (giving up
//!    when it is exceeded) and writes, in its own status, a restart order for each member the
//!    strategy affects: "end attempt n, start the next no earlier than `due`" (`due` is when the
//!    crashed member's own policy restarts it). The same write records the restart in the
//!    group's history and count.
//! 3. Each affected member's decision obeys its order once: a sibling with a live pod records a
//!    restart with trigger `Group` and stops its pod; at `due`, and when the start order lets it,
//!    it starts its next attempt. An order names an attempt, so it is carried out at most once
//!    and a stale one is recognised as such.
//!
//! A child group is a member like an Agent: its "attempt" is its incarnation, its crash is its
//! giving up, and an order to restart it makes it restart all its members with a fresh count.

mod decide;
pub mod membership;
mod view;

pub use decide::{GroupEvent, GroupEventReason, GroupPlan, Related, decide_group};
pub use membership::{GroupSpecView, Membership, Refusal};
pub use view::{
    AgentView, ChildView, Crash, Directive, GroupFacts, GroupInput, MemberFacts, MemberState,
    SpendSeen,
};

/// A group's condition types.
pub const MEMBERS_RESOLVED: &str = "MembersResolved";
pub const ESCALATED: &str = "Escalated";
/// The condition types the operator writes on a group.
pub const OWNED: [&str; 3] = [super::conditions::READY, ESCALATED, MEMBERS_RESOLVED];
