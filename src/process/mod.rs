//! Process wiring: command line, logging, the API client, leader election, and the servers for
//! the probes, the metrics and the status page (which serve what the controllers write and
//! watch; they own none of it).

pub mod client;
pub mod config;
pub mod leader;
pub mod server;
pub mod status_page;
pub mod telemetry;
