//! `PodTemplate`: an Agent's pod template, kept as compact JSON.
//!
//! Every Agent in the operator's cache carries its template, and a `PodTemplateSpec` is mostly
//! empty fields of fixed size: 1.8 KiB inline, 1.4 KiB more for its `PodSpec` and 2.1 KiB for
//! each `Container`, before any of their contents. At ten thousand agents that was the larger
//! part of the operator's memory. As JSON a template is the size of what its author wrote; it is
//! decoded when a pod is made from it, which is rare next to the watch events that keep it.
//!
//! To the API (its schema, its JSON, `kubectl explain`) it is a `PodTemplateSpec`.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A pod template, as the JSON of a `PodTemplateSpec`.
#[derive(Clone, PartialEq, Eq)]
pub struct PodTemplate(Box<str>);

impl PodTemplate {
    /// The template, decoded.
    pub fn get(&self) -> PodTemplateSpec {
        // Only ever made from a `PodTemplateSpec` (`From`, `Deserialize`), whose JSON decodes.
        serde_json::from_str(&self.0).expect("a pod template's own JSON decodes")
    }
}

impl PodTemplate {
    /// Not given: the empty template (an Agent with `sandboxRef` has none).
    pub fn is_unset(&self) -> bool {
        &*self.0 == "{}"
    }
}

impl From<PodTemplateSpec> for PodTemplate {
    fn from(template: PodTemplateSpec) -> Self {
        let json = serde_json::to_string(&template).expect("a pod template encodes as JSON");
        PodTemplate(json.into_boxed_str())
    }
}

impl Default for PodTemplate {
    fn default() -> Self {
        PodTemplateSpec::default().into()
    }
}

impl fmt::Debug for PodTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PodTemplate").field(&&*self.0).finish()
    }
}

impl Serialize for PodTemplate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Through the typed template, so that any serializer (not only JSON) sees its fields.
        self.get().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PodTemplate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        PodTemplateSpec::deserialize(deserializer).map(PodTemplate::from)
    }
}

impl JsonSchema for PodTemplate {
    fn schema_name() -> Cow<'static, str> {
        PodTemplateSpec::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        PodTemplateSpec::schema_id()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        PodTemplateSpec::json_schema(generator)
    }

    fn inline_schema() -> bool {
        PodTemplateSpec::inline_schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written() -> serde_json::Value {
        json!({
            "metadata": {"labels": {"team": "research"}},
            "spec": {
                "containers": [{
                    "name": "agent", "image": "ghcr.io/x/agent:1", "command": ["run", "--fast"],
                    "env": [{"name": "MODEL", "value": "large"}],
                    "resources": {"limits": {"memory": "1Gi"}}
                }],
                "terminationGracePeriodSeconds": 30
            }
        })
    }

    #[test]
    fn a_template_reads_back_as_it_was_written() {
        let typed: PodTemplateSpec = serde_json::from_value(written()).unwrap();
        let kept: PodTemplate = serde_json::from_value(written()).unwrap();
        assert_eq!(kept.get(), typed);
        assert_eq!(serde_json::to_value(&kept).unwrap(), written());
        let yaml = serde_yaml::to_string(&kept).unwrap();
        assert_eq!(serde_yaml::from_str::<PodTemplate>(&yaml).unwrap(), kept);
        assert_eq!(PodTemplate::from(typed), kept);
    }

    #[test]
    fn a_template_that_is_not_one_is_refused() {
        let error = serde_json::from_value::<PodTemplate>(json!({"spec": {"containers": 3}}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("invalid type"), "{error}");
    }

    #[test]
    fn its_schema_is_the_pod_template_specs() {
        let generator = || schemars::generate::SchemaSettings::openapi3().into_generator();
        assert_eq!(
            generator().into_root_schema_for::<PodTemplate>(),
            generator().into_root_schema_for::<PodTemplateSpec>()
        );
    }

    #[test]
    fn it_is_much_smaller_than_the_typed_template() {
        let typed: PodTemplateSpec = serde_json::from_value(written()).unwrap();
        let kept = PodTemplate::from(typed);
        // The typed one: its inline size, plus its PodSpec's and one Container's.
        let typed_size = std::mem::size_of::<PodTemplateSpec>()
            + std::mem::size_of::<k8s_openapi::api::core::v1::PodSpec>()
            + std::mem::size_of::<k8s_openapi::api::core::v1::Container>();
        let kept_size = std::mem::size_of::<PodTemplate>() + kept.0.len();
        assert!(
            kept_size * 10 < typed_size,
            "{kept_size} bytes against {typed_size}"
        );
    }
}
