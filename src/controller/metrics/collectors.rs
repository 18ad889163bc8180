//! The gauges counted from the caches at scrape time: Agents by phase, breakers by state,
//! RestartPolicies' outages.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::api::wire::Guarded;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

use crate::api::{Agent, BreakerState, Phase, RestartPolicy};

/// Agents by phase and breakers by state, counted from the caches at scrape time.
#[derive(Debug)]
pub(super) struct AgentCollector {
    pub(super) stores: Mutex<Vec<Store<Guarded<Agent>>>>,
    pub(super) per_agent: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    namespace: String,
    agent: String,
}

impl Collector for AgentCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let objects: Vec<Arc<Guarded<Agent>>> = self
            .stores
            .lock()
            .expect("metrics lock")
            .iter()
            .flat_map(|s| s.state())
            .collect();
        let agents: Vec<&Agent> = objects.iter().filter_map(|o| o.0.as_ref().ok()).collect();
        let mut phases: BTreeMap<&str, i64> = [
            Phase::Pending,
            Phase::Running,
            Phase::BackingOff,
            Phase::CircuitOpen,
            Phase::Stopped,
            Phase::Shutdown,
            Phase::Suspended,
        ]
        .iter()
        .map(|p| (p.as_str(), 0))
        .collect();
        let mut breakers: BTreeMap<&str, i64> = [
            BreakerState::Closed,
            BreakerState::Open,
            BreakerState::HalfOpen,
        ]
        .iter()
        .map(|s| (s.as_str(), 0))
        .collect();
        let mut held = 0i64;
        // Spend as the agents report it, summed (a cost's unit is whatever they report in).
        let (mut cost, mut tokens, mut budget_stopped) = (0f64, 0i64, 0i64);
        for agent in &agents {
            if let Some(spend) = agent.status.as_ref().and_then(|s| s.spend.as_ref()) {
                cost += spend
                    .cost
                    .as_deref()
                    .and_then(|c| c.parse::<f64>().ok())
                    .unwrap_or(0.0);
                tokens = tokens.saturating_add(spend.tokens.map_or(0, |t| t as i64));
            }
            let by_budget = agent.status.as_ref().and_then(|s| s.shutdown.as_ref());
            budget_stopped +=
                i64::from(by_budget.is_some_and(|s| s.source.as_deref() == Some("Budget")));
        }
        for agent in &agents {
            let status = agent.status.as_ref();
            let outage = status.is_some_and(|s| {
                s.phase == Some(Phase::CircuitOpen)
                    && s.conditions.iter().any(|c| {
                        c.type_ == crate::supervise::conditions::CIRCUIT_BREAKER_OPEN
                            && c.reason == "Outage"
                    })
            });
            held += i64::from(outage);
            if let Some(phase) = status.and_then(|s| s.phase) {
                *phases.entry(phase.as_str()).or_default() += 1;
            }
            let state = status
                .and_then(|s| s.circuit_breaker.as_ref())
                .map(|b| b.state)
                .unwrap_or_default();
            *breakers.entry(state.as_str()).or_default() += 1;
        }
        let gauge = ConstGauge::new(0i64);
        let mut family =
            encoder.encode_descriptor("agents", "Agents by phase", None, gauge.metric_type())?;
        for (phase, count) in phases {
            ConstGauge::new(count).encode(family.encode_family(&PhaseLabel {
                phase: phase.to_string(),
            })?)?;
        }
        let mut family = encoder.encode_descriptor(
            "breakers",
            "Circuit breakers by state",
            None,
            gauge.metric_type(),
        )?;
        for (state, count) in breakers {
            ConstGauge::new(count).encode(family.encode_family(&StateLabel {
                state: state.to_string(),
            })?)?;
        }
        let held_gauge = ConstGauge::new(held);
        let metric = encoder.encode_descriptor(
            "outage_held_agents",
            "Agents whose restart is held by an open outage",
            None,
            held_gauge.metric_type(),
        )?;
        held_gauge.encode(metric)?;
        let cost_gauge = ConstGauge::new(cost);
        let metric = encoder.encode_descriptor(
            "spend_cost",
            "The cost all agents report they spent (status.spend), in their unit",
            None,
            cost_gauge.metric_type(),
        )?;
        cost_gauge.encode(metric)?;
        let tokens_gauge = ConstGauge::new(tokens);
        let metric = encoder.encode_descriptor(
            "spend_tokens",
            "The tokens all agents report they spent (status.spend)",
            None,
            tokens_gauge.metric_type(),
        )?;
        tokens_gauge.encode(metric)?;
        let stopped_gauge = ConstGauge::new(budget_stopped);
        let metric = encoder.encode_descriptor(
            "budget_stopped_agents",
            "Agents shut down by their spend budget now",
            None,
            stopped_gauge.metric_type(),
        )?;
        stopped_gauge.encode(metric)?;
        if self.per_agent {
            let mut family = encoder.encode_descriptor(
                "agent_restarts",
                "Restarts of each agent",
                None,
                gauge.metric_type(),
            )?;
            for agent in &agents {
                let labels = AgentLabels {
                    namespace: agent.namespace().unwrap_or_default(),
                    agent: agent.name_any(),
                };
                let restarts = agent
                    .status
                    .as_ref()
                    .map_or(0, |s| i64::from(s.restart_count));
                ConstGauge::new(restarts).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// Open outages, counted from the policy caches at scrape time.
#[derive(Debug, Default)]
pub(super) struct PolicyCollector {
    pub(super) stores: Mutex<Vec<Store<Guarded<RestartPolicy>>>>,
}

impl Collector for PolicyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let open: usize = self
            .stores
            .lock()
            .expect("metrics lock")
            .iter()
            .flat_map(|s| s.state())
            .filter_map(|p| {
                p.0.as_ref()
                    .ok()
                    .and_then(|p| p.status.as_ref())
                    .map(|s| s.outages.len())
            })
            .sum();
        let gauge = ConstGauge::new(i64::try_from(open).unwrap_or(i64::MAX));
        let metric = encoder.encode_descriptor(
            "outages_open",
            "Open outages across all RestartPolicies",
            None,
            gauge.metric_type(),
        )?;
        gauge.encode(metric)
    }
}
