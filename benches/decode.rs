//! What decoding a watch event costs: an Agent as a crash storm sends it (the echo of each status
//! write, a ten-entry history) and a pod's metadata, each as kube would decode it and as the
//! operator does.
//!
//! `cargo bench --bench decode`. The inputs are objects as a local API server sent them
//! (benches/decode/), each wrapped in a watch event as the watch stream carries it.

use std::hint::black_box;

use agent_supervisor::api::Agent;
use agent_supervisor::api::wire::{self, Guarded};
use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{DeserializeGuard, WatchEvent};
use serde::Deserialize;

const AGENT: &str = include_str!("decode/agent.json");
const POD: &str = include_str!("decode/pod.json");

fn event(object: &str) -> String {
    format!(r#"{{"type":"MODIFIED","object":{object}}}"#)
}

/// A pod's metadata, decoded as `ObjectMeta` does (managedFields and all).
#[derive(Deserialize)]
struct WholeMetadata {
    #[allow(dead_code)]
    metadata: ObjectMeta,
}

/// A pod's metadata, decoded as the operator's pod cache does.
#[derive(Deserialize)]
struct SlimMetadata {
    #[serde(deserialize_with = "wire::metadata")]
    #[allow(dead_code)]
    metadata: ObjectMeta,
}

fn agent_event(c: &mut Criterion) {
    let line = event(AGENT);
    // Both decode the same Agent, but for its managedFields.
    let WatchEvent::Modified(Guarded(Ok(ours))) =
        serde_json::from_str::<WatchEvent<Guarded<Agent>>>(&line).unwrap()
    else {
        panic!("the fixture's Agent does not decode");
    };
    let WatchEvent::Modified(DeserializeGuard(Ok(mut theirs))) =
        serde_json::from_str::<WatchEvent<DeserializeGuard<Agent>>>(&line).unwrap()
    else {
        panic!("the fixture's Agent does not decode as kube decodes it");
    };
    assert_eq!(
        ours.status.as_ref().map(|s| s.restart_history.len()),
        Some(10)
    );
    theirs.metadata.managed_fields = None;
    assert_eq!(
        serde_json::to_value(&ours).unwrap(),
        serde_json::to_value(&theirs).unwrap()
    );

    let mut group = c.benchmark_group("agent watch event");
    group.bench_function("kube DeserializeGuard", |b| {
        b.iter(|| serde_json::from_str::<WatchEvent<DeserializeGuard<Agent>>>(black_box(&line)))
    });
    group.bench_function("Guarded", |b| {
        b.iter(|| serde_json::from_str::<WatchEvent<Guarded<Agent>>>(black_box(&line)))
    });
    group.finish();
}

fn pod_metadata(c: &mut Criterion) {
    let slim: SlimMetadata = serde_json::from_str(POD).unwrap();
    let whole: WholeMetadata = serde_json::from_str(POD).unwrap();
    assert!(whole.metadata.managed_fields.is_some());
    assert_eq!(
        slim.metadata,
        ObjectMeta {
            managed_fields: None,
            ..whole.metadata
        }
    );

    let mut group = c.benchmark_group("pod metadata");
    group.bench_function("ObjectMeta", |b| {
        b.iter(|| serde_json::from_str::<WholeMetadata>(black_box(POD)))
    });
    group.bench_function("without managedFields", |b| {
        b.iter(|| serde_json::from_str::<SlimMetadata>(black_box(POD)))
    });
    group.finish();
}

criterion_group!(benches, agent_event, pod_metadata);
criterion_main!(benches);
