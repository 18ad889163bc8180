//! What people read: the plugin's renderings and what the status page shows, as pure functions
//! of objects already fetched. They know no client, no cache and no controller: `cli` (the
//! plugin) and `process::status_page` (the page the process serves) fetch, then render with these.

pub mod history;
pub mod list;
pub mod text;
pub mod tree;
pub mod why;
