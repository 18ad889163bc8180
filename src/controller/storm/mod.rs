//! Restart records that wait out a crash storm.
//!
//! Under a crash storm every restart used to cost a status write, the most expensive request
//! the operator makes (see the README's performance section), and the API server those writes
//! saturate is the one the next pods wait for. While the operator creates pods at a storm's pace,
//! the record of a failure (its backoff, then the pod that replaced it) waits, in this process,
//! and so do the records of the failures that follow it, until the first has waited
//! `StormConfig::wait`: then one write records them all. A decision made meanwhile starts from
//! the held record, as it would from the written one. Records are written in turns, a few a
//! second for the whole process (`StormConfig::turns`): each at the latest turn free before it
//! is due, never later.
//!
//! What makes the wait safe: only what a successor decides again from the pods is unrecorded,
//! at most `UNRECORDED` failures. Each attempt's pod is kept until its failure is recorded; a
//! successor finds the pod made after the recorded one, decides the recorded attempt's failure
//! from its pod and adopts the pod made for it, as after a lost status write, then does the same
//! for the next attempt, one reconcile each (a restart it decides again meets the pod that was
//! made for it, and adopts it). An agent whose first pod failed before anything was written
//! waits too: a successor adopts the first pod, decides its failure as the first decision did
//! (from the same pod and nothing written), and goes on from there; were the first pod gone
//! (removed by someone else), it adopts the oldest later attempt still there (its restart
//! recorded without the crash's details) rather than make a second first pod beside it
//! (`gather`).
//!
//! Nothing others decide from waits: not an agent with a heartbeat, not a member of a group (its
//! group orders its members by their statuses), not an agent whose policy detects outages (it
//! counts failures from the statuses).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::ResourceExt;

use super::Context;
use super::catch_up::Creates;
use crate::api::{Agent, AgentStatus, Phase, Trigger};
use crate::supervise::{Input, Plan, PolicyResolution};

/// How many failures a record holds back at most: a successor decides each again from its pod,
/// one reconcile each. As many as a history keeps by default (`historyLimit`): each must be in
/// the history (a lower limit holds back fewer), and in a storm the bound is what most records
/// wait for (an agent crashing every 4 s: 36 s).
pub const UNRECORDED: usize = 10;

/// When failure records wait, and for how long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StormConfig {
    /// Pods created within `within`, in any scope, that make a crash storm (0: never).
    pub creates: usize,
    /// How recent those creates are: a second.
    pub within: Duration,
    /// How long a failure's record waits at most.
    pub wait: Duration,
    /// How much less than `wait` an agent's records wait, by agent (from its uid): agents that
    /// began to crash together are not all written in the same second.
    pub spread: Duration,
    /// Records written a second, on average, while many wait: each waits longer than `wait`
    /// when as many records are held as `pace` would write in `wait` (the most held while it
    /// waits: `Held::queued`). An Agent's status write costs the API server 10 to 20 ms of CPU
    /// (an Agent with a ten-entry history, by JSON merge patch or by apply alike; 0.7 ms of it
    /// for each entry), several times a pod's; at 20 to 30 a second the pods created meanwhile
    /// waited two to three times as long as the baseline's.
    pub pace: f64,
    /// How long a record waits at most, however many wait (and at most `UNRECORDED` failures).
    pub max_wait: Duration,
    /// How long a storm lasts after the operator last restarted pods at its pace (`creates`
    /// within `within`): a dip in the restarts is no end of it (see `lasting`).
    pub calm: Duration,
    /// Turns a second for the records that wait (0: none): each is written at its turn, the
    /// latest free one before it is due, or when it is due if none is free. Records due
    /// together went out together (up to 16 in a second of a 200-agent storm whose records
    /// averaged 5 a second), and in the seconds with 12 or more the pods created waited twice
    /// as long as in those with 3 or fewer; taken in turns, records due together are written
    /// in the seconds before, as many as the turns a second at most.
    pub turns: f64,
}

impl Default for StormConfig {
    fn default() -> Self {
        StormConfig {
            creates: 10,
            within: Duration::from_secs(1),
            wait: Duration::from_secs(10),
            spread: Duration::from_secs(5),
            pace: 5.0,
            max_wait: Duration::from_secs(60),
            calm: Duration::from_secs(5),
            turns: 8.0,
        }
    }
}

impl StormConfig {
    /// How long the records of the Agent `uid` wait while `held` records wait in all: `wait`,
    /// or as long as `pace` takes to write them all when that is longer (up to `max_wait`), or
    /// `full` (when its last failure that may wait is due) when that is sooner; less a part of
    /// `spread` (in proportion) that is the same for the agent every time.
    pub fn wait_of(&self, uid: &str, held: usize, full: Option<Duration>) -> Duration {
        let paced = Duration::try_from_secs_f64(held as f64 / self.pace).unwrap_or(Duration::MAX);
        let wait = paced
            .min(self.max_wait)
            .max(self.wait)
            .min(full.unwrap_or(Duration::MAX));
        let share = crate::supervise::stable_hash(uid.bytes()) % 1024;
        let spread = self.spread.min(self.wait).as_secs_f64() / self.wait.as_secs_f64().max(1e-9);
        wait - wait.mul_f64(spread * share as f64 / 1024.0)
    }
}

/// Whether `plan`'s record may wait, given the status as written: it records failures of the
/// written attempt (of the first, when nothing was written) and of each attempt after it (at
/// most `UNRECORDED`), each restarted by the pod created for it but the last, which is waiting
/// for its backoff or restarted too; and nothing else that is news.
pub(super) fn may_wait(written: &AgentStatus, plan: &Plan, watched: bool) -> bool {
    let running = |s: &AgentStatus| matches!(s.phase, Some(Phase::Pending | Phase::Running));
    let n = written.attempt;
    let s = &plan.status;
    // What a successor would decide again from the pods, one attempt at a time: the written
    // attempt still running and its failure not recorded, or nothing written (the first pod is
    // the record, as while a first record waits); then the failure of every attempt since, each
    // from the pod that ended (kept until it is recorded), each restart adopted from the pod
    // made for it (as after a lost write), the last failure's restart due later (decided anew)
    // or made.
    let Some(unrecorded) = unrecorded(written, plan) else {
        return false;
    };
    let first = first_unrecorded(written);
    let last_failed = first + (unrecorded as u32 - 1);
    let failed = unrecorded <= UNRECORDED
        && s.restart_history.len() >= unrecorded
        && s.restart_history
            .iter()
            .take(unrecorded)
            .zip((first..=last_failed).rev())
            .all(|(r, attempt)| r.attempt == attempt && r.trigger == Trigger::Failure);
    let written_running = n > 0
        && running(written)
        && written
            .restart_history
            .first()
            .is_none_or(|r| r.attempt != n);
    let never_written = *written == AgentStatus::default();
    (written_running || never_written)
        && failed
        && !watched
        && s.group.is_none()
        && s.shutdown == written.shutdown
        && plan.record_shutdown.is_none()
        && plan.delete_pod.is_none()
        && plan.hold_status_until.is_none()
}

/// Holds `plan`'s record back, decided on `written` (the Agent as the server has it), when the
/// crash storm goes on and the record may wait (`may_wait`) and has not waited its fill (`held`
/// is what was held before): how long it may still wait (until its turn, or until it is due),
/// or `None` to write it now.
pub(super) fn hold_back(
    ctx: &Context,
    written: &Agent,
    plan: &Plan,
    held: Option<&Record>,
    watched: bool,
) -> Option<Duration> {
    let now = Instant::now();
    let since = held.map_or(now, |h| h.since);
    let waited = now.saturating_duration_since(since);
    let unset = AgentStatus::default();
    let on_server = written.status.as_ref().unwrap_or(&unset);
    let storm = raging(ctx, now);
    let full = unrecorded(on_server, plan).and_then(|k| until_full(plan, k));
    let queued = ctx.held.queued(held, now, ctx.storm.max_wait);
    let wait = ctx
        .storm
        .wait_of(&written.uid().unwrap_or_default(), queued, full);
    let turn_came = held.and_then(|h| h.turn).is_some_and(|(_, at)| at <= now);
    if !storm || waited >= wait || turn_came || !may_wait(on_server, plan, watched) {
        return None;
    }
    let due = since + wait;
    let at = ctx.held.hold_for_turn(
        written,
        plan.status.clone(),
        since,
        queued,
        Turn {
            now,
            due,
            per_second: ctx.storm.turns,
        },
    );
    Some(
        at.saturating_duration_since(now)
            .max(Duration::from_millis(1)),
    )
}

/// How long after the first of `k` unrecorded failures the last that may wait (`UNRECORDED`)
/// is due, at the pace of those so far (their times, to the second, in `plan`'s history; at
/// least a second apart). Agents that began to crash together reach it together: a record
/// written only then was written in the same second as all of theirs (the storm's per-second
/// audit log: 19 to 48 status writes a second for four seconds, p50 28 to 49 ms), while one
/// that waits no longer than this is written at its own time, spread by agent.
fn until_full(plan: &Plan, k: usize) -> Option<Duration> {
    let history = &plan.status.restart_history;
    let failed = |i: usize| history.get(i)?.failed_at.as_ref().map(|t| t.0);
    let intervals = u32::try_from(k.checked_sub(1).filter(|n| *n > 0)?).ok()?;
    let span = failed(0)?.duration_since(failed(k - 1)?);
    let interval = Duration::try_from(span).ok()? / intervals;
    Some(interval.max(Duration::from_secs(1)) * (UNRECORDED as u32 - 1))
}

/// The first attempt whose failure `written` cannot record yet: the written attempt, or the
/// first when nothing was written.
fn first_unrecorded(written: &AgentStatus) -> u32 {
    written.attempt.max(1)
}

/// How many failures `plan` records that `written` does not, counted from the written attempt
/// (from the first, when nothing was written).
fn unrecorded(written: &AgentStatus, plan: &Plan) -> Option<usize> {
    let running = matches!(plan.status.phase, Some(Phase::Pending | Phase::Running));
    let last_failed = match plan.status.phase {
        Some(Phase::BackingOff) => plan.status.attempt,
        _ if running => plan.status.attempt.saturating_sub(1),
        _ => return None,
    };
    last_failed
        .checked_sub(first_unrecorded(written))
        .map(|k| k as usize + 1)
}

/// Whether a crash storm lasts as of `now` (`StormConfig::lasting`): what waits for a storm to
/// pass (records, old pods, Events) waits for the same end.
pub(super) fn raging(ctx: &Context, now: Instant) -> bool {
    ctx.storm.lasting(&ctx.creates, now)
}

impl StormConfig {
    /// Whether a crash storm may still be going on as of `now`: the operator created pods at a
    /// storm's pace (`creates` within `within`) within two of its windows, or restarts at that
    /// pace less than `calm` ago.
    ///
    /// A stall of the creates for a window does not end a storm: in a 10,000-agent run's storm
    /// the creates stopped for a second, the Events waiting for its end all went then (161 in
    /// two seconds), and the pods created in the three seconds after them waited 120 to 174 ms
    /// (p50) against 8 ms in the baseline's storm. Nor does a dip of the restarts, which a slow
    /// API server makes: what waits for a storm's end goes then (held records, old pods,
    /// Events), onto the API server while it is slow, and the next pods wait behind it. (On a
    /// loaded machine, a 1,000-agent run's storm that ended when its restarts fell below the
    /// pace for a second saw 152 Events, 112 status writes and 140 prunes go within a few
    /// seconds; for twelve seconds the operator made 1 to 11 restarts a second, Failed → next
    /// pod p50 up to 2.2 s against 46 ms in the baseline's storm.) The calm is for restarts
    /// only: a burst of first pods (a converge) ends with its creates, and the records it held
    /// back go before its pods have all started.
    pub(crate) fn lasting(&self, creates: &Creates, now: Instant) -> bool {
        creates.storm(now, self.creates, self.within * 2)
            || creates
                .restarts_raged_until(self.creates, self.within)
                .is_some_and(|end| now < end + self.calm)
    }
}

/// Whether others decide from this agent's status, or a successor could not rebuild its failure
/// exactly from its pods: a heartbeat (a lost heartbeat is told by the Lease, not the pod), a
/// policy that detects outages, or one that is missing.
pub(super) fn watched(input: &Input) -> bool {
    let outages = match &input.policy {
        PolicyResolution::Named(_, spec) | PolicyResolution::NamespaceDefault(spec) => {
            spec.outage.is_some()
        }
        PolicyResolution::BuiltIn => false,
        PolicyResolution::Missing(_) => true,
    };
    outages || input.agent.heartbeat.is_some()
}

/// The records held back, by Agent.
#[derive(Default)]
pub struct Held(Mutex<Records>);

struct Records {
    by_agent: HashMap<Key, Record>,
    /// Records held since the last sweep.
    since_sweep: usize,
    /// The turns taken (`StormConfig::turns`), by number, and whose: turn `n` comes `n` turns
    /// after `origin`.
    turns: BTreeMap<u64, Key>,
    origin: Instant,
}

impl Default for Records {
    fn default() -> Self {
        Records {
            by_agent: HashMap::new(),
            since_sweep: 0,
            turns: BTreeMap::new(),
            origin: Instant::now(),
        }
    }
}

/// An Agent, by namespace and name.
type Key = (String, String);

/// When a record that waits is due, and how many turns a second there are.
pub(super) struct Turn {
    pub now: Instant,
    pub due: Instant,
    pub per_second: f64,
}

impl Records {
    /// Counts one more record held; after as many as are kept, forgets those held longer than
    /// `Held::KEPT`: their Agents were deleted without a reconcile seeing it (an Agent has no
    /// finalizer, and a deleted one is never reconciled again), and nothing asks for them.
    fn sweep(&mut self, now: Instant) {
        self.since_sweep += 1;
        if self.since_sweep > self.by_agent.len().max(1024) {
            self.since_sweep = 0;
            self.by_agent
                .retain(|_, r| now.saturating_duration_since(r.since) < Held::KEPT);
            let by_agent = &self.by_agent;
            self.turns.retain(|n, key| {
                by_agent
                    .get(key)
                    .is_some_and(|r| r.turn.is_some_and(|(m, _)| m == *n))
            });
        }
    }

    /// Forgets `key`'s record and gives back its turn.
    fn forget(&mut self, key: &Key) {
        if let Some((n, _)) = self.by_agent.remove(key).and_then(|r| r.turn) {
            self.turns.remove(&n);
        }
    }

    /// Takes the latest turn free from `turn.now` to `turn.due` for `key`, giving back the one
    /// it had: its number and when it comes, or `None` when every one is taken (or there are
    /// none).
    fn take_turn(&mut self, key: &Key, turn: &Turn) -> Option<(u64, Instant)> {
        if let Some((n, _)) = self.by_agent.get_mut(key).and_then(|r| r.turn.take()) {
            self.turns.remove(&n);
        }
        if !(turn.per_second > 0.0 && turn.per_second.is_finite()) {
            return None;
        }
        let number =
            |at: Instant| at.saturating_duration_since(self.origin).as_secs_f64() * turn.per_second;
        let (first, last) = (number(turn.now).ceil(), number(turn.due).floor());
        if first > last {
            return None;
        }
        let (first, mut free) = (first as u64, last as u64);
        for taken in self.turns.range(first..=free).rev().map(|(n, _)| *n) {
            if taken < free {
                break;
            }
            free = free.checked_sub(1).filter(|n| *n >= first)?;
        }
        self.turns.insert(free, key.clone());
        let at = self.origin + Duration::from_secs_f64(free as f64 / turn.per_second);
        Some((free, at))
    }
}

/// One Agent's record held back.
#[derive(Clone, Debug)]
pub struct Record {
    /// The Agent's uid and the status it had when the record was decided.
    uid: String,
    written: AgentStatus,
    pub status: AgentStatus,
    /// When it began to wait.
    pub since: Instant,
    /// How many records it waits behind: the most that waited while it did (`Held::queued`).
    queued: usize,
    /// Its turn to be written, by number and when it comes (`StormConfig::turns`).
    turn: Option<(u64, Instant)>,
}

impl Record {
    /// `agent` with this record as its status.
    pub fn apply(&self, agent: &Agent) -> Agent {
        Agent {
            status: Some(self.status.clone()),
            ..agent.clone()
        }
    }

    /// Whether it was decided on `agent`'s status as it is (its spec or metadata may differ).
    fn made_on(&self, agent: &Agent) -> bool {
        let unset = AgentStatus::default();
        agent.uid().as_deref() == Some(self.uid.as_str())
            && *agent.status.as_ref().unwrap_or(&unset) == self.written
    }
}

impl Held {
    /// Records held longer than this are forgotten, if still there: no wait is as long (a live
    /// Agent's record is written at its next reconcile, due within `StormConfig::max_wait`),
    /// and one forgotten all the same is decided again from the pods, as after a lost write.
    const KEPT: Duration = Duration::from_secs(600);

    /// The record held for `agent`, if it was decided on the Agent's status as it is (a change
    /// of its spec or annotations leaves it held). One decided on a status changed since, by
    /// someone else, is dropped: the decision adopts the pod, as after a lost write.
    pub fn get(&self, agent: &Agent) -> Option<Record> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let key = key(agent);
        let record = held.by_agent.get(&key)?;
        if record.made_on(agent) {
            return Some(record.clone());
        }
        held.forget(&key);
        None
    }

    /// Holds `status` as `agent`'s record, decided on `agent` (the Agent as written), waiting
    /// since `since` behind `queued` records, without a turn (the tests' way in).
    #[cfg(test)]
    pub fn hold(&self, agent: &Agent, status: AgentStatus, since: Instant, queued: usize) {
        let now = Instant::now();
        let none = Turn {
            now,
            due: now,
            per_second: 0.0,
        };
        self.hold_for_turn(agent, status, since, queued, none);
    }

    /// Holds `status` as `agent`'s record, decided on `agent` (the Agent as written), waiting
    /// since `since` behind `queued` records, and takes its turn to be written
    /// (`StormConfig::turns`): when it is to be written, at its turn or when it is due.
    pub(super) fn hold_for_turn(
        &self,
        agent: &Agent,
        status: AgentStatus,
        since: Instant,
        queued: usize,
        turn: Turn,
    ) -> Instant {
        let key = key(agent);
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.sweep(Instant::now());
        let taken = held.take_turn(&key, &turn);
        let record = Record {
            uid: agent.uid().unwrap_or_default(),
            written: agent.status.clone().unwrap_or_default(),
            status,
            since,
            queued,
            turn: taken,
        };
        held.by_agent.insert(key, record);
        taken.map_or(turn.due, |(_, at)| at)
    }

    /// How many records were held within `within` before `now`: one held longer is written at
    /// its agent's next reconcile, or its agent is gone (deleted without a reconcile seeing it,
    /// its record is never asked for again, and forgotten after `KEPT`).
    pub fn count(&self, now: Instant, within: Duration) -> usize {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.by_agent
            .values()
            .filter(|r| now.saturating_duration_since(r.since) < within)
            .count()
    }

    /// How many records a record waits behind: the most that waited (`count`) since `held`
    /// began to wait, or that wait now for a record that begins to. Records that begin to
    /// wait after it make it wait longer; those written before it do not bring it forward.
    /// (Counted anew at each reconcile, the wait of every record shrank as others were
    /// written, and those left were written together: the first records of 200 agents that
    /// began to crash at once came 25 and 30 a second, 32 s into the storm-only bench-scale's
    /// storm, and the pods created in that second waited 42 ms, p50, against 5 ms in the
    /// baseline's. Counted once, when it began to wait, the records of the agents that
    /// crashed first in such a storm waited behind few, and their status writes a restart
    /// rose from 0.11 to 0.14.)
    pub fn queued(&self, held: Option<&Record>, now: Instant, within: Duration) -> usize {
        let now_waiting = self.count(now, within);
        held.map_or(now_waiting, |h| h.queued.max(now_waiting))
    }

    /// `agent`'s record was written, or the Agent is gone.
    pub fn release(&self, agent: &Agent) {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.forget(&key(agent));
    }
}

fn key(agent: &Agent) -> Key {
    (agent.namespace().unwrap_or_default(), agent.name_any())
}

#[cfg(test)]
mod tests;
