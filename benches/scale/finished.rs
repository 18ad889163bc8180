//! The finished pods kept (Succeeded or Failed, not being deleted), per Agent and in all, and
//! the most there were at once while tracked.

use std::collections::HashMap;

#[derive(Clone, Debug, Default)]
pub struct Finished {
    /// The finished pods now, each with its Agent.
    pods: HashMap<String, String>,
    /// Per Agent: how many finished pods it has now.
    per_agent: HashMap<String, u64>,
    /// Whether the peaks are being kept.
    tracking: bool,
    /// The most finished pods one Agent had at once, and all together, while tracked.
    pub peak_per_agent: u64,
    pub peak: u64,
}

impl Finished {
    /// The pod `pod` of `agent` is finished now, or not (any more).
    pub fn set(&mut self, pod: &str, agent: &str, finished: bool) {
        if !finished {
            return self.gone(pod);
        }
        if self.pods.contains_key(pod) {
            return;
        }
        self.pods.insert(pod.to_string(), agent.to_string());
        let count = self.per_agent.entry(agent.to_string()).or_default();
        *count += 1;
        if self.tracking {
            self.peak_per_agent = self.peak_per_agent.max(*count);
            self.peak = self.peak.max(self.pods.len() as u64);
        }
    }

    /// The pod `pod` is gone (or being deleted).
    pub fn gone(&mut self, pod: &str) {
        let Some(agent) = self.pods.remove(pod) else {
            return;
        };
        if let Some(count) = self.per_agent.get_mut(&agent) {
            *count -= 1;
            if *count == 0 {
                self.per_agent.remove(&agent);
            }
        }
    }

    /// Keeps the peaks from now on, starting from what there is now.
    pub fn track(&mut self) {
        self.tracking = true;
        self.peak_per_agent = self.per_agent.values().copied().max().unwrap_or(0);
        self.peak = self.pods.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_are_the_most_at_once_per_agent_and_in_all_once_tracked() {
        let mut f = Finished::default();
        // Before tracking: counted, no peak.
        for pod in ["a-1", "a-2", "a-3"] {
            f.set(pod, "a", true);
        }
        assert_eq!((f.peak_per_agent, f.peak), (0, 0));
        f.gone("a-1");
        f.track();
        assert_eq!((f.peak_per_agent, f.peak), (2, 2));
        // One agent pruned as the other grows: the namespace's peak is at no one's peak.
        f.set("b-1", "b", true);
        f.set("b-2", "b", true);
        assert_eq!((f.peak_per_agent, f.peak), (2, 4));
        f.gone("a-2");
        f.gone("a-3");
        f.set("b-3", "b", true);
        assert_eq!((f.peak_per_agent, f.peak), (3, 4));
        // Seen finished again, or gone twice: counted once.
        f.set("b-3", "b", true);
        f.gone("a-2");
        // Being deleted is not kept.
        f.set("b-3", "b", false);
        f.set("b-4", "b", true);
        f.set("b-5", "b", true);
        assert_eq!((f.peak_per_agent, f.peak), (4, 4));
        assert_eq!(f.per_agent["b"], 4);
    }
}
