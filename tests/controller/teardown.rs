//! A namespace deleted with its Agents in it: its pods go before its Agents, and the operator
//! leaves the Agents to go with their namespace instead of trying to replace their pods.

use std::sync::Arc;

use agent_supervisor::controller::metrics::{Metrics, ReasonLabel};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;

use crate::support::eventually;

const AGENTS: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_of_a_namespace_being_deleted_are_left_to_go_with_it() {
    let metrics = Arc::new(Metrics::default());
    let (ns, _operator) = crate::setup_with(|config| config.metrics = metrics.clone()).await;
    for i in 0..AGENTS {
        ns.create_agent(&format!("a-{i}"), json!({})).await;
    }
    let pods: Api<Pod> = ns.api();
    eventually(
        std::time::Duration::from_secs(60),
        "every Agent's pod",
        || async {
            let made = pods.list(&ListParams::default()).await.ok()?.items.len();
            (made == AGENTS).then_some(())
        },
    )
    .await;

    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    namespaces
        .delete(&ns.name, &DeleteParams::background())
        .await
        .expect("namespace deleted");
    eventually(
        std::time::Duration::from_secs(120),
        "the namespace gone",
        || async {
            match namespaces.get_opt(&ns.name).await {
                Ok(None) => Some(()),
                _ => None,
            }
        },
    )
    .await;

    // Each Agent saw its pod go while its namespace was being deleted: refused, its replacement
    // is not an error to retry (before, each Agent failed to create it twice, and sent a refused
    // Event each time).
    let failed = metrics
        .reconcile_errors
        .get_or_create(&ReasonLabel {
            reason: "CreateFailed".into(),
        })
        .get();
    assert_eq!(failed, 0, "pod creates failed in a namespace being deleted");
}
