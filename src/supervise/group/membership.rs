//! Who belongs to which group. An Agent or group belongs to at most one group: the oldest group
//! naming it (by creation time, then name). Any other group naming it is refused it
//! (`Conflict`). A group may not, through the groups below it, contain itself: of the groups on
//! a cycle, the youngest is refused its member on the cycle (`Cycle`), which breaks it.
//!
//! Every reconcile of a namespace's groups and Agents computes the same answer from the same
//! groups, so all of them agree on who supervises whom without writing it anywhere first.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;

use crate::api::{Member, MemberKey};

/// A group as membership sees it.
#[derive(Clone, Debug)]
pub struct GroupSpecView<'a> {
    pub name: &'a str,
    pub created: Timestamp,
    pub members: &'a [Member],
}

/// Why a group does not supervise a member it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An older group names it: that one supervises it.
    Conflict { owner: String },
    /// It would make the group contain itself.
    Cycle,
}

/// Who supervises whom, in one namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    /// Each supervised member's group.
    owner: HashMap<MemberKey, String>,
    /// The members each group names but does not supervise.
    refused: HashMap<String, BTreeMap<MemberKey, Refusal>>,
}

impl Membership {
    /// Resolves membership among `groups` (all the groups of one namespace, in any order).
    pub fn resolve(groups: &[GroupSpecView<'_>]) -> Membership {
        let mut order: Vec<&GroupSpecView<'_>> = groups.iter().collect();
        order.sort_by(|a, b| (a.created, a.name).cmp(&(b.created, b.name)));
        let rank: HashMap<&str, usize> =
            order.iter().enumerate().map(|(i, g)| (g.name, i)).collect();
        let mut m = Membership::default();
        for group in &order {
            for member in group.members {
                let key = member.key();
                match m.owner.get(&key) {
                    Some(owner) if owner != group.name => {
                        let refusal = Refusal::Conflict {
                            owner: owner.clone(),
                        };
                        m.refuse(group.name, key, refusal);
                    }
                    Some(_) => {}
                    None => {
                        m.owner.insert(key, group.name.to_string());
                    }
                }
            }
        }
        // Each group has at most one parent now: follow parents up from every group; a walk
        // that comes back to where it started found a cycle. Break it at its youngest group.
        for group in &order {
            let mut on_cycle = vec![group.name.to_string()];
            let mut at = group.name.to_string();
            while let Some(parent) = m.owner.get(&MemberKey::group(&at)).cloned() {
                if parent == group.name {
                    // Every group on the cycle has its parent on it: the youngest gives up its
                    // child on the cycle.
                    let youngest = on_cycle
                        .iter()
                        .max_by_key(|g| rank.get(g.as_str()).copied().unwrap_or(0))
                        .cloned()
                        .expect("a cycle has a group");
                    let child = on_cycle
                        .iter()
                        .find(|c| m.owner.get(&MemberKey::group(c)) == Some(&youngest))
                        .cloned()
                        .expect("every group on a cycle has its child on it");
                    m.owner.remove(&MemberKey::group(&child));
                    m.refuse(&youngest, MemberKey::group(&child), Refusal::Cycle);
                    break;
                }
                if on_cycle.contains(&parent) || on_cycle.len() > groups.len() {
                    // A cycle not through this group: found from one of its own groups.
                    break;
                }
                on_cycle.push(parent.clone());
                at = parent;
            }
        }
        m
    }

    fn refuse(&mut self, group: &str, key: MemberKey, refusal: Refusal) {
        self.refused
            .entry(group.to_string())
            .or_default()
            .insert(key, refusal);
    }

    /// The group that supervises `member`, if any.
    pub fn owner(&self, member: &MemberKey) -> Option<&str> {
        self.owner.get(member).map(String::as_str)
    }

    /// The group that supervises the Agent `name`, if any.
    pub fn group_of_agent(&self, name: &str) -> Option<&str> {
        self.owner(&MemberKey::agent(name))
    }

    /// Why `group` does not supervise `member`, if it names it and does not.
    pub fn refusal(&self, group: &str, member: &MemberKey) -> Option<&Refusal> {
        self.refused.get(group).and_then(|r| r.get(member))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn resolve(groups: &[(&str, i64, Vec<Member>)]) -> Membership {
        let views: Vec<GroupSpecView<'_>> = groups
            .iter()
            .map(|(name, created, members)| GroupSpecView {
                name,
                created: at(*created),
                members,
            })
            .collect();
        Membership::resolve(&views)
    }

    #[test]
    fn the_oldest_group_wins_a_conflict() {
        let m = resolve(&[
            ("young", 20, vec![Member::agent("a")]),
            ("old", 10, vec![Member::agent("a"), Member::agent("b")]),
        ]);
        assert_eq!(m.group_of_agent("a"), Some("old"));
        assert_eq!(m.group_of_agent("b"), Some("old"));
        assert_eq!(
            m.refusal("young", &MemberKey::agent("a")),
            Some(&Refusal::Conflict {
                owner: "old".into()
            })
        );
        assert_eq!(m.refusal("old", &MemberKey::agent("a")), None);
    }

    #[test]
    fn same_age_is_decided_by_name() {
        let m = resolve(&[
            ("b", 10, vec![Member::agent("x")]),
            ("a", 10, vec![Member::agent("x")]),
        ]);
        assert_eq!(m.group_of_agent("x"), Some("a"));
    }

    #[test]
    fn an_agent_and_a_group_of_the_same_name_are_different_members() {
        let m = resolve(&[
            ("g", 10, vec![Member::agent("x")]),
            ("h", 20, vec![Member::group("x")]),
        ]);
        assert_eq!(m.group_of_agent("x"), Some("g"));
        assert_eq!(m.owner(&MemberKey::group("x")), Some("h"));
    }

    #[test]
    fn a_cycle_is_broken_at_its_youngest_group() {
        // a ⊃ b ⊃ c ⊃ a: c is the youngest, so c does not get a.
        let m = resolve(&[
            ("a", 10, vec![Member::group("b")]),
            ("b", 20, vec![Member::group("c")]),
            ("c", 30, vec![Member::group("a")]),
        ]);
        assert_eq!(m.owner(&MemberKey::group("b")), Some("a"));
        assert_eq!(m.owner(&MemberKey::group("c")), Some("b"));
        assert_eq!(m.owner(&MemberKey::group("a")), None);
        assert_eq!(
            m.refusal("c", &MemberKey::group("a")),
            Some(&Refusal::Cycle)
        );
    }

    #[test]
    fn a_group_naming_itself_is_a_cycle() {
        let m = resolve(&[("a", 10, vec![Member::group("a"), Member::agent("x")])]);
        assert_eq!(m.owner(&MemberKey::group("a")), None);
        assert_eq!(
            m.refusal("a", &MemberKey::group("a")),
            Some(&Refusal::Cycle)
        );
        assert_eq!(m.group_of_agent("x"), Some("a"));
    }

    #[test]
    fn a_chain_is_not_a_cycle() {
        let m = resolve(&[
            ("root", 10, vec![Member::group("mid")]),
            ("mid", 20, vec![Member::group("leaf")]),
            ("leaf", 30, vec![Member::agent("x")]),
        ]);
        assert_eq!(m.owner(&MemberKey::group("mid")), Some("root"));
        assert_eq!(m.owner(&MemberKey::group("leaf")), Some("mid"));
        assert!(m.refused.is_empty());
    }
}
