//! Objects as the API server sends them, decoded once: `Guarded<K>`, an object of this API as a
//! watch or a read delivers it, decoded or the reason it cannot be; and the metadata of any
//! object without its `managedFields`.
//!
//! kube's `DeserializeGuard` does the same job by buffering each object as a generic tree of
//! values, copying that whole tree and decoding the copy, so that the metadata can still be read
//! when the decode fails; and under a crash storm every status write comes back as a watch event
//! of the whole Agent. Here the object's JSON is kept as it came (one copy of its bytes), decoded
//! into its type, and decoded again for the metadata only when that fails. Nothing reads
//! `managedFields` (the caches drop them), and their field sets are nested maps that cost more to
//! decode than the rest of the metadata: they are skipped. `cargo bench --bench decode`: an
//! Agent's watch event with a ten-entry history, 69 µs as kube decodes it, 18 µs here; a pod's
//! metadata, 12.6 µs with its managedFields, 4.7 µs without.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::core::error_boundary::InvalidObject;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::{Agent, AgentGroup, RestartPolicy};

/// An object of this API as watched or read: decoded, or why it cannot be (with its metadata,
/// so it can be reported on and skipped).
#[derive(Clone, Debug)]
pub struct Guarded<K>(pub Result<K, InvalidObject>);

/// A kind whose objects decode from their JSON without their `managedFields`.
pub trait Decode: Sized {
    fn decode(json: &str) -> serde_json::Result<Self>;
}

/// An object's three parts, its metadata without `managedFields`.
#[derive(Deserialize)]
struct Parts<S, T> {
    #[serde(default, deserialize_with = "metadata")]
    metadata: ObjectMeta,
    spec: S,
    #[serde(default = "none")]
    status: Option<T>,
}

fn none<T>() -> Option<T> {
    None
}

macro_rules! decode_parts {
    ($($kind:ty),*) => {$(
        impl Decode for $kind {
            fn decode(json: &str) -> serde_json::Result<Self> {
                let Parts { metadata, spec, status } = serde_json::from_str(json)?;
                Ok(Self { metadata, spec, status })
            }
        }
    )*};
}
decode_parts!(Agent, RestartPolicy, AgentGroup);

impl<'de, K: Decode> Deserialize<'de> for Guarded<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Only JSON is read here (watches, lists and reads), straight from the API server's
        // text: that text is the buffer.
        let json = Box::<RawValue>::deserialize(deserializer)?;
        match K::decode(json.get()) {
            Ok(object) => Ok(Guarded(Ok(object))),
            Err(error) => {
                #[derive(Deserialize)]
                struct OnlyMetadata {
                    #[serde(default, deserialize_with = "metadata")]
                    metadata: ObjectMeta,
                }
                let OnlyMetadata { metadata } =
                    serde_json::from_str(json.get()).map_err(D::Error::custom)?;
                Ok(Guarded(Err(InvalidObject {
                    error: error.to_string(),
                    metadata,
                })))
            }
        }
    }
}

impl<K: Resource> Resource for Guarded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.as_ref().map_or_else(|e| &e.metadata, K::meta)
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0
            .as_mut()
            .map_or_else(|e| &mut e.metadata, K::meta_mut)
    }
}

/// `ObjectMeta` as sent, but for `managedFields` (skipped, not decoded): for
/// `#[serde(deserialize_with = "metadata")]`.
pub fn metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata {
        annotations: Option<BTreeMap<String, String>>,
        creation_timestamp: Option<Time>,
        deletion_grace_period_seconds: Option<i64>,
        deletion_timestamp: Option<Time>,
        finalizers: Option<Vec<String>>,
        generate_name: Option<String>,
        generation: Option<i64>,
        labels: Option<BTreeMap<String, String>>,
        name: Option<String>,
        namespace: Option<String>,
        owner_references: Option<Vec<OwnerReference>>,
        resource_version: Option<String>,
        self_link: Option<String>,
        uid: Option<String>,
    }
    let m = Option::<Metadata>::deserialize(deserializer)?;
    Ok(m.map(|m| ObjectMeta {
        annotations: m.annotations,
        creation_timestamp: m.creation_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: m.deletion_timestamp,
        finalizers: m.finalizers,
        generate_name: m.generate_name,
        generation: m.generation,
        labels: m.labels,
        managed_fields: None,
        name: m.name,
        namespace: m.namespace,
        owner_references: m.owner_references,
        resource_version: m.resource_version,
        self_link: m.self_link,
        uid: m.uid,
    })
    .unwrap_or_default())
}

/// Decodes `json` with the type's own `Deserialize`, as kube's `DeserializeGuard` does.
#[cfg(test)]
fn typed<K: serde::de::DeserializeOwned>(json: &str) -> Result<K, String> {
    serde_json::from_str::<K>(json).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::AgentStatus;

    fn agent_json() -> serde_json::Value {
        json!({
            "apiVersion": "supervisor.dev/v1alpha1",
            "kind": "Agent",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
                "generation": 3, "labels": {"team": "x"}, "annotations": {"note": "y"},
                "creationTimestamp": "2026-11-26T10:00:00Z",
                "finalizers": ["f"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-2"}],
                "managedFields": [{
                    "manager": "kubectl", "operation": "Apply", "apiVersion": "supervisor.dev/v1alpha1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {".": {}}}},
                }],
            },
            "spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "busybox"}]}}},
            "status": {"phase": "Running", "attempt": 2, "restartCount": 1},
        })
    }

    #[test]
    fn an_object_decodes_as_its_type_but_for_managed_fields() {
        let json = agent_json().to_string();
        let Guarded(Ok(agent)) = serde_json::from_str::<Guarded<Agent>>(&json).unwrap() else {
            panic!("the Agent did not decode");
        };
        let mut expected: Agent = typed(&json).unwrap();
        assert!(expected.metadata.managed_fields.is_some());
        expected.metadata.managed_fields = None;
        assert_eq!(
            serde_json::to_value(&agent).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
        assert_eq!(agent.status.as_ref().map(|s| s.attempt), Some(2));
    }

    #[test]
    fn an_object_without_status_or_metadata_decodes() {
        let mut value = agent_json();
        value.as_object_mut().unwrap().remove("status");
        value.as_object_mut().unwrap().remove("metadata");
        let Guarded(Ok(agent)) =
            serde_json::from_str::<Guarded<Agent>>(&value.to_string()).unwrap()
        else {
            panic!("the Agent did not decode");
        };
        assert_eq!(agent.status, None::<AgentStatus>);
        assert_eq!(agent.metadata, ObjectMeta::default());
    }

    #[test]
    fn an_undecodable_object_keeps_its_metadata_and_the_reason() {
        let mut value = agent_json();
        value["status"]["restartCount"] = json!(5_000_000_000u64);
        let Guarded(Err(invalid)) = serde_json::from_str::<Guarded<Agent>>(&value.to_string())
            .expect("an undecodable object is still delivered")
        else {
            panic!("an Agent with a restartCount over u32 decoded");
        };
        assert_eq!(invalid.metadata.name.as_deref(), Some("a"));
        assert_eq!(invalid.metadata.namespace.as_deref(), Some("ns"));
        assert!(invalid.error.contains("5000000000"), "{}", invalid.error);
        let expected = typed::<Agent>(&value.to_string()).unwrap_err();
        assert_eq!(invalid.error, expected);
    }

    #[test]
    fn an_object_inside_a_watch_event_and_a_list_decodes() {
        // As the API server writes a watch event: its type first (Go's field order). An event
        // with the object first would be buffered by serde before its type is known, and that
        // buffer is no JSON text: such an event is an error, never a wrong object.
        let event = format!(r#"{{"type":"MODIFIED","object":{}}}"#, agent_json());
        let decoded: kube::core::WatchEvent<Guarded<Agent>> = serde_json::from_str(&event).unwrap();
        let reversed = format!(r#"{{"object":{},"type":"MODIFIED"}}"#, agent_json());
        assert!(serde_json::from_str::<kube::core::WatchEvent<Guarded<Agent>>>(&reversed).is_err());
        let kube::core::WatchEvent::Modified(Guarded(Ok(agent))) = decoded else {
            panic!("the watch event did not decode");
        };
        assert_eq!(agent.metadata.resource_version.as_deref(), Some("42"));
        let mut bad = agent_json();
        bad["spec"] = json!("not an object");
        let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [agent_json(), bad]});
        let decoded: kube::core::ObjectList<Guarded<Agent>> =
            serde_json::from_slice(list.to_string().as_bytes()).unwrap();
        assert!(decoded.items[0].0.is_ok());
        let invalid = decoded.items[1].0.as_ref().unwrap_err();
        assert_eq!(invalid.metadata.name.as_deref(), Some("a"));
    }

    #[test]
    fn metadata_with_null_or_absent_fields_decodes() {
        #[derive(Deserialize)]
        struct Holder {
            #[serde(default, deserialize_with = "metadata")]
            metadata: ObjectMeta,
        }
        let h: Holder = serde_json::from_str(r#"{"metadata": null}"#).unwrap();
        assert_eq!(h.metadata, ObjectMeta::default());
        let h: Holder =
            serde_json::from_str(r#"{"metadata": {"name": "p", "labels": null}}"#).unwrap();
        assert_eq!(h.metadata.name.as_deref(), Some("p"));
    }
}
