//! AgentGroups at admission: valid groups are accepted with SPEC's defaults filled in by the
//! server; invalid ones are refused with a message naming the field and what is wrong;
//! `kubectl explain` documents every field.

use agent_supervisor::api::{
    AgentGroup, AgentGroupSpec, AutoShutdown, Member, StartOrder, Strategy,
};
use kube::Api;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::support::TestNamespace;
use crate::{create_raw, explain, refusal_failures, setup};

fn group(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "AgentGroup",
        "metadata": { "name": name }, "spec": spec
    })
}

/// `{"members": [{"agent": "a0"}, …]}` with `count` members.
fn members(count: usize) -> Value {
    let members: Vec<Value> = (0..count)
        .map(|i| json!({ "agent": format!("a{i}") }))
        .collect();
    json!({ "members": members })
}

/// The spec as the API server stored it, untouched by the Rust types' own defaults.
async fn stored_spec(ns: &TestNamespace, name: &str) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::erase::<AgentGroup>(&()),
    );
    let object = api.get(name).await.expect("read the group back");
    object.data["spec"].clone()
}

#[tokio::test]
async fn valid_groups_are_accepted_and_defaulted_by_the_server() {
    let ns = setup().await;
    let cases = [
        ("minimal", json!({ "members": [{ "agent": "a" }] })),
        (
            "every-field",
            json!({
                "strategy": "RestForOne",
                "members": [
                    { "agent": "db", "significant": true },
                    { "group": "workers" },
                    { "agent": "api", "significant": false },
                ],
                "maxRestarts": 0,
                "window": "1h30m",
                "startOrder": "Sequential",
                "autoShutdown": "AllSignificant",
            }),
        ),
        // An Agent and an AgentGroup may share a name: they are different members.
        (
            "same-name-two-kinds",
            json!({ "members": [{ "agent": "x", "significant": true }, { "group": "x" }], "autoShutdown": "AnySignificant" }),
        ),
        ("most-members", members(64)),
        (
            "budget-window",
            json!({ "members": [{ "agent": "a" }], "budget": { "maxCost": "5", "window": "24h" } }),
        ),
        (
            "longest-names",
            json!({ "members": [{ "agent": "a".repeat(63) }, { "group": "g".repeat(253) }], "maxRestarts": 1000, "window": "1.5s" }),
        ),
    ];
    for (name, spec) in &cases {
        create_raw::<AgentGroup>(&ns, group(name, spec.clone()))
            .await
            .unwrap_or_else(|message| panic!("{name} should be accepted: {message}"));
    }

    // The server filled in SPEC's defaults: they are in the stored object, not only in serde's.
    assert_eq!(
        stored_spec(&ns, "minimal").await,
        json!({
            "members": [{ "agent": "a" }],
            "strategy": "OneForOne",
            "maxRestarts": 3,
            "window": "5m",
            "startOrder": "Parallel",
            "autoShutdown": "Never",
        })
    );
    // What was set is kept as it was given.
    let every_field = stored_spec(&ns, "every-field").await;
    assert_eq!(every_field, cases[1].1, "every-field was stored as given");
    let groups: Api<AgentGroup> = ns.api();
    let typed = groups.get("every-field").await.expect("read back").spec;
    assert_eq!(
        typed,
        AgentGroupSpec {
            strategy: Strategy::RestForOne,
            members: vec![
                Member {
                    significant: true,
                    ..Member::agent("db")
                },
                Member::group("workers"),
                Member::agent("api"),
            ],
            max_restarts: 0,
            window: "1h30m".parse().expect("a duration"),
            start_order: StartOrder::Sequential,
            auto_shutdown: AutoShutdown::AllSignificant,
            budget: None,
        }
    );
}

#[tokio::test]
async fn invalid_groups_are_rejected_with_a_message_naming_the_field() {
    let ns = setup().await;
    let one = json!([{ "agent": "a" }]);
    // (name, spec, what the message must say)
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "agent-and-group",
            json!({ "members": [{ "agent": "a" }, { "agent": "b", "group": "c" }] }),
            vec![
                "spec.members[1]",
                "a member names exactly one of agent and group",
            ],
        ),
        (
            "neither",
            json!({ "members": [{ "significant": true }] }),
            vec![
                "spec.members[0]",
                "a member names exactly one of agent and group",
            ],
        ),
        (
            "duplicate-agent",
            json!({ "members": [{ "agent": "a" }, { "agent": "b" }, { "agent": "a" }] }),
            vec![
                "spec.members",
                "each member must be named once: an Agent or AgentGroup appears twice in members",
            ],
        ),
        (
            "duplicate-group",
            json!({ "members": [{ "group": "g" }, { "group": "g" }] }),
            vec!["spec.members", "each member must be named once"],
        ),
        (
            "itself",
            json!({ "members": [{ "agent": "a" }, { "group": "itself" }] }),
            vec!["spec.members: Invalid value: a group cannot be a member of itself"],
        ),
        (
            "window-zero",
            json!({ "members": one, "window": "0s" }),
            vec!["spec.window", "window must be longer than 0s"],
        ),
        (
            "budget-window-zero",
            json!({ "members": one, "budget": { "maxCost": "5", "window": "0s" } }),
            vec!["spec.budget.window", "budget window must be longer than 0s"],
        ),
        (
            "budget-cost-words",
            json!({ "members": one, "budget": { "maxCost": "five" } }),
            vec!["spec.budget.maxCost", "should match"],
        ),
        (
            "window-words",
            json!({ "members": one, "window": "five minutes" }),
            vec!["spec.window", "must be a duration such as 30s, 5m or 1h30m"],
        ),
        (
            "window-days",
            json!({ "members": one, "window": "1d" }),
            vec!["spec.window", "must be a duration"],
        ),
        (
            "window-number",
            json!({ "members": one, "window": 300 }),
            vec!["spec.window", "must be of type string"],
        ),
        (
            "max-restarts-high",
            json!({ "members": one, "maxRestarts": 1001 }),
            vec!["spec.maxRestarts", "less than or equal to 1000"],
        ),
        (
            "max-restarts-negative",
            json!({ "members": one, "maxRestarts": -1 }),
            vec!["spec.maxRestarts", "greater than or equal to 0"],
        ),
        (
            "shutdown-none-significant",
            json!({ "members": one, "autoShutdown": "AnySignificant" }),
            vec![
                "spec.autoShutdown",
                "autoShutdown needs at least one member marked significant: true",
            ],
        ),
        (
            "shutdown-all-not-significant",
            json!({ "members": [{ "agent": "a", "significant": false }], "autoShutdown": "AllSignificant" }),
            vec![
                "spec.autoShutdown",
                "autoShutdown needs at least one member marked significant: true",
            ],
        ),
        (
            "members-empty",
            json!({ "members": [] }),
            vec!["spec.members", "should have at least 1 items"],
        ),
        (
            "members-missing",
            json!({}),
            vec!["spec.members", "Required value"],
        ),
        (
            "members-too-many",
            members(65),
            vec!["spec.members", "must have at most 64 items"],
        ),
        (
            "agent-uppercase",
            json!({ "members": [{ "agent": "Alpha" }] }),
            vec!["spec.members[0].agent", "\"Alpha\"", "should match"],
        ),
        (
            "agent-too-long",
            json!({ "members": [{ "agent": "a".repeat(64) }] }),
            vec!["spec.members[0].agent", "may not be more than 63"],
        ),
        (
            "agent-empty",
            json!({ "members": [{ "agent": "" }] }),
            vec!["spec.members[0].agent", "at least 1 chars long"],
        ),
        (
            "group-underscore",
            json!({ "members": [{ "agent": "a" }, { "group": "my_group" }] }),
            vec!["spec.members[1].group", "\"my_group\"", "should match"],
        ),
        (
            "group-too-long",
            json!({ "members": [{ "group": "g".repeat(254) }] }),
            vec!["spec.members[0].group", "may not be more than 253"],
        ),
        (
            "strategy",
            json!({ "members": one, "strategy": "OneForSome" }),
            vec!["spec.strategy", "Unsupported value: \"OneForSome\""],
        ),
        (
            "start-order",
            json!({ "members": one, "startOrder": "Random" }),
            vec!["spec.startOrder", "Unsupported value: \"Random\""],
        ),
    ];
    let mut failures = Vec::new();
    for (name, spec, expected) in cases {
        // A member naming nothing is not also called a duplicate.
        let absent: &[&str] = if name == "neither" {
            &["named once"]
        } else {
            &[]
        };
        failures.extend(
            refusal_failures::<AgentGroup>(&ns, name, group(name, spec), &expected, absent).await,
        );
    }
    assert!(
        failures.is_empty(),
        "admission did not reject as expected:\n{}",
        failures.join("\n")
    );
}

#[tokio::test]
async fn kubectl_explain_documents_every_group_field() {
    drop(setup().await);
    // kubectl wraps descriptions at 80 columns: compare with the line breaks undone.
    let explain = async |path: &str| {
        explain(path)
            .await
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let spec = explain("agentgroup.spec").await;
    for want in [
        "An OTP supervisor for agents",
        "strategy",
        "Default OneForOne",
        "members",
        "in start order",
        "maxRestarts",
        "Default 3",
        "window",
        "Default 5m",
        "startOrder",
        "Default Parallel",
        "autoShutdown",
        "Default Never",
    ] {
        assert!(
            spec.contains(want),
            "explain agentgroup.spec lacks {want:?}:\n{spec}"
        );
    }
    let member = explain("agentgroup.spec.members").await;
    for want in ["agent", "group", "significant", "at most 63 characters"] {
        assert!(
            member.contains(want),
            "explain agentgroup.spec.members lacks {want:?}:\n{member}"
        );
    }
    for path in [
        "agentgroup.spec",
        "agentgroup.spec.members",
        "agentgroup.status",
        "agentgroup.status.members",
        "agentgroup.status.members.restart",
        "agentgroup.status.restartHistory",
    ] {
        let text = explain(path).await;
        assert!(
            !text.contains("<no description>"),
            "explain {path} has an undocumented field:\n{text}"
        );
    }
}
