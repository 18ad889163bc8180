//! The CRD files in the repository are exactly what the Rust types generate.

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
