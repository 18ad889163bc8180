//! What people read: the plugin's renderings and the status page, as pure functions of objects
//! already fetched (the page: of a snapshot of the controllers' caches). They make no request:
//! `cli` (the plugin) fetches, and `process::status_page` serves, then they render with these.

pub mod history;
pub mod list;
pub mod spend;
pub mod status_page;
pub mod text;
pub mod tree;
pub mod why;
