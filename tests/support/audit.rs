//! The control plane's audit log: where it is, what it logged since when, caught up.

use std::path::{Path, PathBuf};

use kube::api::PostParams;

use super::cluster::kubeconfig;
use super::kubelet;
use super::namespace::TestNamespace;
use super::wait::eventually;

/// The local control plane's audit log (the tests' cluster audits every request).
pub fn audit_log() -> PathBuf {
    kubeconfig()
        .parent()
        .expect("kubeconfig has a directory")
        .join("logs/audit.log")
}

/// A place in the audit log: the file (by inode, which a rotation keeps) and an offset in it.
#[derive(Clone, Copy, Debug)]
pub struct AuditPosition {
    inode: u64,
    offset: u64,
}

/// The end of the audit log now: what is logged later is read with [`audit_log_since`].
pub fn audit_log_position() -> AuditPosition {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(audit_log())
        .map(|m| AuditPosition {
            inode: m.ino(),
            offset: m.len(),
        })
        .unwrap_or(AuditPosition {
            inode: 0,
            offset: 0,
        })
}

/// The audit log's text from `position` on. The API server rotates the log when it is large
/// (keeping the old file, renamed, beside it): then the rest of the old file comes first.
pub fn audit_log_since(position: AuditPosition) -> String {
    use std::os::unix::fs::MetadataExt;
    let log = audit_log();
    let current = std::fs::metadata(&log).map(|m| m.ino()).unwrap_or(0);
    if current == position.inode {
        return read_from(&log, position.offset);
    }
    let rotated = std::fs::read_dir(log.parent().expect("the log has a directory"))
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.metadata().is_ok_and(|m| m.ino() == position.inode));
    let mut text = rotated
        .map(|e| read_from(&e.path(), position.offset))
        .unwrap_or_default();
    text.push_str(&read_from(&log, 0));
    text
}

/// Waits until the audit log holds every request completed before this call: a ConfigMap this
/// creates in `ns` shows up in it. (The API server writes audit events as requests complete, so
/// a log read right after a request may not show it yet.)
pub async fn audit_log_caught_up(ns: &TestNamespace) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let position = audit_log_position();
    let name = format!("audit-mark-{:08x}", rand::random::<u32>());
    let map: ConfigMap =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name } }))
            .expect("a valid ConfigMap");
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &map)
        .await
        .expect("create the audit mark");
    eventually(
        kubelet::REACT,
        &format!("the audit log {} to show {name}", audit_log().display()),
        || {
            let text = audit_log_since(position);
            let found = text.lines().any(|line| {
                line.contains(&name)
                    && serde_json::from_str::<serde_json::Value>(line).is_ok_and(|e| {
                        e["verb"] == "create" && e["objectRef"]["name"] == name.as_str()
                    })
            });
            async move { found.then_some(()) }
        },
    )
    .await;
}

/// The text of `path` from byte `offset` on (all of it if the file is now shorter).
fn read_from(path: &Path, offset: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if len >= offset { offset } else { 0 };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_ok() {
        let _ = file.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
