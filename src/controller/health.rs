//! Readiness as the controllers know it: the API server answered, and every watch has listed
//! everything and is not failing. Written by the controllers; served by the process's probes.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the probes report. Ready: the API server answered, and every watch of the controllers
/// has had its first full list and is not failing.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
    watches: Mutex<BTreeMap<String, WatchHealth>>,
}

/// One watch, as readiness sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchHealth {
    /// Its first list completed.
    pub synced: bool,
    /// Errors since it last worked.
    pub failures: u32,
}

/// A watch is failing once this many of its attempts in a row have failed: one lost
/// connection, retried at once, is not worth taking the replica out of service.
const FAILING_AFTER: u32 = 2;

impl Health {
    /// Ready: the API server answered and this replica is leading or standing by.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// A watch that must sync before the replica is ready.
    pub fn watch_started(&self, name: &str) {
        self.watches()
            .insert(name.to_string(), WatchHealth::default());
    }

    /// The watch received something: it works (and, after `synced`, has listed everything).
    pub fn watch_ok(&self, name: &str, synced: bool) {
        let mut watches = self.watches();
        let watch = watches.entry(name.to_string()).or_default();
        watch.failures = 0;
        watch.synced |= synced;
    }

    /// The watch failed; it is retried with backoff.
    pub fn watch_failed(&self, name: &str) {
        let mut watches = self.watches();
        let watch = watches.entry(name.to_string()).or_default();
        watch.failures = watch.failures.saturating_add(1);
    }

    /// The watch stopped (its controllers shut down).
    pub fn watch_stopped(&self, name: &str) {
        self.watches().remove(name);
    }

    /// Whether the replica is ready, and if not, why.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.ready.load(Ordering::SeqCst) {
            return Err("not connected".to_string());
        }
        let watches = self.watches();
        let mut problems = watches.iter().filter_map(|(name, w)| {
            if w.failures >= FAILING_AFTER {
                Some(format!(
                    "watch of {name} failing ({} errors in a row)",
                    w.failures
                ))
            } else if !w.synced {
                Some(format!("watch of {name} not synced yet"))
            } else {
                None
            }
        });
        match problems.next() {
            None => Ok(()),
            Some(first) => Err(problems.fold(first, |all, p| format!("{all}; {p}"))),
        }
    }

    fn watches(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, WatchHealth>> {
        self.watches.lock().unwrap_or_else(|e| e.into_inner())
    }
}
