//! The CRD files in the repository are exactly what the Rust types generate, and document their
//! fields.

use std::path::Path;

#[test]
fn generated_crds_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("crds")];
    let chart = root.join("charts/agent-supervisor/crds");
    if root.join("charts/agent-supervisor").exists() {
        dirs.push(chart);
    }
    for dir in dirs {
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}; run make crds", dir.display()))
            .map(|e| {
                e.expect("readable entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| name.ends_with(".yaml"))
            .collect();
        on_disk.sort();
        let mut expected: Vec<String> = agent_supervisor::api::crd_files()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        expected.sort();
        assert_eq!(
            on_disk,
            expected,
            "{} has other CRD files than the types generate: run make crds",
            dir.display()
        );
        for (name, yaml) in agent_supervisor::api::crd_files() {
            let file = std::fs::read_to_string(dir.join(&name)).expect("readable CRD file");
            assert!(
                file == yaml,
                "{} is stale: run make crds",
                dir.join(name).display()
            );
        }
    }
}

#[test]
fn the_agent_crd_fits_a_client_side_apply() {
    // kubectl apply (client-side) keeps the whole object in an annotation of at most 256 KiB.
    let (_, yaml) = agent_supervisor::api::crd_files()
        .into_iter()
        .find(|(name, _)| name.starts_with("agents."))
        .expect("an Agent CRD");
    let value: serde_json::Value = serde_yaml::from_str(&yaml).expect("CRD parses");
    let json = serde_json::to_string(&value).expect("CRD serializes");
    assert!(
        json.len() < 256 * 1024,
        "the Agent CRD is {} bytes of JSON",
        json.len()
    );
}

/// The paths of the properties under `schema` that have no description (`kubectl explain` shows
/// `<no description>` for them).
fn undocumented(schema: &serde_json::Value, path: &str, found: &mut Vec<String>) {
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            let path = format!("{path}.{name}");
            let described = property["description"]
                .as_str()
                .is_some_and(|d| !d.trim().is_empty());
            if !described {
                found.push(path.clone());
            }
            undocumented(property, &path, found);
        }
    }
    for nested in ["items", "additionalProperties"] {
        if schema[nested].is_object() {
            undocumented(&schema[nested], path, found);
        }
    }
}

#[test]
fn every_field_of_agent_groups_and_restart_policies_is_documented() {
    for (file, kind) in [
        ("agentgroups.supervisor.dev.yaml", "agentgroup"),
        ("restartpolicies.supervisor.dev.yaml", "restartpolicy"),
    ] {
        let (_, yaml) = agent_supervisor::api::crd_files()
            .into_iter()
            .find(|(name, _)| name == file)
            .unwrap_or_else(|| panic!("no {file}"));
        let crd: serde_json::Value = serde_yaml::from_str(&yaml).expect("CRD parses");
        let mut found = Vec::new();
        for version in crd["spec"]["versions"].as_array().expect("versions") {
            undocumented(&version["schema"]["openAPIV3Schema"], kind, &mut found);
        }
        assert!(
            found.is_empty(),
            "kubectl explain shows <no description> for: {found:?}; add doc comments"
        );
    }
}
