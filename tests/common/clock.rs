//! The fixed clock of the core's table and property tests.

use jiff::Timestamp;

/// 2025-06-01T12:00:00Z plus `secs`.
pub fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_748_779_200 + secs).expect("a time in range")
}
