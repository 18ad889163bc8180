//! Writes that only catch the record up with a first pod give way to the reconciles that
//! create pods. A first pod still pending (it waited `FIRST_RECORD_WAIT` since it was placed, or
//! `FIRST_RECORD_QUEUE_WAIT` unplaced): at 10,000 Agents these came due by the thousand while
//! the last Agents were still being created, and kept those waiting. A first pod that runs: in
//! a burst of creates, the early pods run while the later ones are still being made, and their
//! records, each an Agent status write the API server pays for, slowed every create after them
//! (see the README's performance section). The pod is the record until its write: a decision
//! that finds it unwritten adopts the pod, as after a lost write.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;

use super::storm::StormConfig;
use super::{AgentObject, Context};
use crate::api::{AgentStatus, Phase};
use crate::supervise::{FIRST_RECORD_WAIT, Plan};

/// At most this many such writes run at once, per scope.
pub(super) const TURNS: usize = 8;
/// How long one that found no turn waits before it tries again.
pub(super) const LATER: Duration = Duration::from_secs(3);
/// A pod created less than this long ago means the operator is creating pods.
pub(super) const BUSY: Duration = Duration::from_millis(250);
/// The least a write that gave way to the creates waits before it looks again by itself (see
/// `wait_left`); also how often a paced Event looks whether its storm is over.
pub(super) const SOON: Duration = Duration::from_secs(1);
/// How often the writes waiting for a pause in the creates are looked at (`wake_after_pauses`).
const TICK: Duration = Duration::from_millis(50);

/// Whether `plan` only writes down, for an Agent never written, its first pod pending or
/// running: nothing created, deleted or said.
pub(super) fn catching_up(before: &AgentStatus, plan: &Plan, held: bool) -> bool {
    !held
        && *before == AgentStatus::default()
        && plan.create_pod.is_none()
        && plan.delete_pod.is_none()
        && plan.events.is_empty()
        && plan.status.attempt == 1
        && matches!(plan.status.phase, Some(Phase::Pending | Phase::Running))
}

/// When the operator last created pods, in any scope: they share one API server.
#[derive(Debug, Default)]
pub struct Creates(Mutex<Recent>);

/// The last creates remembered, in order: every pod's, and apart those of the pods made to
/// replace another (restarts).
#[derive(Debug, Default)]
struct Recent {
    all: VecDeque<Instant>,
    restarts: VecDeque<Instant>,
}

impl Creates {
    /// How many of the last creates are remembered: a storm is told by at most this many.
    const KEPT: usize = 64;

    /// A pod was just created; `restart`: to replace another.
    pub(super) fn created(&self, restart: bool) {
        self.created_at(Instant::now(), restart);
    }

    fn created_at(&self, at: Instant, restart: bool) {
        let mut recent = self.lock();
        remember(&mut recent.all, at);
        if restart {
            remember(&mut recent.restarts, at);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a pod was created less than `BUSY` before `now`.
    pub(super) fn busy(&self, now: Instant) -> bool {
        self.lock()
            .all
            .back()
            .is_some_and(|at| now.saturating_duration_since(*at) < BUSY)
    }

    /// Whether at least `creates` pods were created within `within` before `now` (a crash
    /// storm, see `storm`); never when `creates` is 0.
    pub(super) fn storm(&self, now: Instant, creates: usize, within: Duration) -> bool {
        let recent = &self.lock().all;
        let creates = creates.min(Self::KEPT);
        creates > 0
            && recent.len() >= creates
            && recent
                .get(recent.len() - creates)
                .is_some_and(|at| now.saturating_duration_since(*at) < within)
    }

    /// Until when, at the latest, at least `creates` of the restarts remembered were made
    /// within `within` before it: the end of the last moment a crash storm raged; `None` when
    /// it never did, or `creates` is 0.
    pub(super) fn restarts_raged_until(&self, creates: usize, within: Duration) -> Option<Instant> {
        let recent = &self.lock().restarts;
        let creates = creates.min(Self::KEPT);
        if creates == 0 {
            return None;
        }
        // In order: the latest window of `creates` restarts that fits in `within` ends latest.
        (creates - 1..recent.len())
            .rev()
            .find(|&last| {
                recent[last].saturating_duration_since(recent[last + 1 - creates]) < within
            })
            .map(|last| recent[last + 1 - creates] + within)
    }
}

/// Adds `at` to `recent`, forgetting the oldest beyond `Creates::KEPT`.
fn remember(recent: &mut VecDeque<Instant>, at: Instant) {
    if recent.len() == Creates::KEPT {
        recent.pop_front();
    }
    recent.push_back(at);
}

/// Whether the operator is creating pods: it created one less than `BUSY` before `now`, or a
/// crash storm lasts (`StormConfig::lasting`). A storm's creates come in bursts, a crash burst
/// every few seconds: a pause of a moment between them is no pause. (Between the creates of
/// 200 new Agents and their pods' first crashes, the records of the first pods running were
/// woken by the pause, 172 status writes in one second, and the first crashes' pods waited
/// behind them.)
pub(super) fn busy(creates: &Creates, storm: &StormConfig, now: Instant) -> bool {
    creates.busy(now) || storm.lasting(creates, now)
}

/// Whether a catching-up write waits for the creates to pause: while pods are being created
/// (`busy`), for at most `FIRST_RECORD_WAIT` after its own pod was (a pod of unknown age does
/// not wait).
pub(super) fn gives_way(busy: bool, pod_age: Option<Duration>) -> bool {
    busy && pod_age.is_some_and(|age| age < FIRST_RECORD_WAIT)
}

/// How long a write that gave way may still wait for a pause, its pod `pod_age` old: until its
/// pod is `FIRST_RECORD_WAIT` old, and at least `SOON`.
pub(super) fn wait_left(pod_age: Duration) -> Duration {
    FIRST_RECORD_WAIT.saturating_sub(pod_age).max(SOON)
}

/// The Agents whose catching-up write waits for a pause in the creates (or a turn), in the
/// order they began to: woken by `wake_after_pauses` instead of looking again every `SOON`.
/// (Looking again every second made about 1,000 reconciles a second late in a converge of
/// 10,000 Agents, one for each pod running and younger than `FIRST_RECORD_WAIT`; a converge of
/// 3,000 Agents made 5.9 reconciles per Agent in all with it, 5.2 without.)
#[derive(Default)]
pub struct Paused(Mutex<Waiting>);

#[derive(Default)]
struct Waiting {
    order: VecDeque<ObjectRef<AgentObject>>,
    known: HashSet<ObjectRef<AgentObject>>,
}

impl Paused {
    /// `agent`'s write waits (once, however often it is told).
    pub(super) fn wait(&self, agent: ObjectRef<AgentObject>) {
        let mut waiting = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if waiting.known.insert(agent.clone()) {
            waiting.order.push_back(agent);
        }
    }

    /// The `n` that have waited longest, no longer waiting.
    fn take(&self, n: usize) -> Vec<ObjectRef<AgentObject>> {
        let mut waiting = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = n.min(waiting.order.len());
        let taken: Vec<_> = waiting.order.drain(..n).collect();
        for agent in &taken {
            waiting.known.remove(agent);
        }
        taken
    }
}

/// Wakes the writes waiting for a pause in the creates once it comes, as many at a time as
/// there are turns free (a write woken without a turn waits again), until `shutdown`. A write
/// whose pod grows old waits no longer: its reconcile comes due by itself (`wait_left`).
pub(super) async fn wake_after_pauses(
    ctx: Arc<Context>,
    wake: UnboundedSender<ObjectRef<AgentObject>>,
    shutdown: impl Future<Output = ()>,
) {
    let waking = async {
        loop {
            tokio::time::sleep(TICK).await;
            if busy(&ctx.creates, &ctx.storm, Instant::now()) {
                continue;
            }
            for agent in ctx.paused.take(ctx.catch_up.available_permits()) {
                let _ = wake.unbounded_send(agent);
            }
        }
    };
    tokio::select! {
        () = waking => {}
        () = shutdown => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan that writes down, for an Agent never written, its first pod still pending.
    fn recording_pending() -> Plan {
        let mut plan = Plan::default();
        plan.status.attempt = 1;
        plan.status.phase = Some(Phase::Pending);
        plan
    }

    #[test]
    fn only_the_record_of_a_first_pod_gives_way() {
        let never = AgentStatus::default();
        assert!(catching_up(&never, &recording_pending(), false));
        // Still held: nothing is written, so nothing waits for a turn.
        assert!(!catching_up(&never, &recording_pending(), true));
        // Written before: a change of an agent already recorded is not catching up.
        let written = AgentStatus {
            attempt: 1,
            ..AgentStatus::default()
        };
        assert!(!catching_up(&written, &recording_pending(), false));
        // The pod runs: the write that records it catches up too.
        let mut running = recording_pending();
        running.status.phase = Some(Phase::Running);
        assert!(catching_up(&never, &running, false));
        // It failed: the write records a failure, which is news.
        let mut failed = recording_pending();
        failed.status.phase = Some(Phase::BackingOff);
        assert!(!catching_up(&never, &failed, false));
        // Anything else the decision does or says goes first, with its write.
        let mut saying = recording_pending();
        saying.events.push(crate::supervise::Event {
            reason: crate::supervise::EventReason::PodCreated,
            note: String::new(),
            pod: None,
        });
        assert!(!catching_up(&never, &saying, false));
        let mut deleting = recording_pending();
        deleting.delete_pod = Some("a-1".to_string());
        assert!(!catching_up(&never, &deleting, false));
    }

    #[test]
    fn creates_make_the_operator_busy_for_a_moment() {
        let creates = Creates::default();
        let now = Instant::now();
        assert!(!creates.busy(now), "nothing created yet");
        creates.created(false);
        let later = Instant::now();
        assert!(creates.busy(later));
        assert!(!creates.busy(later + BUSY));
    }

    #[test]
    fn a_lasting_crash_storm_keeps_the_operator_busy_between_its_bursts() {
        let storm = StormConfig::default();
        let creates = Creates::default();
        let start = Instant::now();
        // A burst of a storm's creates, then a pause longer than `BUSY`.
        for i in 0..20 {
            creates.created_at(start + Duration::from_millis(10 * i), false);
        }
        let paused = start + Duration::from_millis(190) + BUSY * 2;
        assert!(!creates.busy(paused), "no pod created for a while");
        assert!(busy(&creates, &storm, paused), "the storm lasts");
        let over = start + Duration::from_millis(190) + storm.within * 2;
        assert!(!busy(&creates, &storm, over), "the storm is over");
        // A few creates are no storm: only the last of them makes the operator busy.
        let few = Creates::default();
        for i in 0..3 {
            few.created_at(start + Duration::from_millis(10 * i), false);
        }
        assert!(busy(&few, &storm, start + Duration::from_millis(20)));
        assert!(!busy(
            &few,
            &storm,
            start + Duration::from_millis(20) + BUSY
        ));
        let off = StormConfig {
            creates: 0,
            ..storm
        };
        assert!(!busy(&creates, &off, paused), "storms told by no count");
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_storm_is_so_many_creates_in_a_second() {
        let creates = Creates::default();
        let start = Instant::now();
        assert!(!creates.storm(start, 3, SECOND), "nothing created yet");
        for i in 0..3 {
            creates.created_at(start + Duration::from_millis(100 * i), false);
        }
        let now = start + Duration::from_millis(300);
        assert!(creates.storm(now, 3, SECOND));
        assert!(!creates.storm(now, 4, SECOND), "only three created");
        assert!(!creates.storm(now, 0, SECOND), "0 means never");
        // A second after the first of the three, they are two in the last second.
        assert!(!creates.storm(start + Duration::from_secs(1), 3, SECOND));
        assert!(creates.storm(start + Duration::from_secs(1), 2, SECOND));
        // Only the last KEPT are remembered: a threshold above it means KEPT.
        for _ in 0..Creates::KEPT {
            creates.created_at(now, false);
        }
        assert!(creates.storm(now, Creates::KEPT + 10, SECOND));
    }

    #[test]
    fn a_storm_lasts_through_a_stall_of_a_window_and_ends_after_two() {
        let storm = crate::controller::storm::StormConfig::default();
        let creates = Creates::default();
        let start = Instant::now();
        assert!(!storm.lasting(&creates, start), "nothing created yet");
        // Fifty creates a second for two seconds, then none.
        for i in 0..100 {
            creates.created_at(start + Duration::from_millis(20 * i), false);
        }
        let last = start + Duration::from_millis(20 * 99);
        assert!(storm.lasting(&creates, last));
        let stalled = last + storm.within + Duration::from_millis(100);
        assert!(!creates.storm(stalled, storm.creates, storm.within));
        assert!(storm.lasting(&creates, stalled), "a stall of a window");
        assert!(!storm.lasting(&creates, last + storm.within * 2));
        let off = crate::controller::storm::StormConfig {
            creates: 0,
            ..storm
        };
        assert!(!off.lasting(&creates, last), "0 means never");
    }

    #[test]
    fn a_storm_of_restarts_lasts_through_a_dip_and_ends_when_calm() {
        let storm = crate::controller::storm::StormConfig::default();
        let creates = Creates::default();
        let start = Instant::now();
        assert_eq!(
            creates.restarts_raged_until(storm.creates, storm.within),
            None
        );
        // Fifty restarts a second for two seconds.
        for i in 0..100 {
            creates.created_at(start + Duration::from_millis(20 * i), true);
        }
        let last = start + Duration::from_millis(20 * 99);
        assert!(storm.lasting(&creates, last));
        // Then a dip, as a slow API server makes: three a second for three seconds.
        for i in 1..=9 {
            creates.created_at(last + Duration::from_millis(333 * i), true);
        }
        // The last ten made within a second are the storm's last eight and the dip's first
        // two: it raged until a second after the first of those ten.
        let raged = start + Duration::from_millis(20 * 92) + storm.within;
        assert_eq!(
            creates.restarts_raged_until(storm.creates, storm.within),
            Some(raged)
        );
        let dip = last + Duration::from_secs(3);
        assert!(
            !creates.storm(dip, storm.creates, storm.within * 2),
            "below the pace"
        );
        assert!(storm.lasting(&creates, dip), "a dip does not end a storm");
        let calm = raged + storm.calm;
        assert!(storm.lasting(&creates, calm - Duration::from_millis(1)));
        assert!(!storm.lasting(&creates, calm), "calm: the storm is over");
        // First pods at the pace are a storm while they are made, and no calm follows them.
        let converge = calm + Duration::from_secs(60);
        for i in 0..10 {
            creates.created_at(converge + Duration::from_millis(20 * i), false);
        }
        let made = converge + Duration::from_millis(180);
        assert!(storm.lasting(&creates, made));
        assert!(!storm.lasting(&creates, converge + storm.within * 2));
        assert_eq!(
            creates.restarts_raged_until(storm.creates, storm.within),
            Some(raged),
            "first pods are no restarts"
        );
        let off = crate::controller::storm::StormConfig {
            creates: 0,
            ..storm
        };
        assert!(!off.lasting(&creates, last), "0 means never");
    }

    #[test]
    fn writes_waiting_for_a_pause_are_woken_once_each_longest_waiting_first() {
        let agent = |name: &str| ObjectRef::<AgentObject>::new(name).within("team");
        let paused = Paused::default();
        for name in ["a", "b", "a", "c", "b"] {
            paused.wait(agent(name));
        }
        assert_eq!(paused.take(2), [agent("a"), agent("b")]);
        paused.wait(agent("a"));
        assert_eq!(paused.take(8), [agent("c"), agent("a")]);
        assert!(paused.take(8).is_empty());
    }

    #[test]
    fn a_write_that_gave_way_is_due_by_itself_once_its_pod_is_old() {
        assert_eq!(wait_left(Duration::ZERO), FIRST_RECORD_WAIT);
        assert_eq!(
            wait_left(FIRST_RECORD_WAIT - Duration::from_secs(10)),
            Duration::from_secs(10)
        );
        assert_eq!(wait_left(FIRST_RECORD_WAIT), SOON);
    }

    #[test]
    fn a_catching_up_write_waits_for_the_creates_only_so_long() {
        let young = Some(Duration::from_secs(2));
        assert!(gives_way(true, young));
        assert!(
            !gives_way(false, young),
            "nothing being created: written now"
        );
        assert!(
            !gives_way(true, Some(FIRST_RECORD_WAIT)),
            "its pod is {FIRST_RECORD_WAIT:?} old: written now"
        );
        assert!(!gives_way(true, None), "a pod of unknown age does not wait");
    }
}
