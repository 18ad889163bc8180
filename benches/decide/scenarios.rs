//! The decide bench's inputs, one per path through `decide`, each checked to take its path.

use agent_supervisor::api::{
    AgentStatus, BreakerState, CircuitBreakerStatus, FailureReason, Phase, Shutdown, ShutdownType,
};
use agent_supervisor::supervise::input::Termination;
use agent_supervisor::supervise::{
    EventReason, Input, LeaseFacts, PodFacts, PolicyResolution, decide, pod_name,
};

use crate::fixtures::{
    AGENT, ATTEMPT, HISTORY_LIMIT, POLICY, agent, ago, at, failed_pod, now, policy, running_pod,
    running_status, traceback,
};

fn input(status: AgentStatus, pod: Option<PodFacts>, lease: Option<LeaseFacts>) -> Input {
    Input {
        now: now(),
        agent: agent(lease.is_some()),
        status,
        policy: PolicyResolution::Named(POLICY.to_string(), policy()),
        pod,
        previous: None,
        lease,
        group: None,
        outages: Vec::new(),
    }
}

pub fn steady_running() -> Input {
    let lease = LeaseFacts {
        expect_slow_until: None,
        holder: Some(pod_name(AGENT, ATTEMPT)),
        renew_time: Some(ago(7)),
        reported: Default::default(),
    };
    input(running_status(), Some(running_pod(5400)), Some(lease))
}

pub fn crash_backoff() -> Input {
    let mut status = running_status();
    status.consecutive_failures = 2;
    // 20 restarts in the last hour, one every three minutes.
    status.recent_restarts = (0..20).map(|i| at(120 + i * 170)).collect();
    let pod = failed_pod(Termination {
        exit_code: 1,
        signal: None,
        reason: Some("Error".to_string()),
        message: Some(traceback(1024)),
        started_at: Some(ago(185)),
        finished_at: Some(ago(1)),
    });
    input(status, Some(pod), None)
}

pub fn half_open_probe_fails() -> Input {
    let mut status = running_status();
    status.consecutive_failures = 5;
    status.circuit_breaker = Some(CircuitBreakerStatus {
        state: BreakerState::HalfOpen,
        trips: 2,
        opened_at: Some(at(660)),
        half_open_at: Some(at(60)),
    });
    let pod = failed_pod(Termination {
        exit_code: 137,
        signal: None,
        reason: Some("OOMKilled".to_string()),
        message: None,
        started_at: Some(ago(55)),
        finished_at: Some(ago(2)),
    });
    input(status, Some(pod), None)
}

pub fn heartbeat_lost() -> Input {
    let lease = LeaseFacts {
        expect_slow_until: None,
        holder: Some(pod_name(AGENT, ATTEMPT)),
        renew_time: Some(ago(300)),
        reported: Default::default(),
    };
    input(running_status(), Some(running_pod(5400)), Some(lease))
}

pub fn shutdown_left_alone() -> Input {
    let mut status = running_status();
    status.shutdown = Some(Shutdown {
        kind: ShutdownType::Economic,
        reason: Some("budget exhausted".to_string()),
        message: Some("spent 50.00 of 50.00 USD for 2025-06-01".to_string()),
        at: Some(at(3)),
        source: Some("economy-service".to_string()),
    });
    input(status, Some(running_pod(5400)), None)
}

pub fn first_start() -> Input {
    input(AgentStatus::default(), None, None)
}

/// Each input takes the path its benchmark is named after.
pub fn check_paths() {
    let reasons = |input: &Input| -> Vec<EventReason> {
        decide(input.clone())
            .events
            .iter()
            .map(|e| e.reason)
            .collect()
    };

    let plan = decide(steady_running());
    assert_eq!(plan.status.phase, Some(Phase::Running));
    assert!(plan.events.is_empty() && plan.create_pod.is_none() && plan.delete_pod.is_none());
    assert_eq!(
        plan.status,
        steady_running().status,
        "steady state writes nothing"
    );

    let plan = decide(crash_backoff());
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(plan.status.restart_history.len(), HISTORY_LIMIT as usize);
    // One Event for the crash, which says when the restart comes.
    assert_eq!(reasons(&crash_backoff()), [EventReason::Crashed]);
    assert!(
        plan.events[0].note.contains("restarting"),
        "{}",
        plan.events[0].note
    );

    let plan = decide(half_open_probe_fails());
    assert_eq!(plan.status.phase, Some(Phase::CircuitOpen));
    let breaker = plan.status.circuit_breaker.expect("breaker");
    assert_eq!((breaker.state, breaker.trips), (BreakerState::Open, 3));
    assert_eq!(
        plan.status.last_failure.map(|f| f.reason),
        Some(FailureReason::OomKilled)
    );

    let plan = decide(heartbeat_lost());
    assert_eq!(plan.delete_pod, Some(pod_name(AGENT, ATTEMPT)));
    assert_eq!(plan.status.phase, Some(Phase::BackingOff));
    assert_eq!(reasons(&heartbeat_lost()), [EventReason::HeartbeatLost]);

    let plan = decide(shutdown_left_alone());
    assert_eq!(plan.status.phase, Some(Phase::Shutdown));
    assert!(plan.create_pod.is_none() && plan.delete_pod.is_none());
    assert!(plan.record_shutdown.is_none());
    assert_eq!(
        reasons(&shutdown_left_alone()),
        [EventReason::ShutdownRespected]
    );

    let plan = decide(first_start());
    assert_eq!(plan.create_pod.map(|p| p.name), Some(pod_name(AGENT, 1)));
}
