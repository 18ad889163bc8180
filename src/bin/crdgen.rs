//! Prints the CRDs generated from the Rust types, or writes them into directories.
//!
//!   crdgen             print every CRD to stdout, as one YAML stream
//!   crdgen DIR...      write `<crd name>.yaml` into each DIR

use std::path::Path;

fn main() -> anyhow::Result<()> {
    let files = agent_supervisor::api::crd_files();
    let dirs: Vec<String> = std::env::args().skip(1).collect();
    if dirs.is_empty() {
        for (_, yaml) in &files {
            println!("---\n{yaml}");
        }
        return Ok(());
    }
    for dir in dirs {
        let dir = Path::new(&dir);
        std::fs::create_dir_all(dir)?;
        for (name, yaml) in &files {
            std::fs::write(dir.join(name), yaml)?;
        }
    }
    Ok(())
}
