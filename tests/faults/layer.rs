//! The fault layer itself, against the real API server: the k-th write is carried out, and
//! neither its answer nor any later request ever comes back.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

use crate::support::TestNamespace;
use crate::support::faults::Faults;

fn map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap()
}

#[tokio::test]
async fn the_kth_write_is_done_and_nothing_completes_after_it() {
    let ns = TestNamespace::new().await;
    let faults = Faults::crash_after(2);
    let maps: Api<ConfigMap> = Api::namespaced(faults.client().await, &ns.name);
    maps.create(&PostParams::default(), &map("one"))
        .await
        .expect("the first write completes");
    maps.get("one")
        .await
        .expect("reads complete before the crash");
    let second = tokio::spawn({
        let maps = maps.clone();
        async move { maps.create(&PostParams::default(), &map("two")).await }
    });
    tokio::time::timeout(Duration::from_secs(30), faults.crashed())
        .await
        .expect("the crash is signalled");
    let admin: Api<ConfigMap> = ns.api();
    admin
        .get("two")
        .await
        .expect("the k-th write reached the server");
    let later = tokio::time::timeout(Duration::from_secs(2), maps.get("one")).await;
    assert!(later.is_err(), "a read after the crash never completes");
    assert!(
        !second.is_finished(),
        "the k-th write's answer never arrives"
    );
    second.abort();
    let log: Vec<String> = faults.mutations().iter().map(|m| m.to_string()).collect();
    assert_eq!(
        log,
        [
            "#1 POST /api/v1/namespaces/NS/configmaps [name=one]",
            "#2 POST /api/v1/namespaces/NS/configmaps [name=two]",
        ]
    );
}
