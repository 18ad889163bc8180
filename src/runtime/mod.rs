//! Process wiring: command line, logging, the API client, the health and metrics server, leader
//! election.

pub mod client;
pub mod config;
pub mod leader;
pub mod metrics;
pub mod server;
pub mod status;
pub mod telemetry;
