//! The normalized end state of a group: what must come out the same whether or not the
//! operator crashed on the way.

use agent_supervisor::api::{
    AgentGroupStatus, GroupPhase, GroupTrigger, MemberKind, ShutdownType, StopReason,
};
use serde::Serialize;

use crate::normal::{membership, reset_key};

/// One restart under a group, without its time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupRecord {
    pub member: Option<String>,
    pub reason: Option<String>,
    pub restarted: Vec<String>,
    pub trigger: GroupTrigger,
}

/// A group's entry for one member: what the member was, and the group's orders to it (a
/// restart order by the attempt it ends; its due time depends on when the crash was seen).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberEntry {
    pub name: String,
    pub kind: MemberKind,
    pub phase: Option<String>,
    pub restart_count: u32,
    pub restart: Option<u32>,
    pub waiting_for: Option<String>,
    pub stop: Option<StopReason>,
    pub reset: Option<String>,
}

/// The deterministic part of a group's status.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupNormal {
    pub phase: Option<GroupPhase>,
    pub ready: Option<String>,
    pub incarnation: u32,
    pub restart_count: u32,
    pub history: Vec<GroupRecord>,
    /// How many restarts count toward the group's intensity.
    pub recent_restarts: usize,
    /// The incarnation that gave up, and the member whose crash made it.
    pub gave_up: Option<(u32, Option<String>)>,
    pub shutdown: Option<(ShutdownType, Option<String>, Option<String>)>,
    /// Conditions as (type, status, reason), sorted by type.
    pub conditions: Vec<(String, String, String)>,
    pub members: Vec<MemberEntry>,
    /// Its parent group, and the last reset the parent ordered that it carried out.
    pub group: Option<(String, Option<String>)>,
    pub handled_reset_request: Option<String>,
    /// Whether the status is of the latest spec.
    pub observed_latest: bool,
}

impl GroupNormal {
    /// `generation`: the group's, whose status it is.
    pub fn of(status: &AgentGroupStatus, generation: Option<i64>) -> GroupNormal {
        let mut conditions: Vec<_> = status
            .conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect();
        conditions.sort();
        GroupNormal {
            phase: status.phase,
            ready: status.ready.clone(),
            incarnation: status.incarnation,
            restart_count: status.restart_count,
            history: status
                .restart_history
                .iter()
                .map(|r| GroupRecord {
                    member: r.member.clone(),
                    reason: r.reason.clone(),
                    restarted: r.restarted.clone(),
                    trigger: r.trigger,
                })
                .collect(),
            recent_restarts: status.recent_restarts.len(),
            gave_up: status
                .gave_up
                .as_ref()
                .map(|g| (g.incarnation, g.member.clone())),
            shutdown: status
                .shutdown
                .as_ref()
                .map(|s| (s.kind, s.reason.clone(), s.source.clone())),
            conditions,
            members: status
                .members
                .iter()
                .map(|m| MemberEntry {
                    name: m.name.clone(),
                    kind: m.kind,
                    phase: m.phase.clone(),
                    restart_count: m.restart_count,
                    restart: m.restart.as_ref().map(|r| r.attempt),
                    waiting_for: m.waiting_for.clone(),
                    stop: m.stop.as_ref().map(|s| s.reason),
                    reset: m.reset.as_deref().map(reset_key),
                })
                .collect(),
            group: membership(&status.group),
            handled_reset_request: status.handled_reset_request.clone(),
            observed_latest: status.observed_generation == generation,
        }
    }
}
