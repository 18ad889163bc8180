//! On the real node: the operator installed by its chart from its own image, supervising agents
//! that are real containers (a kubelet on containerd and runc, `hack/node.sh`), where exit codes,
//! OOM kills and termination messages come from the kernel and the runtime, not from a test.

#[path = "../support/mod.rs"]
mod support;

#[path = "../faults/monitor.rs"]
mod monitor;

mod agents;
mod install;
mod sandbox_claim;
mod sandbox_expiry;
mod sandbox_groups;
mod sandbox_made;
mod sandbox_restart;
mod sandbox_sdk;
mod sandboxes;
mod sdk;
