//! Pods as the IO shell sees them: a pod just created for a `NewPod`, any one-container pod, and
//! the agent's container.

use agent_supervisor::supervise::input::{ContainerFacts, ContainerPhase, PodPhase};
use agent_supervisor::supervise::{NewPod, PodFacts};
use jiff::Timestamp;

/// The pod's one container, named `agent`, in `state`.
pub(crate) fn container(state: ContainerPhase) -> ContainerFacts {
    ContainerFacts {
        name: "agent".to_string(),
        state,
    }
}

/// Pod `name` of attempt `attempt`, made from the template `template_hash` at `created_at`: in
/// `phase`, not ready, not being deleted, with no reason, message, disruption or scheduling
/// trouble, its one container `agent` in `state`; its origin says nothing (a first start).
pub(crate) fn pod(
    name: String,
    attempt: u32,
    template_hash: &str,
    created_at: Timestamp,
    phase: PodPhase,
    state: ContainerPhase,
) -> PodFacts {
    PodFacts {
        name,
        attempt,
        template_hash: Some(template_hash.to_string()),
        created_at,
        adopted_at: None,
        deleting: false,
        phase,
        reason: None,
        message: None,
        disruption: None,
        unschedulable: None,
        scheduled_at: None,
        ready: false,
        containers: vec![container(state)],
        agent_container: None,
        origin: Default::default(),
    }
}

/// The pod just created for `new` from the template `template_hash` at `now`: Pending, its
/// container waiting with the reason `waiting` (such as `ContainerCreating`), and what it was
/// created for written on it, as its annotations say.
pub(crate) fn new_pod(
    new: &NewPod,
    template_hash: &str,
    now: Timestamp,
    waiting: Option<&str>,
) -> PodFacts {
    let state = ContainerPhase::Waiting {
        reason: waiting.map(str::to_string),
        message: None,
    };
    PodFacts {
        origin: new.origin.clone(),
        ..pod(
            new.name.clone(),
            new.attempt,
            template_hash,
            now,
            PodPhase::Pending,
            state,
        )
    }
}
