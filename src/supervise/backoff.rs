//! Restart delays: the backoff curve, its cap, deterministic jitter, and how long the circuit
//! breaker stays open.

use crate::api::{Backoff, BackoffType, CircuitBreakerPolicy, Duration};

/// The delay before restarting after the `n`th consecutive failure (n ≥ 1), before jitter and
/// capped at `maxDelay`; `None` for `Never`.
pub fn base_delay(backoff: &Backoff, n: u32) -> Option<Duration> {
    let n = n.max(1);
    let initial = backoff.initial_delay.as_millis() as f64;
    let millis = match backoff.kind {
        BackoffType::Never => return None,
        BackoffType::Immediate => 0.0,
        BackoffType::Linear => initial * f64::from(n),
        BackoffType::Exponential => initial * backoff.multiplier.max(1.0).powf(f64::from(n - 1)),
    };
    Some(cap(millis, backoff.max_delay))
}

/// The delay actually used: the base delay spread by `jitter`, the same every time for the
/// same agent and attempt.
pub fn delay(backoff: &Backoff, n: u32, uid: &str, attempt: u32) -> Option<Duration> {
    let base = base_delay(backoff, n)?;
    Some(jittered(base, backoff.jitter, uid, attempt))
}

/// `d` × a factor uniform in [1 − jitter, 1 + jitter], drawn from a hash of (uid, attempt).
pub fn jittered(d: Duration, jitter: f64, uid: &str, attempt: u32) -> Duration {
    let j = if jitter.is_finite() {
        jitter.clamp(0.0, 0.999)
    } else {
        0.0
    };
    let factor = 1.0 - j + 2.0 * j * unit_interval(uid, attempt);
    // Rounded down: a factor of at most 1 + j never yields more than (1 + j)·d.
    Duration::from_millis((d.as_millis() as f64 * factor).floor() as u64)
}

/// How long the breaker stays open on its `trip`th opening (trip ≥ 1) without recovery.
pub fn open_duration(breaker: &CircuitBreakerPolicy, trip: u32) -> Duration {
    let base = breaker.open_duration.as_millis() as f64;
    let growth = breaker
        .open_duration_multiplier
        .max(1.0)
        .powf(f64::from(trip.max(1) - 1));
    let max = breaker.max_open_duration.max(breaker.open_duration);
    cap(base * growth, max)
}

fn cap(millis: f64, max: Duration) -> Duration {
    let max_millis = max.as_millis();
    if !millis.is_finite() || millis >= max_millis as f64 {
        max
    } else {
        Duration::from_millis(millis.max(0.0) as u64)
    }
}

/// A number in [0, 1) from (uid, attempt).
fn unit_interval(uid: &str, attempt: u32) -> f64 {
    let bytes = uid.bytes().chain(attempt.to_le_bytes());
    (stable_hash(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// A hash that never changes between builds or machines: FNV-1a, then a splitmix64 finalizer so
/// that inputs differing in one byte land far apart.
pub fn stable_hash(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backoff(kind: BackoffType) -> Backoff {
        Backoff {
            kind,
            jitter: 0.0,
            ..Backoff::default()
        }
    }

    #[test]
    fn curves_follow_the_spec() {
        let secs = |b: &Backoff, n| base_delay(b, n).map(|d| d.as_millis() / 1000);
        let exp = backoff(BackoffType::Exponential);
        assert_eq!(
            [1, 2, 3, 4, 5, 6].map(|n| secs(&exp, n)),
            [10, 20, 40, 80, 160, 300].map(Some)
        );
        let lin = backoff(BackoffType::Linear);
        assert_eq!(
            [1, 2, 3, 30, 31].map(|n| secs(&lin, n)),
            [10, 20, 30, 300, 300].map(Some)
        );
        let now = backoff(BackoffType::Immediate);
        assert_eq!(secs(&now, 7), Some(0));
        assert_eq!(base_delay(&backoff(BackoffType::Never), 1), None);
    }

    #[test]
    fn huge_attempts_stay_at_the_cap() {
        let exp = backoff(BackoffType::Exponential);
        assert_eq!(base_delay(&exp, u32::MAX), Some(exp.max_delay));
    }

    #[test]
    fn jitter_is_repeatable_and_varies_by_attempt() {
        let d = Duration::from_secs(100);
        let a = jittered(d, 0.25, "uid-1", 3);
        assert_eq!(a, jittered(d, 0.25, "uid-1", 3));
        let spread: std::collections::BTreeSet<_> =
            (0..50).map(|n| jittered(d, 0.25, "uid-1", n)).collect();
        assert!(
            spread.len() > 40,
            "jitter should spread attempts: {spread:?}"
        );
        assert!(
            spread
                .iter()
                .all(|x| x.as_millis() >= 75_000 && x.as_millis() <= 125_000)
        );
    }

    #[test]
    fn breaker_open_duration_grows_to_its_cap() {
        let b = CircuitBreakerPolicy::default();
        let mins = |trip| open_duration(&b, trip).as_millis() / 60_000;
        assert_eq!([1, 2, 3, 4, 5].map(mins), [5, 10, 20, 40, 60]);
    }
}
