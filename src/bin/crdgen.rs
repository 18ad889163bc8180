//! Prints the CRDs generated from the Rust types, or writes them into directories.
//!
//!   crdgen             print every CRD to stdout, as one YAML stream
//!   crdgen DIR...      write `<crd name>.yaml` into each DIR
//!   crdgen --fields F  write the field reference (Markdown) to F

use std::path::Path;

fn main() -> anyhow::Result<()> {
    let files = agent_supervisor::api::crd_files();
    let mut dirs: Vec<String> = std::env::args().skip(1).collect();
    if let Some(at) = dirs.iter().position(|a| a == "--fields") {
        let file = dirs
            .get(at + 1)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("--fields needs a file"))?;
        std::fs::write(&file, agent_supervisor::api::field_reference())?;
        dirs.drain(at..=at + 1);
        if dirs.is_empty() {
            return Ok(());
        }
    }
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
