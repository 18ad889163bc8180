//! The pure core: from what happened to an agent to what happens next.
//!
//! gather (IO) → [`classify`] → [`decide`] → act (IO) → record (IO). Nothing here talks to the
//! API server, reads a clock, or draws an unseeded random number: every function is plain data in,
//! plain data out, and the same input always gives the same answer.

pub mod backoff;
pub mod classify;
pub mod conditions;
mod decide;
pub mod fingerprint;
pub mod group;
pub mod input;
pub mod last_words;
pub mod outage;
pub mod plan;
pub mod progress;
pub mod rules;
pub mod spend;

pub use backoff::stable_hash;
pub use decide::{Options, SETTLE, decide, decide_with};
pub use input::{AgentFacts, Blocked, Input, LeaseFacts, PodFacts, PodOrigin, PolicyResolution};
pub use plan::{Event, EventReason, LastFailure, NewPod, Plan, pod_name};
