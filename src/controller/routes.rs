//! Where a watched change goes besides its own object's reconcile: a group's change to the
//! Agents and groups it names (and named), an Agent's to the groups that name it and the policy
//! that counts it, a policy's spec to its Agents. Plain state kept between changes, so the
//! watches only forward what these say.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::groups::{self, GroupIndex, GroupObject};
use super::watch::Change;
use super::{AgentObject, PolicyObject};
use crate::api::{Agent, MemberKey, MemberKind, Outage, Phase};
use crate::supervise::conditions::{self, READY};

/// The other objects one change concerns.
#[derive(Debug, Default, PartialEq)]
pub struct Triggers {
    pub agents: Vec<ObjectRef<AgentObject>>,
    pub groups: Vec<ObjectRef<GroupObject>>,
    /// Policies whose users (or their failures) changed: their status is counted again.
    pub policies: Vec<ObjectRef<PolicyObject>>,
}

/// Routes AgentGroup changes, keeping the index of who names whom.
pub struct GroupRoutes {
    index: Arc<GroupIndex>,
}

impl GroupRoutes {
    pub fn new(index: Arc<GroupIndex>) -> Self {
        GroupRoutes { index }
    }

    /// The group as its controller sees it (a deleted one carries a deletion time) and what
    /// else it concerns: every member it names or named, and the groups that name it.
    pub fn route(&self, change: Change<GroupObject>) -> (GroupObject, Triggers) {
        let group = match change {
            Change::Applied(g) => g,
            Change::Deleted(mut g) => {
                g.meta_mut()
                    .deletion_timestamp
                    .get_or_insert_with(|| Time(jiff::Timestamp::now()));
                g
            }
        };
        let namespace = group.namespace().unwrap_or_default();
        let members = groups::member_keys(&group);
        let before = self.index.update(&group, members.clone());
        let mut triggers = Triggers::default();
        for key in before.iter().chain(&members) {
            match key.kind {
                MemberKind::Agent => triggers
                    .agents
                    .push(ObjectRef::new(&key.name).within(&namespace)),
                MemberKind::AgentGroup => triggers
                    .groups
                    .push(ObjectRef::new(&key.name).within(&namespace)),
            }
        }
        let me = MemberKey::group(&group.name_any());
        triggers.groups.extend(self.index.naming(&namespace, &me));
        (group, triggers)
    }
}

/// Routes Agent changes: to the groups that name it, and to its policy when which policy it
/// uses, or what of it the policy's outage decision reads, changed.
pub struct AgentRoutes {
    index: Arc<GroupIndex>,
    uses: HashMap<ObjectRef<AgentObject>, (Option<String>, OutageSignature)>,
}

impl AgentRoutes {
    pub fn new(index: Arc<GroupIndex>) -> Self {
        AgentRoutes {
            index,
            uses: HashMap::new(),
        }
    }

    pub fn route(&mut self, change: Change<AgentObject>) -> (AgentObject, Triggers) {
        let (agent, used, signature) = match change {
            Change::Applied(a) => {
                let used = a.0.as_ref().ok().map(policy_name);
                let signature = a.0.as_ref().ok().map(outage_signature).unwrap_or_default();
                (a, used, signature)
            }
            Change::Deleted(a) => (a, None, OutageSignature::default()),
        };
        let key = ObjectRef::from(&agent);
        let (before, signed) = match &used {
            Some(_) => self.uses.insert(key, (used.clone(), signature.clone())),
            None => self.uses.remove(&key),
        }
        .unwrap_or_default();
        let namespace = agent.namespace().unwrap_or_default();
        let mut triggers = Triggers::default();
        if before != used || signed != signature {
            // Its policy counts its users and watches their failures for outages.
            let policies = [before, used].into_iter().flatten();
            triggers.policies = policies
                .map(|name| ObjectRef::new(&name).within(&namespace))
                .collect();
            triggers.policies.dedup();
        }
        triggers.groups = (self.index).naming(&namespace, &MemberKey::agent(&agent.name_any()));
        (agent, triggers)
    }
}

/// Routes RestartPolicy changes: its Agents decide again when its spec or its outages changed
/// (or it came or went); a write of its other status fields concerns no one.
#[derive(Default)]
pub struct PolicyRoutes {
    seen: HashMap<ObjectRef<PolicyObject>, (Option<i64>, Vec<Outage>)>,
}

impl PolicyRoutes {
    /// The policy, and whether its Agents decide again.
    pub fn route(&mut self, change: Change<PolicyObject>) -> (PolicyObject, bool) {
        let (policy, seen) = match change {
            Change::Applied(p) => {
                let outages =
                    p.0.as_ref()
                        .ok()
                        .and_then(|p| p.status.as_ref())
                        .map(|s| s.outages.clone())
                        .unwrap_or_default();
                let generation = p.meta().generation;
                (p, Some((generation, outages)))
            }
            Change::Deleted(p) => (p, None),
        };
        let key = ObjectRef::from(&policy);
        let before = match seen.clone() {
            Some(g) => self.seen.insert(key, g),
            None => self.seen.remove(&key),
        };
        (policy, before != seen)
    }
}

/// What of an Agent its policy's outage decision looks at: a change of any of it reconciles the
/// policy. Progress of a running pod that is not written to the status (a Lease renewal) is
/// polled by the decision while it probes.
#[derive(Clone, Debug, Default, PartialEq)]
struct OutageSignature {
    phase: Option<Phase>,
    attempt: u32,
    failed_at: Option<jiff::Timestamp>,
    ready: bool,
}

fn outage_signature(agent: &Agent) -> OutageSignature {
    let Some(s) = agent.status.as_ref() else {
        return OutageSignature::default();
    };
    OutageSignature {
        phase: s.phase,
        attempt: s.attempt,
        failed_at: s.last_failure.as_ref().map(|f| f.time.0),
        ready: conditions::get(&s.conditions, READY).is_some_and(|c| c.status == "True"),
    }
}

/// The RestartPolicy an Agent uses: the one it names, else the namespace's `default`.
pub fn policy_name(agent: &Agent) -> String {
    match &agent.spec.restart_policy_ref {
        Some(reference) => reference.name.clone(),
        None => "default".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn agent(name: &str, policy: Option<&str>, attempt: u32) -> AgentObject {
        let mut spec = json!({"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}});
        if let Some(policy) = policy {
            spec["restartPolicyRef"] = json!({"name": policy});
        }
        serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": spec,
            "status": {"attempt": attempt},
        }))
        .expect("an Agent")
    }

    fn group(name: &str, members: &[(&str, &str)]) -> GroupObject {
        let members: Vec<_> = members
            .iter()
            .map(|(kind, name)| match *kind {
                "Agent" => json!({"agent": name}),
                _ => json!({"group": name}),
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "AgentGroup",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"members": members},
        }))
        .expect("an AgentGroup")
    }

    fn policy(generation: i64, outages: serde_json::Value) -> PolicyObject {
        serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "RestartPolicy",
            "metadata": {"name": "p", "namespace": "ns", "generation": generation},
            "spec": {},
            "status": {"outages": outages},
        }))
        .expect("a RestartPolicy")
    }

    fn refs<K: Resource<DynamicType = ()>>(names: &[&str]) -> Vec<ObjectRef<K>> {
        names
            .iter()
            .map(|n| ObjectRef::new(n).within("ns"))
            .collect()
    }

    #[test]
    fn a_group_concerns_every_member_it_names_or_named_and_the_groups_naming_it() {
        let routes = GroupRoutes::new(Arc::default());
        let parent = group("parent", &[("AgentGroup", "child")]);
        let (_, t) = routes.route(Change::Applied(parent));
        assert_eq!(t.groups, refs(&["child"]));

        let child = group("child", &[("Agent", "a"), ("Agent", "b")]);
        let (_, t) = routes.route(Change::Applied(child));
        assert_eq!(t.agents, refs(&["a", "b"]));
        assert_eq!(t.groups, refs(&["parent"]), "its parent sees its change");

        // `b` leaves: it is reconciled too, to learn it is on its own now.
        let (_, t) = routes.route(Change::Applied(group("child", &[("Agent", "a")])));
        assert_eq!(t.agents, refs(&["a", "b", "a"]));

        let (gone, t) = routes.route(Change::Deleted(group("child", &[("Agent", "a")])));
        assert!(
            gone.meta().deletion_timestamp.is_some(),
            "a deleted group says so"
        );
        assert_eq!(
            t.agents,
            refs(&["a"]),
            "its last member learns it is on its own"
        );
        let (_, t) = routes.route(Change::Applied(group("other", &[])));
        assert!(t.agents.is_empty() && t.groups.is_empty());
    }

    #[test]
    fn an_agent_recounts_its_policy_only_when_what_the_policy_reads_changed() {
        let mut routes = AgentRoutes::new(Arc::default());
        let (_, t) = routes.route(Change::Applied(agent("a", None, 0)));
        assert_eq!(t.policies, refs(&["default"]), "a new user is counted");
        let (_, t) = routes.route(Change::Applied(agent("a", None, 0)));
        assert!(t.policies.is_empty(), "nothing the policy reads changed");
        let (_, t) = routes.route(Change::Applied(agent("a", None, 1)));
        assert_eq!(
            t.policies,
            refs(&["default"]),
            "a new attempt is news to outages"
        );
        let (_, t) = routes.route(Change::Applied(agent("a", Some("p"), 1)));
        assert_eq!(t.policies, refs(&["default", "p"]), "both policies recount");
        let (_, t) = routes.route(Change::Deleted(agent("a", Some("p"), 1)));
        assert_eq!(t.policies, refs(&["p"]), "a user gone is counted out");
    }

    #[test]
    fn an_agent_concerns_the_groups_that_name_it() {
        let index = Arc::new(GroupIndex::default());
        let groups = GroupRoutes::new(index.clone());
        groups.route(Change::Applied(group("team", &[("Agent", "a")])));
        let mut routes = AgentRoutes::new(index);
        let (_, t) = routes.route(Change::Applied(agent("a", None, 0)));
        assert_eq!(t.groups, refs(&["team"]));
        let (_, t) = routes.route(Change::Applied(agent("b", None, 0)));
        assert!(t.groups.is_empty());
    }

    #[test]
    fn a_policy_concerns_its_agents_when_its_spec_or_outages_change() {
        let mut routes = PolicyRoutes::default();
        assert!(
            routes.route(Change::Applied(policy(1, json!([])))).1,
            "a new policy"
        );
        assert!(
            !routes.route(Change::Applied(policy(1, json!([])))).1,
            "a status write"
        );
        assert!(
            routes.route(Change::Applied(policy(2, json!([])))).1,
            "a new spec"
        );
        let outage = json!([{
            "fingerprint": "f", "reason": "Error", "since": "2026-01-01T00:00:00Z",
            "agents": 3, "state": "Holding",
        }]);
        assert!(
            routes.route(Change::Applied(policy(2, outage))).1,
            "an outage"
        );
        assert!(
            routes.route(Change::Deleted(policy(2, json!([])))).1,
            "gone"
        );
    }
}
