//! Test support for integration tests: a client for a real local control plane, and a fresh
//! namespace per test.
//!
//! With `TEST_KUBECONFIG` set (as `make test` does), the tests use that cluster. Without it, the
//! first test starts a private cluster with `hack/cluster.sh` that stops itself when the test
//! process exits. A `KUBECONFIG` in the environment is never used: tests create and delete
//! things, and must not do so on a cluster nobody chose for them. A test that cannot reach its
//! control plane panics with the reason; it never skips.
#![allow(dead_code)] // each test binary uses a different part of this module

mod agent;
mod audit;
mod cluster;
mod crds;
pub mod faults;
pub mod groups;
pub mod kubelet;
mod namespace;
pub mod operator;
mod recorder;
mod wait;

// The helpers, by the names the tests use. Each test binary uses a different part of them (as
// of this module, above).
#[allow(unused_imports)]
pub use self::{
    agent::env_of,
    audit::{AuditPosition, audit_log, audit_log_caught_up, audit_log_position, audit_log_since},
    cluster::{admin_config, client, helm, kubeconfig, kubectl, service_account_token, tool},
    crds::{install_crds, wait_for_garbage_collection_of_agents},
    namespace::TestNamespace,
    operator::{OPERATOR_USER_AGENT, Operator},
    recorder::{Change, Recorder},
    wait::eventually,
};
