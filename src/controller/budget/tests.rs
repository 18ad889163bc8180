//! The budget's bucket, queues and handing out of tokens, without a cluster.

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

#[test]
fn reservations_are_served_at_the_rate_in_the_order_made() {
    let t0 = Instant::now();
    let mut bucket = Bucket::new(config(5.0, 5), t0);
    let at = |i: u32| t0 + Duration::from_millis(200) * i;
    // The burst at once, then one every 200 ms; a reservation of three waits for all three.
    let slots: Vec<Instant> = (0..7).map(|_| bucket.reserve(1, t0)).collect();
    assert_eq!(slots[..5], [t0; 5]);
    assert_eq!(slots[5..], [at(1), at(2)]);
    assert_eq!(bucket.reserve(3, t0), at(5));
    // Reserved tokens are owed: a second later only what was earned since is left.
    assert_eq!(bucket.reserve(1, at(5)), at(6));
    assert!(!bucket.take(at(6)));
    assert!(bucket.take(at(7)));
}
