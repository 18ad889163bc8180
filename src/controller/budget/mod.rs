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

    /// Takes `n` tokens, owing what is not there yet: when they are all there (`now` if they
    /// already are). Reservations are served in the order made, each after the one before.
    pub fn reserve(&mut self, n: u32, now: Instant) -> Instant {
        self.refill(now);
        self.tokens -= f64::from(n);
        if self.tokens >= 0.0 {
            return now;
        }
        now + Duration::from_secs_f64(-self.tokens / self.rate)
    }

    /// Whether every token is back at `now`.
    pub fn is_full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= self.burst
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

/// How long ago each restart pod in the cache was created, of those recent enough to weigh on
/// the budget (within the time a full burst takes to refill).
pub(super) fn recent_restarts(
    pods: &kube::runtime::reflector::Store<super::slim::CachedPod>,
    budget: BudgetConfig,
) -> Vec<Duration> {
    let window = f64::from(budget.burst) / budget.rate.max(f64::MIN_POSITIVE);
    let now = jiff::Timestamp::now();
    pods.state()
        .iter()
        .filter(|p| {
            kube::ResourceExt::labels(p.as_ref())
                .get(crate::api::ATTEMPT_LABEL)
                .and_then(|a| a.parse::<u32>().ok())
                .is_some_and(|a| a > 1)
        })
        .filter_map(|p| p.metadata.creation_timestamp.as_ref())
        // Creation times are whole seconds: each may be up to a second later than it reads.
        .map(|t| (now - t.0).total(jiff::Unit::Second).unwrap_or(0.0) - 1.0)
        .map(|age| age.max(0.0))
        .filter(|age| *age <= window)
        .map(Duration::from_secs_f64)
        .collect()
}

#[cfg(test)]
mod tests;
