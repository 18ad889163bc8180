//! When the Lease watch first showed each heartbeat Lease's reports (progress, checkpoint, spend,
//! and who holds it) as they are and the status does not record yet: where the status lag of
//! their record is counted from, as `finished` keeps it for pods' ends.
//!
//! Per Lease, a fingerprint of what it reports and, until a write records it (or a decision
//! finds the status holds it already), when it first changed and when it last did. Forgotten
//! with the Lease.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;

use super::watch::Change;

use crate::api::{CHECKPOINT_ANNOTATION, PROGRESS_ANNOTATION, SPEND_ANNOTATION};

/// A namespace and a Lease's name (its Agent's).
type Key = (String, String);

struct Entry {
    /// What the Lease reports, hashed.
    content: u64,
    /// When its first change not yet recorded was seen, and its last.
    unrecorded: Option<(Instant, Instant)>,
}

#[derive(Default)]
pub struct Reports(Mutex<HashMap<Key, Entry>>);

impl Reports {
    /// A Lease was added or changed: what it reports is news if it differs from what it
    /// reported before.
    pub fn saw(&self, lease: &Lease) {
        self.saw_at(lease, Instant::now());
    }

    fn saw_at(&self, lease: &Lease, now: Instant) {
        let content = fingerprint(lease);
        let mut index = self.lock();
        match index.get_mut(&key(lease)) {
            Some(e) if e.content == content.unwrap_or_default() => {}
            Some(e) => {
                e.content = content.unwrap_or_default();
                e.unrecorded = Some((e.unrecorded.map_or(now, |(first, _)| first), now));
            }
            // A Lease that reports nothing and is held by no one: nothing to time.
            None => {
                if let Some(content) = content {
                    let unrecorded = Some((now, now));
                    index.insert(
                        key(lease),
                        Entry {
                            content,
                            unrecorded,
                        },
                    );
                }
            }
        }
    }

    /// A Lease was deleted.
    pub fn gone(&self, lease: &Lease) {
        self.lock().remove(&key(lease));
    }

    /// What a Lease watch does with each change: notes it here, then hands it to `next`.
    pub fn noting(
        self: Arc<Self>,
        mut next: impl FnMut(Change<Lease>) + Send + 'static,
    ) -> impl FnMut(Change<Lease>) + Send + 'static {
        move |change| {
            match &change {
                Change::Applied(lease) => self.saw(lease),
                Change::Deleted(lease) => self.gone(lease),
            }
            next(change)
        }
    }

    /// When the watch first showed a report of the Lease `namespace/name` that no write has
    /// recorded yet, if one did.
    pub fn first_unrecorded(&self, namespace: &str, name: &str) -> Option<Instant> {
        let index = self.lock();
        let entry = index.get(&(namespace.to_string(), name.to_string()))?;
        entry.unrecorded.map(|(first, _)| first)
    }

    /// A status decided at `decided` on the Lease `namespace/name` as the cache had it is
    /// written (or found written already): what the watch showed before is recorded. A change
    /// seen since is not: it counts from when it was seen.
    pub fn recorded(&self, namespace: &str, name: &str, decided: Instant) {
        let mut index = self.lock();
        if let Some(e) = index.get_mut(&(namespace.to_string(), name.to_string())) {
            e.unrecorded = match e.unrecorded {
                Some((_, last)) if last > decided => Some((last, last)),
                _ => None,
            };
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn key(lease: &Lease) -> Key {
    (lease.namespace().unwrap_or_default(), lease.name_any())
}

/// What `lease` reports, and who holds it (a report is read as its holder's), hashed; `None`
/// while it reports nothing and no one holds it.
fn fingerprint(lease: &Lease) -> Option<u64> {
    let annotations = lease.annotations();
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.as_ref());
    let fields = [
        annotations.get(PROGRESS_ANNOTATION),
        annotations.get(CHECKPOINT_ANNOTATION),
        annotations.get(SPEND_ANNOTATION),
        holder,
    ];
    if fields.iter().all(Option::is_none) {
        return None;
    }
    // Each field with a marker of whether it is set and its length, so no two differ by where
    // one ends and the next begins.
    let bytes = fields.into_iter().flat_map(|f| {
        let value = f.map_or(&[][..], |v| v.as_bytes());
        let head = f.map_or(0u64, |v| v.len() as u64 + 1).to_le_bytes();
        head.into_iter().chain(value.iter().copied())
    });
    Some(crate::supervise::stable_hash(bytes))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn lease(progress: Option<&str>, holder: Option<&str>) -> Lease {
        let mut annotations = serde_json::json!({ "renewed": "any" });
        if let Some(p) = progress {
            annotations[PROGRESS_ANNOTATION] = p.into();
        }
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "a", "namespace": "ns", "annotations": annotations },
            "spec": { "holderIdentity": holder },
        }))
        .unwrap()
    }

    #[test]
    fn a_report_counts_from_when_the_watch_first_showed_it_until_it_is_recorded() {
        let reports = Reports::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let first = || reports.first_unrecorded("ns", "a");
        // Nothing reported: nothing to time, nothing kept.
        reports.saw_at(&lease(None, None), at(0));
        assert_eq!(first(), None);
        assert!(reports.lock().is_empty());
        reports.saw_at(&lease(Some("1"), Some("a-1")), at(1));
        assert_eq!(first(), Some(at(1)));
        // A renewal that reports the same is no news; a new report before the write keeps the
        // first one's time.
        reports.saw_at(&lease(Some("1"), Some("a-1")), at(2));
        reports.saw_at(&lease(Some("2"), Some("a-1")), at(3));
        assert_eq!(first(), Some(at(1)));
        // Decided before the last change: that change counts from when it was seen.
        reports.recorded("ns", "a", at(2));
        assert_eq!(first(), Some(at(3)));
        reports.recorded("ns", "a", at(3));
        assert_eq!(first(), None);
        // Recorded, the same report seen again is no news; a new holder is.
        reports.saw_at(&lease(Some("2"), Some("a-1")), at(4));
        assert_eq!(first(), None);
        reports.saw_at(&lease(Some("2"), Some("a-2")), at(5));
        assert_eq!(first(), Some(at(5)));
        assert_eq!(reports.first_unrecorded("other", "a"), None);
        // The Lease gone, nothing is kept of it.
        reports.gone(&lease(None, None));
        assert!(reports.lock().is_empty());
    }
}
