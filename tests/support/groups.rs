//! Supervision groups in integration tests: create them, read and wait for their status.

use agent_supervisor::api::{AgentGroup, AgentGroupStatus, GroupPhase};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};

use super::kubelet::REACT;
use super::{TestNamespace, eventually};

impl TestNamespace {
    /// Creates the AgentGroup `name` with `spec`.
    pub async fn create_group(&self, name: &str, spec: Value) -> AgentGroup {
        let group: AgentGroup = serde_json::from_value(json!({
            "apiVersion": "supervisor.dev/v1alpha1", "kind": "AgentGroup",
            "metadata": { "name": name }, "spec": spec
        }))
        .expect("test group deserializes");
        self.api::<AgentGroup>()
            .create(&PostParams::default(), &group)
            .await
            .expect("create group")
    }

    pub async fn group_status(&self, group: &str) -> AgentGroupStatus {
        self.api::<AgentGroup>()
            .get_status(group)
            .await
            .expect("read group")
            .status
            .unwrap_or_default()
    }

    /// Waits until the group's status satisfies `check`, and returns it.
    pub async fn wait_group(
        &self,
        group: &str,
        what: &str,
        check: impl Fn(&AgentGroupStatus) -> bool,
    ) -> AgentGroupStatus {
        let api = self.api::<AgentGroup>();
        eventually(REACT, &format!("group {group}: {what}"), || {
            let api = api.clone();
            let check = &check;
            async move {
                let status = api.get_status(group).await.ok()?.status?;
                check(&status).then_some(status)
            }
        })
        .await
    }

    /// Waits until the group is Running with every member running.
    pub async fn wait_group_running(&self, group: &str) -> AgentGroupStatus {
        self.wait_group(group, "phase Running", |s| {
            s.phase == Some(GroupPhase::Running)
        })
        .await
    }

    /// The Events recorded about `group`, oldest first, as (reason, note): one for each time it
    /// was told (`kubelet::told`), with the newest note of its Event.
    pub async fn group_events(&self, group: &str) -> Vec<(String, String)> {
        let events: Api<Event> = self.api();
        let params = ListParams::default()
            .fields(&format!("regarding.name={group},regarding.kind=AgentGroup"));
        let mut list = events.list(&params).await.expect("list events").items;
        list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        super::kubelet::occurrences(list)
    }

    /// Waits until an Event with `reason` is recorded about `group`; returns its note.
    pub async fn wait_group_event(&self, group: &str, reason: &str) -> String {
        eventually(
            REACT,
            &format!("an Event {reason} on group {group}"),
            || async move {
                self.group_events(group)
                    .await
                    .into_iter()
                    .find(|(r, _)| r == reason)
                    .map(|(_, note)| note)
            },
        )
        .await
    }
}

/// A condition of a group's status, as (status, reason, message).
pub fn condition(status: &AgentGroupStatus, type_: &str) -> Option<(String, String, String)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}
