//! agent-supervisor: a Kubernetes operator that keeps long-running AI agents alive.

pub mod api;
pub mod cli;
pub mod controller;
pub mod process;
pub mod supervise;
pub mod view;
