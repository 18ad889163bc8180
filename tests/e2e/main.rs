//! End to end: the chart installed with helm, the operator binary running as its own process
//! under the chart's ServiceAccount, and the examples applied as a user would.

#[path = "../support/mod.rs"]
mod support;

mod dashboard;
mod examples;
mod lag;
mod leader;
mod metrics;
mod process;
mod rbac;
mod rbac_sandboxes;
mod status;
