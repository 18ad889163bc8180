//! The one status writer: per Agent, the status last written and the status decided since.
//!
//! Every change the operator decides for an Agent is written within the status interval
//! (`--status-interval`) of its cause, at any load. An Agent not written for that long is written
//! at once (the leading edge: a quiet agent's first crash shows in about a second); changes to one
//! written more recently wait, merged, until its interval is nearly up (the trailing edge, sent
//! early enough for a busy API server to serve it within the interval, and sooner still while it
//! answers slowly, by the longest time it took to answer the operator lately, `round_trips`; a
//! little sooner for some agents than others, by uid, so that agents crashing together are not
//! written in the same instant). A crash loop is so bounded to one write an interval by
//! construction, as the kubelet's status manager bounds a pod's.
//!
//! A decision starts from the pending status, as from a written one. What waits is only what a
//! successor would decide again from the pods if this process died (`may_wait`): failures, each
//! restarted by the pod made for it, at most `MAX_UNRECORDED` of them, and the pods' phases. Each
//! of those pods is kept until the failure it tells of is written (`act::remove_old_pods`), and a
//! successor adopts them, newest first (`gather`). Everything others decide from — a shutdown, a
//! kill, a give-up or an open breaker, a group's member, a heartbeat, an outage — goes at once.
//!
//! Someone else's write to a status that has a change pending (a shutdown, a person's patch)
//! does not drop it: it is moved onto theirs (`rebase`) and decided again, so what happened
//! before their write stays in the record. A graceful stop writes everything pending (`flush`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use prometheus_client::metrics::gauge::Gauge;

use super::round_trips::RoundTrips;
use crate::api::{Agent, AgentStatus};

/// The status interval unless `--status-interval` sets another: the kubelet's status manager
/// writes a pod's status at least this often, and people know that bound. Shorter makes a crash
/// loop cost more writes (one an interval); longer makes the status older.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(10);

/// How many failures a pending status may hold that the written one does not: a successor
/// decides each again from its pod, so each pod is kept until then. With the previous attempt
/// and a batch of old pods awaiting removal (`act::BATCH`) this bounds an Agent's finished pods
/// (at most 8). A crash loop that fails faster than this many times an interval is written when
/// it reaches it, sooner than its interval.
pub const MAX_UNRECORDED: u32 = 4;

/// The part of the interval left for a trailing write to be sent and served, so that it is
/// written within the interval, not only sent: a second at the default. On two cores saturated
/// by 3,000 Agents created at once, status writes were served in 120–390 ms (p50 by the second)
/// and their timers fired up to 0.3 s late; without it one first record in ten was written
/// after its interval (10.67 s at most). Less: writes late under load; more: more writes. An API
/// server slower than that lately adds its longest round trip (`round_trips`), up to half the
/// interval in all: the margin follows the load instead of a guess at the worst.
const SERVED: f64 = 0.1;

/// The part of the interval over which agents' trailing writes are spread, by uid, before what
/// `SERVED` leaves, so that agents crashing together are not written in the same instant.
const SPREAD: f64 = 0.1;

/// An Agent, by namespace and name.
type Key = (String, String);

/// What the writer knows of each Agent it wrote or holds a status for.
pub struct Writer {
    interval: Duration,
    agents: Mutex<HashMap<Key, Entry>>,
    /// How many statuses are pending, in every scope (`agent_supervisor_status_pending`).
    pending: Gauge,
    /// How long the API server took to answer lately.
    round_trips: Arc<RoundTrips>,
}

#[derive(Default)]
struct Entry {
    /// When this process last wrote the Agent's status.
    written_at: Option<Instant>,
    pending: Option<Pending>,
}

/// A status decided and not yet written.
#[derive(Clone, Debug)]
pub struct Pending {
    /// The Agent as the server had it when the status was decided (its resourceVersion is the
    /// write's precondition).
    pub written: Agent,
    pub status: AgentStatus,
    /// When its first unwritten change was decided.
    pub since: Instant,
    /// When it is to be written.
    pub due: Instant,
}

impl Pending {
    /// `agent` with this status.
    pub fn apply(&self, agent: &Agent) -> Agent {
        Agent {
            status: Some(self.status.clone()),
            ..agent.clone()
        }
    }

    /// This status moved onto `agent`, whose status someone else rewrote since it was decided
    /// (see `rebase`); it keeps when its first change was decided, and when it is due.
    pub fn rebased(&self, agent: &Agent) -> Option<Pending> {
        let unset = AgentStatus::default();
        let old = self.written.status.as_ref().unwrap_or(&unset);
        let new = agent.status.as_ref().unwrap_or(&unset);
        Some(Pending {
            written: agent.clone(),
            status: rebase::rebase(old, new, &self.status)?,
            ..self.clone()
        })
    }

    /// Whether it was decided on `agent`'s status as it is (its spec or metadata may differ).
    fn made_on(&self, agent: &Agent) -> bool {
        let unset = AgentStatus::default();
        agent.uid() == self.written.uid()
            && agent.status.as_ref().unwrap_or(&unset)
                == self.written.status.as_ref().unwrap_or(&unset)
    }
}

/// When a decided status is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Now,
    At(Instant),
}

impl Writer {
    /// A writer with `interval`, counting what it holds in `pending`, for an API server whose
    /// round trips it does not know (see `timed_by`).
    pub fn new(interval: Duration, pending: Gauge) -> Self {
        Writer {
            interval,
            agents: Mutex::default(),
            pending,
            round_trips: RoundTrips::new(interval),
        }
    }

    /// This writer, for the API server whose round trips `round_trips` measures.
    pub fn timed_by(self, round_trips: Arc<RoundTrips>) -> Self {
        Writer {
            round_trips,
            ..self
        }
    }

    /// Drops what `entry` holds, if anything.
    fn drop_pending(&self, entry: &mut Entry) -> Option<Pending> {
        let taken = entry.pending.take();
        if taken.is_some() {
            self.pending.dec();
        }
        taken
    }

    /// The status interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.agents.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The status pending for `agent`, moved onto the Agent's status as it is: one decided on a
    /// status someone else has changed since (a shutdown, a person's patch) is rebased onto
    /// theirs (`rebase`), never dropped, so what happened before their write stays in the
    /// record. One for an earlier Agent of the same name is dropped.
    pub fn pending(&self, agent: &Agent) -> Option<Pending> {
        let mut agents = self.lock();
        let entry = agents.get_mut(&key(agent))?;
        let rebased = match &entry.pending {
            Some(p) if p.made_on(agent) => return Some(p.clone()),
            Some(p) if p.written.uid() == agent.uid() => p.rebased(agent),
            _ => None,
        };
        match rebased {
            Some(p) => {
                entry.pending = Some(p.clone());
                Some(p)
            }
            None => {
                self.drop_pending(entry);
                None
            }
        }
    }

    /// When a status decided for `agent` at `now` that may wait (`may_wait`) is written: at once
    /// if the Agent was not written within the interval, else when its interval is up.
    pub fn when(&self, agent: &Agent, now: Instant) -> When {
        let agents = self.lock();
        let written_at = agents.get(&key(agent)).and_then(|e| e.written_at);
        match written_at.map(|at| at + self.interval - self.early(agent, now)) {
            Some(due) if now < due => When::At(due),
            _ => When::Now,
        }
    }

    /// When a new Agent's first status, decided at `now`, is written: when its interval is up,
    /// counted from its creation (its pod is the record until then). The time it waited for its
    /// first decision counts: the promise is from the cause, and the cause is its creation.
    pub fn first_due(&self, agent: &Agent, now: Instant) -> Instant {
        let agents = self.lock();
        let since = agents
            .get(&key(agent))
            .and_then(|e| e.pending.as_ref())
            .filter(|p| p.made_on(agent))
            .map_or(now, |p| p.since);
        since.min(self.created(agent, now)) + self.interval - self.early(agent, now)
    }

    /// When `agent` was created, on this process's clock, at most an interval ago. Its
    /// `creationTimestamp` is whole seconds (truncated) and clocks differ a little: either only
    /// makes the first record a little sooner.
    fn created(&self, agent: &Agent, now: Instant) -> Instant {
        let age = agent
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| jiff::Timestamp::now().duration_since(t.0).try_into().ok())
            .unwrap_or(Duration::ZERO)
            .min(self.interval);
        now.checked_sub(age).unwrap_or(now)
    }

    /// How much sooner than its interval `agent`'s trailing write, decided at `now`, is sent: the
    /// time to serve it (`SERVED` and the API server's longest round trip lately, at most half the
    /// interval) and its share of the spread (by uid, the same for it each time).
    fn early(&self, agent: &Agent, now: Instant) -> Duration {
        let share = crate::supervise::stable_hash(agent.uid().unwrap_or_default().bytes()) % 1024;
        let served = self.interval.mul_f64(SERVED) + self.round_trips.longest(now);
        served.min(self.interval / 2) + self.interval.mul_f64(SPREAD * share as f64 / 1024.0)
    }

    /// Holds `status`, decided at `now` on `written` (the Agent as the server has it), to be
    /// written at `due`; it keeps the time of the first change not written.
    pub fn hold(&self, written: &Agent, status: AgentStatus, now: Instant, due: Instant) {
        let mut agents = self.lock();
        let entry = agents.entry(key(written)).or_default();
        let since = entry
            .pending
            .as_ref()
            .filter(|p| p.made_on(written))
            .map_or(now, |p| p.since);
        if entry.pending.is_none() {
            self.pending.inc();
        }
        entry.pending = Some(Pending {
            written: written.clone(),
            status,
            since,
            due,
        });
    }

    /// `agent`'s status was written at `now` (or nothing was left to write): nothing pending.
    /// Returns when the first change it held was decided, if one was.
    pub fn wrote(&self, agent: &Agent, now: Instant) -> Option<Instant> {
        let mut agents = self.lock();
        let entry = agents.entry(key(agent)).or_default();
        entry.written_at = Some(now);
        self.drop_pending(entry).map(|p| p.since)
    }

    /// Nothing is pending for `agent`: what was decided is what the server has.
    pub fn settled(&self, agent: &Agent) {
        if let Some(entry) = self.lock().get_mut(&key(agent)) {
            self.drop_pending(entry);
        }
    }

    /// The Agent is gone: nothing to remember of it.
    pub fn forget(&self, agent: &Agent) {
        self.forget_named(&agent.namespace().unwrap_or_default(), &agent.name_any());
    }

    /// The Agent `namespace/name` is gone.
    pub fn forget_named(&self, namespace: &str, name: &str) {
        let removed = self
            .lock()
            .remove(&(namespace.to_string(), name.to_string()));
        if removed.is_some_and(|e| e.pending.is_some()) {
            self.pending.dec();
        }
    }

    /// Every status pending, taken (a graceful stop writes them).
    pub fn take_pending(&self) -> Vec<Pending> {
        let mut agents = self.lock();
        agents
            .values_mut()
            .filter_map(|e| self.drop_pending(e))
            .collect()
    }

    /// How many Agents the writer remembers (for tests: it forgets deleted ones).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it remembers none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets what it remembers of Agents not written for an interval (their entries say
    /// nothing the next write needs: `when` is `Now` for them either way), and statuses pending
    /// an interval past their due time: their Agent is gone (a live one is written when due), or
    /// its successor decides again from the pods, as after a lost write.
    pub fn sweep(&self, now: Instant) {
        let interval = self.interval;
        let recent = |at: Instant| now.saturating_duration_since(at) < interval;
        self.lock().retain(|_, e| {
            if e.pending.as_ref().is_some_and(|p| !recent(p.due)) {
                self.drop_pending(e);
            }
            e.pending.is_some() || e.written_at.is_some_and(recent)
        });
    }
}

fn key(agent: &Agent) -> Key {
    (agent.namespace().unwrap_or_default(), agent.name_any())
}

mod rebase;
mod waits;

pub use waits::{first_may_wait, may_wait, watched};
#[cfg(test)]
mod tests;
