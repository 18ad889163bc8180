//! Prometheus metrics, prefixed `agent_supervisor_`. No label names an agent unless per-agent
//! metrics are switched on.

mod collectors;

use std::sync::{Arc, Mutex};

use crate::api::wire::Guarded;
use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::api::{Agent, AgentGroupStatus, AgentStatus, Phase, RestartPolicy};
use crate::supervise::outage::OutageEvent;
use crate::supervise::{EventReason, Plan};
use collectors::{AgentCollector, PolicyCollector};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub reason: String,
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RestartLabels {
    pub reason: String,
    pub class: String,
    pub trigger: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TriggerLabel {
    pub trigger: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

/// Why an agent is stopped: the `Ready` reasons of phase `Stopped` (`give_ups`' label).
pub const GIVE_UP_REASONS: [&str; 6] = [
    "RestartLimitExceeded",
    "RestartPolicyNever",
    "StoppedByRule",
    "PermanentFailure",
    "GroupGaveUp",
    "GroupShutdown",
];

/// Every metric the operator exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Mutex<Registry>,
    pub crashes: Family<FailureLabels, Counter>,
    pub restarts: Family<RestartLabels, Counter>,
    pub restart_delay: Histogram,
    pub breaker_trips: Counter,
    pub checkpoints_poisoned: Counter,
    pub budget_shutdowns: Counter,
    pub give_ups: Family<ReasonLabel, Counter>,
    pub recovery: Histogram,
    pub reconcile_duration: Histogram,
    pub reconcile_errors: Family<ReasonLabel, Counter>,
    pub group_restarts: Family<TriggerLabel, Counter>,
    pub group_escalations: Counter,
    pub outage_events: Family<ReasonLabel, Counter>,
    pub restarts_delayed: Counter,
    pub events_dropped: Counter,
    /// From a change's cause to the write that records it (`reconcile::record::write`).
    pub status_lag: Histogram,
    /// Agents with a status decided and not yet written (`writer`).
    pub status_pending: Gauge,
    agents: Arc<AgentCollector>,
    policies: Arc<PolicyCollector>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(false)
    }
}

impl Metrics {
    /// With `per_agent`, also `agent_supervisor_agent_restarts{namespace,agent}`.
    pub fn new(per_agent: bool) -> Self {
        let mut registry = Registry::with_prefix("agent_supervisor");
        let metrics = Metrics {
            registry: Mutex::new(Registry::default()),
            crashes: Family::default(),
            restarts: Family::default(),
            restart_delay: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            breaker_trips: Counter::default(),
            checkpoints_poisoned: Counter::default(),
            budget_shutdowns: Counter::default(),
            give_ups: Family::default(),
            recovery: Histogram::new(exponential_buckets(0.5, 2.0, 14)),
            reconcile_duration: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            reconcile_errors: Family::default(),
            group_restarts: Family::default(),
            group_escalations: Counter::default(),
            outage_events: Family::default(),
            restarts_delayed: Counter::default(),
            events_dropped: Counter::default(),
            status_lag: Histogram::new(exponential_buckets(0.25, 2.0, 8)),
            status_pending: Gauge::default(),
            agents: Arc::new(AgentCollector {
                stores: Mutex::default(),
                per_agent,
            }),
            policies: Arc::new(PolicyCollector::default()),
        };
        registry.register(
            "crashes",
            "Attempts that ended, by failure reason and class",
            metrics.crashes.clone(),
        );
        registry.register(
            "restarts",
            "Restarts performed, by failure reason, class and trigger",
            metrics.restarts.clone(),
        );
        registry.register_with_unit(
            "restart_delay",
            "Backoff chosen before a restart",
            Unit::Seconds,
            metrics.restart_delay.clone(),
        );
        registry.register(
            "breaker_trips",
            "Times a circuit breaker opened",
            metrics.breaker_trips.clone(),
        );
        registry.register(
            "checkpoints_poisoned",
            "Checkpoints given up on after failing checkpoints.maxFailures resumes in a row",
            metrics.checkpoints_poisoned.clone(),
        );
        registry.register(
            "budget_shutdowns",
            "Agents shut down because their spend reached their budget",
            metrics.budget_shutdowns.clone(),
        );
        registry.register(
            "give_ups",
            "Agents stopped for good (until reset), by reason",
            metrics.give_ups.clone(),
        );
        registry.register_with_unit(
            "time_to_recovery",
            "From a crash to the replacement pod Running",
            Unit::Seconds,
            metrics.recovery.clone(),
        );
        registry.register_with_unit(
            "reconcile_duration",
            "Time spent in one reconcile",
            Unit::Seconds,
            metrics.reconcile_duration.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles, by error reason",
            metrics.reconcile_errors.clone(),
        );
        registry.register(
            "group_restarts",
            "Restarts under AgentGroups, by trigger (a member's crash, a child group giving up, a parent's restart)",
            metrics.group_restarts.clone(),
        );
        registry.register(
            "group_escalations",
            "Times an AgentGroup gave up and escalated to its parent (or stopped, at the root)",
            metrics.group_escalations.clone(),
        );
        registry.register(
            "outage_events",
            "Outage breaker transitions, by Event reason (OutageDetected, OutageProbe, OutageProbeFailed, OutageEnded)",
            metrics.outage_events.clone(),
        );
        registry.register(
            "restarts_delayed",
            "Restarts that waited for the restart budget (--restart-rate, --restart-burst)",
            metrics.restarts_delayed.clone(),
        );
        registry.register(
            "events_dropped",
            "Events not sent because too many were waiting to be (the status still records what they told)",
            metrics.events_dropped.clone(),
        );
        registry.register_with_unit(
            "status_lag",
            "From a change's cause (a pod's end or a Lease report as first seen, else the change decided) to the write that records it (within --status-interval, as promised)",
            Unit::Seconds,
            metrics.status_lag.clone(),
        );
        registry.register(
            "status_pending",
            "Agents with a status decided and not yet written (each within --status-interval)",
            metrics.status_pending.clone(),
        );
        registry.register_collector(Box::new(metrics.agents.clone()));
        registry.register_collector(Box::new(metrics.policies.clone()));
        *metrics.registry.lock().expect("metrics lock") = registry;
        metrics.start_at_zero();
        metrics
    }

    /// Every series whose labels come from a closed set starts at 0, so it is exported before
    /// its first event and `increase()` sees that first event (a series born at 1 shows no
    /// increase, and an alert on it would miss the first give-up).
    fn start_at_zero(&self) {
        use crate::api::{FailureClass, FailureReason, GroupTrigger};
        for reason in FailureReason::ALL {
            for class in FailureClass::ALL {
                let labels = FailureLabels {
                    reason: reason.to_string(),
                    class: class.as_str().to_string(),
                };
                let _ = self.crashes.get_or_create(&labels);
            }
        }
        let reason = |r: &str| ReasonLabel {
            reason: r.to_string(),
        };
        for r in GIVE_UP_REASONS {
            let _ = self.give_ups.get_or_create(&reason(r));
        }
        for r in crate::supervise::outage::OutageEventReason::ALL {
            let _ = self.outage_events.get_or_create(&reason(r.as_str()));
        }
        for t in GroupTrigger::ALL {
            let labels = TriggerLabel {
                trigger: t.as_str().to_string(),
            };
            let _ = self.group_restarts.get_or_create(&labels);
        }
    }

    /// Counts agents by phase and breaker state from this store at every scrape.
    pub fn watch_agents(&self, store: Store<Guarded<Agent>>) {
        self.agents.stores.lock().expect("metrics lock").push(store);
    }

    /// Counts open outages from this store at every scrape.
    pub fn watch_policies(&self, store: Store<Guarded<RestartPolicy>>) {
        self.policies
            .stores
            .lock()
            .expect("metrics lock")
            .push(store);
    }

    /// Records what one outage decision did, once its status was written.
    pub fn observe_outages(&self, events: &[OutageEvent]) {
        for event in events {
            let labels = ReasonLabel {
                reason: event.reason.as_str().to_string(),
            };
            self.outage_events.get_or_create(&labels).inc();
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().expect("metrics lock");
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("metrics encode to a String");
        out
    }

    /// Records what one group decision did, once its status was written.
    pub fn observe_group(&self, before: &AgentGroupStatus, after: &AgentGroupStatus) {
        if after.restart_count > before.restart_count
            && let Some(record) = after.restart_history.first()
        {
            let labels = TriggerLabel {
                trigger: record.trigger.as_str().to_string(),
            };
            self.group_restarts
                .get_or_create(&labels)
                .inc_by(u64::from(after.restart_count - before.restart_count));
        }
        if after.gave_up.is_some() && before.gave_up.is_none() {
            self.group_escalations.inc();
        }
    }

    /// Records what one decision did, once it was carried out.
    pub fn observe(&self, before: &AgentStatus, plan: &Plan, now: jiff::Timestamp) {
        let after = &plan.status;
        if after.last_failure != before.last_failure
            && let Some(f) = &after.last_failure
        {
            let labels = FailureLabels {
                reason: f.reason.to_string(),
                class: f.class.as_str().to_string(),
            };
            self.crashes.get_or_create(&labels).inc();
        }
        if after.restart_count > before.restart_count
            && let Some(record) = after.restart_history.first()
        {
            let labels = RestartLabels {
                reason: record.reason.map(|r| r.to_string()).unwrap_or_default(),
                class: record
                    .class
                    .map(|c| c.as_str().to_string())
                    .unwrap_or_default(),
                trigger: format!("{:?}", record.trigger),
            };
            self.restarts.get_or_create(&labels).inc();
        }
        // A new record with its delay chosen: a failure's backoff, a breaker's open time, a
        // retry-after wait (a held restart's wait is known only when it ends).
        let newest = after.restart_history.first();
        let new_record = newest.filter(|r| {
            before.restart_history.first().is_none_or(|b| {
                (b.attempt, b.trigger, &b.failed_at) != (r.attempt, r.trigger, &r.failed_at)
            })
        });
        if let Some(delay) = new_record.and_then(|r| r.backoff) {
            self.restart_delay
                .observe(delay.as_millis() as f64 / 1000.0);
        }
        for event in &plan.events {
            match event.reason {
                EventReason::CircuitOpened => {
                    self.breaker_trips.inc();
                }
                EventReason::CheckpointPoisoned => {
                    self.checkpoints_poisoned.inc();
                }
                EventReason::BudgetExhausted => {
                    self.budget_shutdowns.inc();
                }
                _ => {}
            }
        }
        if after.phase == Some(Phase::Stopped) && before.phase != Some(Phase::Stopped) {
            let reason = after
                .conditions
                .iter()
                .find(|c| c.type_ == crate::supervise::conditions::READY)
                .map(|c| c.reason.clone())
                .unwrap_or_default();
            self.give_ups.get_or_create(&ReasonLabel { reason }).inc();
        }
        // Recovered: the attempt after a failure is Running for the first time.
        if after.phase == Some(Phase::Running)
            && before.phase != Some(Phase::Running)
            && let Some(failed_at) = after
                .restart_history
                .first()
                .and_then(|r| r.failed_at.as_ref())
            && after
                .restart_history
                .first()
                .is_some_and(|r| r.attempt + 1 == after.attempt)
        {
            let secs = (now - failed_at.0).total(jiff::Unit::Second).unwrap_or(0.0);
            self.recovery.observe(secs.max(0.0));
        }
    }
}
