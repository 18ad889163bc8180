//! `docs/fields.md`: every field of every kind, its type, default and meaning, generated from the
//! CRDs (and so from the Rust types and their doc comments, the text `kubectl explain` shows).
//! `make crds` writes it; a test fails when it drifts.

use serde_json::Value;

/// The field reference, as Markdown.
pub fn field_reference() -> String {
    let mut out = String::from(
        "<!-- Generated from the Rust types by `make crds`; do not edit. -->\n\
         # Field reference\n\n\
         Every field of the three kinds, generated from the CRDs: the same text `kubectl explain` \
         shows. A default is what the API server fills in when the field is left out. For what \
         the fields do together, see [the reference](reference.md).\n",
    );
    for (_, yaml) in super::crd_files() {
        let crd: Value = serde_yaml::from_str(&yaml).expect("a generated CRD parses");
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let version = &crd["spec"]["versions"][0];
        let short: Vec<&str> = crd["spec"]["names"]["shortNames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!(
            "\n## {kind}\n\n`{}/{}`, namespaced{}.\n",
            group,
            version["name"].as_str().unwrap_or_default(),
            if short.is_empty() {
                String::new()
            } else {
                format!(
                    "; short name{} `{}`",
                    if short.len() > 1 { "s" } else { "" },
                    short.join("`, `")
                )
            }
        ));
        let schema = &version["schema"]["openAPIV3Schema"];
        for part in ["spec", "status"] {
            let mut rows = Vec::new();
            walk(&schema["properties"][part], part, &mut rows);
            out.push_str(&format!(
                "\n### {part}\n\n| field | type | default | meaning |\n|---|---|---|---|\n"
            ));
            for row in rows {
                out.push_str(&format!(
                    "| `{}` | {} | {} | {} |\n",
                    row.path, row.kind, row.default, row.meaning
                ));
            }
        }
    }
    out
}

/// Field paths the reference lists for `kind` (`spec.backoff.initialDelay`, ...).
pub fn field_paths(crd: &Value) -> Vec<String> {
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let mut rows = Vec::new();
    for part in ["spec", "status"] {
        walk(&schema["properties"][part], part, &mut rows);
    }
    rows.into_iter().map(|r| r.path).collect()
}

struct Row {
    path: String,
    kind: String,
    default: String,
    meaning: String,
}

/// Fields whose schema is a Kubernetes type of its own: listed, not descended into.
const EMBEDDED: [&str; 2] = ["spec.template", "spec.volumeClaimTemplates[].spec"];

fn walk(node: &Value, path: &str, rows: &mut Vec<Row>) {
    let props = node["properties"].as_object();
    let items = &node["items"];
    if path.contains("conditions[]") && path != "status.conditions[]" {
        return;
    }
    if path != "spec" && path != "status" {
        rows.push(Row {
            path: path.to_string(),
            kind: kind(node, path),
            default: default(node),
            meaning: meaning(node),
        });
    }
    if EMBEDDED.contains(&path) || path == "status.conditions[]" {
        return;
    }
    if let Some(props) = props {
        for (name, child) in props {
            walk(child, &format!("{path}.{name}"), rows);
        }
    } else if let Some(child_props) = items["properties"].as_object() {
        for (name, child) in child_props {
            walk(child, &format!("{path}[].{name}"), rows);
        }
    }
}

fn kind(node: &Value, path: &str) -> String {
    if path == "status.conditions[]" {
        return "list of Condition".into();
    }
    if path == "spec.template" {
        return "PodTemplateSpec".into();
    }
    if path == "spec.volumeClaimTemplates[].spec" {
        return "PersistentVolumeClaimSpec".into();
    }
    let duration = node["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.contains("duration"))
        });
    let base = match node["type"].as_str() {
        Some("string") if duration => "duration".to_string(),
        Some("string") if node["format"] == "date-time" => "time".to_string(),
        Some("string") => match node["enum"].as_array() {
            Some(values) => {
                let values: Vec<String> = values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|v| format!("`{v}`"))
                    .collect();
                format!("one of {}", values.join(", "))
            }
            None => "string".to_string(),
        },
        Some("array") => {
            let item = &node["items"];
            match item["type"].as_str() {
                Some("object") => "list".to_string(),
                Some("string") if item["format"] == "date-time" => "list of times".to_string(),
                Some(other) => format!("list of {other}s"),
                None => "list".to_string(),
            }
        }
        Some("object") if node["additionalProperties"].is_object() => "map".to_string(),
        Some(other) => other.to_string(),
        None => "object".to_string(),
    };
    let number = |v: &Value| match v.as_f64() {
        Some(f) if f.fract() == 0.0 => Some(format!("{}", f as i64)),
        Some(f) => Some(f.to_string()),
        None => None,
    };
    let bounds = match (number(&node["minimum"]), number(&node["maximum"])) {
        (Some(min), Some(max)) => format!(" ({min}–{max})"),
        // Counts cannot be negative: saying so adds nothing.
        (Some(min), None) if min == "0" => String::new(),
        (Some(min), None) => format!(" (≥ {min})"),
        (None, Some(max)) => format!(" (≤ {max})"),
        (None, None) => String::new(),
    };
    format!("{base}{bounds}")
}

fn default(node: &Value) -> String {
    match &node["default"] {
        Value::Null => String::new(),
        Value::Object(_) | Value::Array(_) => String::new(),
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

fn meaning(node: &Value) -> String {
    let text = node["description"].as_str().unwrap_or_default();
    // Kubernetes' own description of its time type says nothing about the field.
    if text.starts_with("Time is a wrapper") || text.starts_with("MicroTime is") {
        return String::new();
    }
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
