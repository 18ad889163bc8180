//! When a controller is idle after a phase (the converge, the storm): no request of its user
//! agent in the phase's namespace in the audit log for `QUIET`, waiting at most `WAIT`. The log is followed as it
//! grows (`Tail`), not read again from its start each time.

use std::collections::HashMap;
use std::io::{BufRead, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;

use crate::audit;

/// How long without a request makes a controller idle: longer than the operator's status
/// interval (10 s), so that the writes it merges and sends when an Agent's interval is up count.
pub const QUIET: Duration = Duration::from_secs(15);

/// How long after a phase's end (every pod running, the storm over) the benchmark waits at most
/// for the idle point.
pub const WAIT: Duration = Duration::from_secs(120);

/// The last request seen since a moment, and whether it has been quiet long enough.
#[derive(Debug)]
pub struct Idle {
    /// The storm's end, or the last request received after it.
    pub last: Timestamp,
}

impl Idle {
    pub fn since(from: Timestamp) -> Self {
        Idle { last: from }
    }

    /// A request received at `at`.
    pub fn saw(&mut self, at: Timestamp) {
        self.last = self.last.max(at);
    }

    /// Whether no request came in the `QUIET` before `now`.
    pub fn is_idle(&self, now: Timestamp) -> bool {
        audit::between(self.last, now) >= QUIET
    }
}

/// Follows the audit log files of a directory as they grow: each `poll` reads only what was
/// written since the last, complete lines only. A file is known by its inode, so one rotated
/// away (renamed) is read on from where it was left, not again from its start.
pub struct Tail {
    dir: PathBuf,
    /// Per file (by inode): how many of its bytes were read.
    read: HashMap<u64, u64>,
}

impl Tail {
    /// Follows `dir`'s audit log from what it holds now on (`from_start`: from its start).
    pub fn new(dir: &Path, from_start: bool) -> anyhow::Result<Self> {
        let mut tail = Tail {
            dir: dir.to_path_buf(),
            read: HashMap::new(),
        };
        if !from_start {
            for (_, meta) in tail.files()? {
                tail.read.insert(meta.ino(), meta.len());
            }
        }
        Ok(tail)
    }

    fn files(&self) -> anyhow::Result<Vec<(PathBuf, std::fs::Metadata)>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("audit") && name.ends_with(".log") {
                // (A file rotated away between the listing and here is read at the next poll.)
                if let Ok(meta) = std::fs::metadata(&path) {
                    files.push((path, meta));
                }
            }
        }
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }

    /// Calls `visit` with every completed request written since the last poll whose line
    /// contains `needle`.
    pub fn poll(
        &mut self,
        needle: &str,
        mut visit: impl FnMut(&serde_json::Value),
    ) -> anyhow::Result<()> {
        for (path, meta) in self.files()? {
            let done = self.read.entry(meta.ino()).or_insert(0);
            if meta.len() <= *done {
                continue;
            }
            // (One rotated away and removed since the listing has nothing more to read.)
            let Ok(mut file) = std::fs::File::open(&path) else {
                continue;
            };
            file.seek(SeekFrom::Start(*done))?;
            let mut reader = std::io::BufReader::new(file);
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader.read_line(&mut line)?;
                // The end, or a line still being written: read again at the next poll.
                if n == 0 || !line.ends_with('\n') {
                    break;
                }
                *done += n as u64;
                audit::visit_line(&line, needle, &mut visit)?;
            }
        }
        Ok(())
    }
}

/// Waits until the controller whose user agent starts with `user_agent` has sent no request in
/// `namespace` for `QUIET`, from `end` (the storm's end) on, at most `WAIT` after `end`. Returns
/// its last request's time (`end` when it sent none) if it became idle, and when the wait
/// ended (the moment it was seen idle, or the wait's limit).
pub async fn wait(
    tail: &mut Tail,
    user_agent: &str,
    namespace: &str,
    end: Timestamp,
) -> anyhow::Result<(Option<Timestamp>, Timestamp)> {
    let needle = format!("\"userAgent\":\"{user_agent}");
    let mut idle = Idle::since(end);
    let limit = end + WAIT;
    loop {
        tail.poll(&needle, |event| {
            if event["objectRef"]["namespace"] == namespace
                && let Some(at) = audit::timestamp(event, "requestReceivedTimestamp")
            {
                idle.saw(at);
            }
        })?;
        let now = Timestamp::now();
        if idle.is_idle(now) {
            return Ok((Some(idle.last), now));
        }
        if now >= limit {
            return Ok((None, now));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn at(s: &str) -> Timestamp {
        format!("2026-11-29T05:00:{s}Z").parse().unwrap()
    }

    #[test]
    fn idle_once_quiet_for_longer_than_the_status_interval() {
        let mut idle = Idle::since(at("10"));
        assert!(!idle.is_idle(at("24.9")));
        assert!(idle.is_idle(at("25")));
        // A request before the storm's end does not move it back; one after it moves it on.
        idle.saw(at("05"));
        assert_eq!(idle.last, at("10"));
        idle.saw(at("20"));
        idle.saw(at("18"));
        assert_eq!(idle.last, at("20"));
        assert!(!idle.is_idle(at("34")));
        assert!(idle.is_idle(at("35")));
    }

    fn line(agent: &str, received: &str) -> String {
        serde_json::json!({
            "stage": "ResponseComplete", "verb": "patch", "userAgent": agent,
            "objectRef": {"resource": "agents", "namespace": "ns", "name": "a"},
            "requestReceivedTimestamp": format!("2026-11-29T05:00:{received}Z"),
        })
        .to_string()
            + "\n"
    }

    #[test]
    fn the_tail_reads_each_complete_line_once_across_a_rotation() {
        let dir = std::env::temp_dir().join(format!("idle-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("audit.log");
        std::fs::write(&log, line("op/1", "01")).unwrap();
        // What the log held before is not read.
        let mut tail = Tail::new(&dir, false).unwrap();
        let mut seen = Vec::new();
        let mut poll = |tail: &mut Tail| {
            tail.poll("\"userAgent\":\"op/", |e| {
                seen.push(e["requestReceivedTimestamp"].as_str().unwrap()[17..19].to_string())
            })
            .unwrap();
            std::mem::take(&mut seen)
        };
        assert!(poll(&mut tail).is_empty());
        // A line of another client, one of ours, and one half written.
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        let half = line("op/1", "04");
        write!(
            file,
            "{}{}{}",
            line("kwok/1", "02"),
            line("op/1", "03"),
            &half[..20]
        )
        .unwrap();
        assert_eq!(poll(&mut tail), ["03"]);
        write!(file, "{}", &half[20..]).unwrap();
        assert_eq!(poll(&mut tail), ["04"]);
        // Rotated: renamed, one more line in it, and a new audit.log.
        std::fs::rename(&log, dir.join("audit-2026-11-29T05-00-05.log")).unwrap();
        write!(file, "{}", line("op/1", "05")).unwrap();
        std::fs::write(&log, line("op/1", "06")).unwrap();
        let mut after = poll(&mut tail);
        after.sort();
        assert_eq!(after, ["05", "06"]);
        assert!(poll(&mut tail).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
