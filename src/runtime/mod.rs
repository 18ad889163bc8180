//! Process wiring: command line, logging, the health and metrics server, leader election.

pub mod config;
pub mod leader;
pub mod metrics;
pub mod server;
pub mod status;
pub mod telemetry;
