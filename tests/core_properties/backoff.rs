//! The backoff curve and its jitter, and the breaker's open duration, against the spec.

use agent_supervisor::api::{Backoff, BackoffType, CircuitBreakerPolicy, Duration};
use agent_supervisor::supervise::backoff;
use proptest::prelude::*;

use crate::arb::arb_backoff_type;
use crate::config;

/// A backoff admission accepts: initialDelay ≤ maxDelay, multiplier ≥ 1, 0 ≤ jitter < 1.
fn arb_valid_backoff() -> impl Strategy<Value = Backoff> {
    (
        arb_backoff_type(),
        0u64..3_600_000,
        0u64..7_200_000,
        1.0f64..10.0,
        0.0f64..1.0,
    )
        .prop_map(|(kind, a, b, multiplier, jitter)| Backoff {
            kind,
            initial_delay: Duration::from_millis(a.min(b)),
            max_delay: Duration::from_millis(a.max(b)),
            multiplier,
            jitter,
        })
}

/// SPEC.md's curve, computed directly: Immediate 0, Linear initialDelay × n, Exponential
/// initialDelay × multiplier^(n−1), capped at maxDelay.
fn spec_base_millis(b: &Backoff, n: u32) -> Option<f64> {
    let initial = b.initial_delay.as_millis() as f64;
    let raw = match b.kind {
        BackoffType::Never => return None,
        BackoffType::Immediate => 0.0,
        BackoffType::Linear => initial * f64::from(n),
        BackoffType::Exponential => initial * b.multiplier.powf(f64::from(n) - 1.0),
    };
    Some(raw.min(b.max_delay.as_millis() as f64))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_base_delay_follows_the_spec_curve_capped_at_max_delay(
        backoff in arb_valid_backoff(),
        n in prop_oneof![1u32..40, any::<u32>()],
    ) {
        let base = backoff::base_delay(&backoff, n);
        match spec_base_millis(&backoff, n) {
            None => prop_assert_eq!(base, None),
            Some(want) => {
                let got = base.expect("a delay").as_millis() as f64;
                prop_assert!(got <= backoff.max_delay.as_millis() as f64);
                // Whole milliseconds: at most one off the exact value.
                prop_assert!((got - want).abs() <= 1.0, "got {got}ms, want {want}ms");
            }
        }
    }

    #[test]
    fn a_jittered_delay_stays_within_the_jitter_of_the_base_delay(
        backoff in arb_valid_backoff(),
        n in prop_oneof![1u32..40, any::<u32>()],
        uid in ".{0,40}",
        attempt in any::<u32>(),
    ) {
        let delay = backoff::delay(&backoff, n, &uid, attempt);
        let Some(base) = backoff::base_delay(&backoff, n) else {
            prop_assert_eq!(backoff.kind, BackoffType::Never);
            prop_assert_eq!(delay, None);
            return Ok(());
        };
        let d = base.as_millis() as f64;
        let got = delay.expect("a delay").as_millis() as f64;
        let j = backoff.jitter;
        // Whole milliseconds, rounded down.
        prop_assert!(got >= ((1.0 - j) * d).floor(), "{got} < (1 - {j}) × {d}");
        prop_assert!(got <= (1.0 + j) * d, "{got} > (1 + {j}) × {d}");
        // Repeatable.
        prop_assert_eq!(backoff::delay(&backoff, n, &uid, attempt), delay);
    }

    #[test]
    fn base_delays_never_decrease_with_the_attempt(
        backoff in arb_valid_backoff(),
        n in prop_oneof![1u32..200, any::<u32>()],
    ) {
        let next = n.saturating_add(1);
        prop_assert!(backoff::base_delay(&backoff, n) <= backoff::base_delay(&backoff, next));
    }

    #[test]
    fn the_breaker_open_duration_grows_to_its_cap(
        open in 0u64..3_600_000,
        max in 0u64..7_200_000,
        multiplier in 1.0f64..5.0,
        trip in 1u32..100,
    ) {
        let policy = CircuitBreakerPolicy {
            failure_threshold: 5,
            open_duration: Duration::from_millis(open.min(max)),
            open_duration_multiplier: multiplier,
            max_open_duration: Duration::from_millis(open.max(max)),
        };
        let this = backoff::open_duration(&policy, trip);
        let next = backoff::open_duration(&policy, trip + 1);
        prop_assert!(this <= next);
        prop_assert!(this >= policy.open_duration);
        prop_assert!(next <= policy.max_open_duration);
    }
}

#[test]
fn jitter_spreads_delays_over_the_whole_range() {
    // Not a property of one draw: many agents failing together must not restart together.
    let backoff = Backoff {
        jitter: 0.5,
        ..Backoff::default()
    };
    let delays: Vec<u64> = (0..2000)
        .map(|i| {
            backoff::delay(&backoff, 1, &format!("uid-{i}"), 1)
                .unwrap()
                .as_millis()
        })
        .collect();
    let low = delays.iter().filter(|&&d| d < 7_500).count();
    let high = delays.iter().filter(|&&d| d >= 12_500).count();
    // Each quarter of [5s, 15s] holds about 500 of them.
    assert!((350..650).contains(&low), "{low} in the lowest quarter");
    assert!((350..650).contains(&high), "{high} in the highest quarter");
}
