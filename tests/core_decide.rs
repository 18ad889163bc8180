//! Scenarios for `decide`: an agent's life step by step, with the IO shell played by `Sim`,
//! which carries out each plan the way the operator would (write the status, create the pod,
//! mark a deleted pod as going) and lets the test play the kubelet.
//!
//! The harness is `common/sim.rs`, shared with `core_group`'s members, and new pods are built
//! by `common/pods.rs`. In `core_decide/`: the shared builders (`build.rs`); starting and
//! backoff (`restart.rs`), rules (`rules.rs`), heartbeats and settling (`liveness.rs`), the
//! restart limit (`limits.rs`), the circuit breaker (`breaker.rs`), shutdowns (`shutdown.rs`),
//! suspend (`suspend.rs`), manual requests (`manual.rs`), rollout and policy resolution
//! (`spec.rs`), conditions and steady state (`conditions.rs`), lost writes (`lost_writes.rs`),
//! restarts made with their failure (`at_once.rs`), outages (`outage.rs`) and `retryAfter`
//! (`retry_after.rs`).

#[path = "core_decide/at_once.rs"]
mod at_once;
#[path = "core_decide/breaker.rs"]
mod breaker;
#[path = "core_decide/budget.rs"]
mod budget;
#[path = "core_decide/build.rs"]
mod build;
#[path = "core_decide/checkpoints.rs"]
mod checkpoints;
#[path = "common/clock.rs"]
mod clock;
#[path = "core_decide/conditions.rs"]
mod conditions;
#[path = "core_decide/limits.rs"]
mod limits;
#[path = "core_decide/liveness.rs"]
mod liveness;
#[path = "core_decide/lost_writes.rs"]
mod lost_writes;
#[path = "core_decide/manual.rs"]
mod manual;
#[path = "core_decide/outage.rs"]
mod outage;
#[path = "common/pods.rs"]
mod pods;
#[path = "core_decide/restart.rs"]
mod restart;
#[path = "core_decide/resuming.rs"]
mod resuming;
#[path = "core_decide/retry_after.rs"]
mod retry_after;
#[path = "core_decide/rules.rs"]
mod rules;
#[path = "core_decide/shutdown.rs"]
mod shutdown;
#[path = "common/sim.rs"]
mod sim;
#[path = "core_decide/spec.rs"]
mod spec;
#[path = "core_decide/stalls.rs"]
mod stalls;
#[path = "core_decide/suspend.rs"]
mod suspend;
