//! The restart budget: at most `rate` restarts a second, in bursts of at most `burst`, shared
//! fairly between namespaces. A restart over budget waits in its namespace's queue; a dispatcher
//! hands out tokens round-robin across the namespaces that wait and wakes the agent it granted.
//!
//! Nothing here is the source of truth: a restart that waits is still due in the Agent's status,
//! so it is never dropped (the next decision makes it again), never doubled (pod names are
//! derived from the attempt), and an operator restarted meanwhile finds it there.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use kube::runtime::reflector::ObjectRef;

use super::AgentObject;

/// How long a granted token waits for its agent: a restart no longer needed lets it lapse.
const PERMIT_TTL: Duration = Duration::from_secs(30);

/// The budget's settings (`--restart-rate`, `--restart-burst`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetConfig {
    /// Restarts a second, on average.
    pub rate: f64,
    /// Restarts at once, at most.
    pub burst: u32,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            rate: 20.0,
            burst: 100,
        }
    }
}

/// A token bucket: `burst` tokens at most, refilled at `rate` a second.
#[derive(Clone, Debug)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(config: BudgetConfig, now: Instant) -> Bucket {
        let burst = f64::from(config.burst.max(1));
        Bucket {
            rate: config.rate.max(f64::MIN_POSITIVE),
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// A bucket that has given a token for each restart at `taken`, within the last
    /// `burst / rate` seconds: it is assumed empty at the start of that window (the state of a
    /// bucket before it is not known), then refilled and taken from. So it never holds more than
    /// the bucket it stands in for, and a restarted operator hands out no fresh burst on top of
    /// the restarts its predecessor just made.
    pub fn seeded(config: BudgetConfig, mut taken: Vec<Instant>, now: Instant) -> Bucket {
        let mut bucket = Bucket::new(config, now);
        let window = Duration::from_secs_f64(bucket.burst / bucket.rate);
        let start = now.checked_sub(window).unwrap_or(now);
        bucket.tokens = 0.0;
        bucket.at = start;
        taken.sort();
        for at in taken.into_iter().filter(|t| *t >= start && *t <= now) {
            bucket.refill(at);
            // Restarts beyond the budget (another operator's settings) leave a debt, bounded.
            bucket.tokens = (bucket.tokens - 1.0).max(-bucket.burst);
        }
        bucket.refill(now);
        bucket
    }

    fn refill(&mut self, now: Instant) {
        if now > self.at {
            let gained = now.duration_since(self.at).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + gained).min(self.burst);
            self.at = now;
        }
    }

    /// Takes a token, if there is one at `now`.
    pub fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the next token is there (`now` if it already is).
    pub fn next_token(&self, now: Instant) -> Instant {
        let mut b = self.clone();
        b.refill(now);
        if b.tokens >= 1.0 {
            return now;
        }
        now + Duration::from_secs_f64((1.0 - b.tokens) / b.rate)
    }
}

/// What a restart gets from the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead: a token was taken for it.
    Granted,
    /// Wait: the agent is queued and is woken when a token is its. `first`: it was not waiting
    /// before. `queued`: restarts waiting in all.
    Waiting { first: bool, queued: usize },
}

type Key = ObjectRef<AgentObject>;

/// The budget's state: the bucket, the queues and the granted tokens. Pure: time is passed in.
#[derive(Debug)]
pub struct Queues {
    bucket: Bucket,
    /// Waiting agents, in arrival order, per namespace.
    waiting: BTreeMap<String, VecDeque<Key>>,
    queued: HashSet<Key>,
    /// Tokens taken for agents not yet back for them, and when.
    permits: HashMap<Key, Instant>,
    /// The namespace served last: the next grant goes to the one after it.
    last: Option<String>,
}

impl Queues {
    pub fn new(bucket: Bucket) -> Queues {
        Queues {
            bucket,
            waiting: BTreeMap::new(),
            queued: HashSet::new(),
            permits: HashMap::new(),
            last: None,
        }
    }

    /// A restart of `agent` asks to go ahead at `now`.
    pub fn acquire(&mut self, agent: &Key, now: Instant) -> Admission {
        if self.permits.remove(agent).is_some() {
            return Admission::Granted;
        }
        if self.queued.is_empty() && self.bucket.take(now) {
            return Admission::Granted;
        }
        let first = self.queued.insert(agent.clone());
        if first {
            let namespace = agent.namespace.clone().unwrap_or_default();
            self.waiting
                .entry(namespace)
                .or_default()
                .push_back(agent.clone());
        }
        Admission::Waiting {
            first,
            queued: self.queued.len(),
        }
    }

    /// Grants the next token, if one is there and someone waits: to the head of the queue of the
    /// namespace after the one served last.
    pub fn grant(&mut self, now: Instant) -> Option<Key> {
        self.permits
            .retain(|_, at| now.saturating_duration_since(*at) < PERMIT_TTL);
        if self.queued.is_empty() || self.bucket.next_token(now) > now {
            return None;
        }
        let namespace = {
            let after = self.last.as_deref().unwrap_or("");
            let next = self
                .waiting
                .range::<str, _>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded))
                .next()
                .or_else(|| self.waiting.iter().next());
            next.map(|(ns, _)| ns.clone())?
        };
        let queue = self.waiting.get_mut(&namespace)?;
        let agent = queue.pop_front()?;
        if queue.is_empty() {
            self.waiting.remove(&namespace);
        }
        self.queued.remove(&agent);
        self.bucket.take(now);
        self.permits.insert(agent.clone(), now);
        self.last = Some(namespace);
        Some(agent)
    }

    /// When `grant` may next have something to do: `None` while no one waits.
    pub fn next_grant(&self, now: Instant) -> Option<Instant> {
        (!self.queued.is_empty()).then(|| self.bucket.next_token(now))
    }

    /// Restarts waiting.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }
}

/// The budget one operator shares between all its namespaces.
pub struct Budget {
    pub config: BudgetConfig,
    queues: Mutex<Queues>,
    wake: tokio::sync::Notify,
    /// Where granted agents are sent, per watched scope (a namespace, or `None` for all).
    scopes: Mutex<Vec<(Option<String>, mpsc::UnboundedSender<Key>)>>,
}

impl Budget {
    pub fn new(config: BudgetConfig) -> Arc<Budget> {
        Arc::new(Budget {
            config,
            queues: Mutex::new(Queues::new(Bucket::new(config, Instant::now()))),
            wake: tokio::sync::Notify::new(),
            scopes: Mutex::default(),
        })
    }

    /// Granted agents of `scope` (a namespace, or `None` for all) are sent to `granted`.
    pub fn register(&self, scope: Option<String>, granted: mpsc::UnboundedSender<Key>) {
        let mut scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        scopes.push((scope, granted));
    }

    fn send(&self, agent: Key) {
        let scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        let target = scopes
            .iter()
            .find(|(scope, _)| scope.is_none() || *scope == agent.namespace);
        if let Some((_, granted)) = target {
            let _ = granted.unbounded_send(agent);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts restarts made before this operator started (`ages`: how long ago each was), so
    /// that they use up the budget as they did.
    pub fn seed(&self, ages: Vec<Duration>) {
        let now = Instant::now();
        let taken = ages
            .into_iter()
            .filter_map(|age| now.checked_sub(age))
            .collect();
        let seeded = Bucket::seeded(self.config, taken, now);
        let mut queues = self.lock();
        queues.bucket.refill(now);
        // Several scopes seed, one after the other: each can only take tokens away.
        queues.bucket.tokens = queues.bucket.tokens.min(seeded.tokens);
    }

    /// A restart of `agent` asks to go ahead now.
    pub fn acquire(&self, agent: &Key) -> Admission {
        let admission = self.lock().acquire(agent, Instant::now());
        if matches!(admission, Admission::Waiting { first: true, .. }) {
            self.wake.notify_one();
        }
        admission
    }

    /// Hands out tokens as they come, sending each granted agent to its scope (to be
    /// reconciled), until `shutdown`.
    pub async fn dispatch(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        let run = async {
            loop {
                let (granted, next) = {
                    let mut queues = self.lock();
                    let now = Instant::now();
                    let granted: Vec<Key> = std::iter::from_fn(|| queues.grant(now)).collect();
                    (granted, queues.next_grant(now))
                };
                for agent in granted {
                    self.send(agent);
                }
                match next {
                    Some(at) => {
                        tokio::select! {
                            () = tokio::time::sleep_until(at.into()) => {}
                            () = self.wake.notified() => {}
                        }
                    }
                    None => self.wake.notified().await,
                }
            }
        };
        tokio::select! {
            () = run => {}
            () = shutdown => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(namespace: &str, name: &str) -> Key {
        ObjectRef::new(name).within(namespace)
    }

    fn config(rate: f64, burst: u32) -> BudgetConfig {
        BudgetConfig { rate, burst }
    }

    #[test]
    fn a_burst_goes_at_once_and_the_rest_at_the_rate() {
        let t0 = Instant::now();
        let mut q = Queues::new(Bucket::new(config(5.0, 10), t0));
        let agents: Vec<Key> = (0..30).map(|i| agent("a", &format!("x{i}"))).collect();
        let granted_at_once = agents
            .iter()
            .filter(|a| q.acquire(a, t0) == Admission::Granted)
            .count();
        assert_eq!(granted_at_once, 10);
        assert_eq!(q.queued(), 20);
        // The rest: one every 200 ms, in arrival order.
        let mut grants = Vec::new();
        let mut now = t0;
        while q.queued() > 0 {
            now = q.next_grant(now).expect("someone waits");
            while let Some(a) = q.grant(now) {
                grants.push((a, now));
            }
        }
        assert_eq!(grants.len(), 20);
        assert_eq!(grants[0].0, agents[10]);
        let last = grants.last().unwrap().1.duration_since(t0).as_secs_f64();
        assert!(
            (3.9..=4.1).contains(&last),
            "20 more at 5/s take 4s: {last}"
        );
        // Each granted agent comes back for its token, once.
        for (a, _) in &grants {
            assert_eq!(q.acquire(a, now), Admission::Granted);
        }
        assert!(matches!(
            q.acquire(&grants[0].0, now),
            Admission::Waiting { first: true, .. }
        ));
    }

    #[test]
    fn no_interval_gets_more_than_burst_plus_rate_times_its_length() {
        let t0 = Instant::now();
        let (rate, burst) = (4.0, 6);
        let mut q = Queues::new(Bucket::new(config(rate, burst), t0));
        let mut taken = Vec::new();
        let mut now = t0;
        for step in 0..400u32 {
            // Arrivals every 50 ms, faster than the rate.
            now = t0 + Duration::from_millis(50 * u64::from(step));
            if q.acquire(&agent("a", &format!("x{step}")), now) == Admission::Granted {
                taken.push(now);
            }
            while let Some(_a) = q.grant(now) {
                taken.push(now);
            }
        }
        let _ = now;
        for (i, start) in taken.iter().enumerate() {
            for end in &taken[i..] {
                let within = taken.iter().filter(|t| *t >= start && *t <= end).count();
                let span = end.duration_since(*start).as_secs_f64();
                let allowed = f64::from(burst) + rate * span + 1e-9;
                assert!(within as f64 <= allowed, "{within} in {span}s > {allowed}");
            }
        }
    }

    #[test]
    fn namespaces_take_turns() {
        let t0 = Instant::now();
        let mut q = Queues::new(Bucket::new(config(1.0, 1), t0));
        assert_eq!(q.acquire(&agent("storm", "s0"), t0), Admission::Granted);
        for i in 1..50 {
            q.acquire(&agent("storm", &format!("s{i}")), t0);
        }
        // A lone restart elsewhere waits behind at most one storm restart.
        let lone = agent("quiet", "q");
        assert!(matches!(
            q.acquire(&lone, t0),
            Admission::Waiting {
                first: true,
                queued: 50
            }
        ));
        let mut order = Vec::new();
        let mut now = t0;
        while order.len() < 3 {
            now = q.next_grant(now).unwrap();
            while let Some(a) = q.grant(now) {
                order.push(a);
            }
        }
        assert!(order[..2].contains(&lone), "{order:?}");
    }

    #[test]
    fn a_seeded_bucket_remembers_restarts_just_made() {
        let now = Instant::now() + Duration::from_secs(100);
        let left = |taken: Vec<Instant>| {
            let mut b = Bucket::seeded(config(2.0, 10), taken, now);
            std::iter::from_fn(|| b.take(now).then_some(())).count()
        };
        let ago = |millis: u64| now - Duration::from_millis(millis);
        // Ten restarts in the last second of a 10-token bucket refilled at 2/s: none left.
        assert_eq!(left((0..10).map(|i| ago(100 * i)).collect()), 0);
        // A storm at the rate through the whole window (5 s): none left either.
        assert_eq!(left((0..10).map(|i| ago(500 * i)).collect()), 0);
        // Three in the window: at most seven left.
        assert_eq!(left((0..3).map(|i| ago(1000 * i)).collect()), 7);
        // Nothing in the window: full.
        assert_eq!(left(Vec::new()), 10);
        assert_eq!(left((0..10).map(|i| ago(60_000 + 1000 * i)).collect()), 10);
    }

    #[test]
    fn permits_lapse_when_not_used() {
        let t0 = Instant::now();
        let mut q = Queues::new(Bucket::new(config(1.0, 1), t0));
        assert_eq!(q.acquire(&agent("a", "x"), t0), Admission::Granted);
        q.acquire(&agent("a", "y"), t0);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(q.grant(later), Some(agent("a", "y")));
        assert_eq!(q.permits.len(), 1, "y's token waits for it");
        let much_later = later + PERMIT_TTL + Duration::from_secs(1);
        assert_eq!(q.grant(much_later), None);
        assert!(q.permits.is_empty(), "y never came back: its token lapsed");
    }
}
