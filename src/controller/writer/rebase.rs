//! A pending status moved onto a base someone else rewrote: what they changed is theirs, what
//! this process decided and they did not touch is kept (a three-way merge, field by field).

use serde_json::{Map, Value};

use crate::api::AgentStatus;

/// `mine`, decided on `old`, moved onto `new`: each top-level field others changed between
/// `old` and `new` (a shutdown, a person's patch) is theirs; every other field is `mine`. So the
/// failures and restarts `mine` holds stay in the record whatever was written beside them, and
/// the next decision, made on the result, decides again on what they wrote. `None` only if a
/// field could not be read back (the statuses come from one type: never in practice).
pub fn rebase(old: &AgentStatus, new: &AgentStatus, mine: &AgentStatus) -> Option<AgentStatus> {
    let (old, new, mine) = (fields(old)?, fields(new)?, fields(mine)?);
    let mut merged = Map::new();
    let keys = old.keys().chain(new.keys()).chain(mine.keys());
    for key in keys {
        if merged.contains_key(key) {
            continue;
        }
        let theirs = new.get(key);
        let chosen = if old.get(key) != theirs {
            theirs
        } else {
            mine.get(key)
        };
        if let Some(value) = chosen {
            merged.insert(key.clone(), value.clone());
        }
    }
    serde_json::from_value(Value::Object(merged)).ok()
}

fn fields(status: &AgentStatus) -> Option<Map<String, Value>> {
    match serde_json::to_value(status).ok()? {
        Value::Object(fields) => Some(fields),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Phase, Shutdown, ShutdownType};

    fn status(restarts: u32, attempt: u32) -> AgentStatus {
        AgentStatus {
            phase: Some(Phase::Running),
            restart_count: restarts,
            attempt,
            ..AgentStatus::default()
        }
    }

    #[test]
    fn what_others_wrote_is_theirs_and_the_rest_is_kept() {
        let old = status(1, 2);
        let mine = status(2, 3);
        let mut new = old.clone();
        new.shutdown = Some(Shutdown {
            kind: ShutdownType::Economic,
            reason: Some("out of money".into()),
            message: None,
            at: None,
            source: Some("economy".into()),
        });
        let rebased = rebase(&old, &new, &mine).expect("merges");
        assert_eq!((rebased.restart_count, rebased.attempt), (2, 3));
        assert_eq!(rebased.shutdown, new.shutdown);
    }

    #[test]
    fn a_field_both_changed_is_theirs() {
        let old = status(1, 2);
        let mine = status(2, 3);
        let new = status(0, 2);
        let rebased = rebase(&old, &new, &mine).expect("merges");
        assert_eq!((rebased.restart_count, rebased.attempt), (0, 3));
    }

    #[test]
    fn a_field_others_removed_stays_removed() {
        let mut old = status(1, 2);
        old.pod_name = Some("a-2".into());
        let mut mine = status(2, 3);
        mine.pod_name = Some("a-2".into());
        let mut new = old.clone();
        new.pod_name = None;
        let rebased = rebase(&old, &new, &mine).expect("merges");
        assert_eq!(rebased.pod_name, None);
        assert_eq!(rebased.restart_count, 2);
    }
}
