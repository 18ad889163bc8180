//! The last state of pods deleted lately, for the reconciles that come after their deletion.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use super::slim::CachedPod;

/// The last state of recently deleted pods, as their deletion's watch event carried it. A pod
/// evicted and deleted before its Agent's turn would otherwise leave no trace of why it went
/// (its `DisruptionTarget` condition): it would count as lost with its node.
#[derive(Default)]
pub(crate) struct GonePods(Mutex<Gone>);

#[derive(Default)]
struct Gone {
    pods: HashMap<ObjectRef<CachedPod>, Arc<CachedPod>>,
    /// When each was kept, oldest first: a namespace's deletion removes thousands of pods, and
    /// forgetting the expired ones must not scan all the others each time.
    order: VecDeque<(Instant, ObjectRef<CachedPod>)>,
}

impl GonePods {
    /// How long a deleted pod is remembered: far longer than any reconcile waits for its turn.
    const KEPT: Duration = Duration::from_secs(600);

    pub(crate) fn keep(&self, pod: CachedPod) {
        let mut gone = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        while let Some((at, _)) = gone.order.front()
            && now.duration_since(*at) >= Self::KEPT
        {
            let (_, key) = gone.order.pop_front().expect("front exists");
            gone.pods.remove(&key);
        }
        let key = ObjectRef::from(&pod);
        // A pod kept again (deleted, recreated with its name, deleted) is forgotten on its
        // first expiry: sooner than `KEPT`, still far later than any reconcile looks.
        gone.order.push_back((now, key.clone()));
        gone.pods.insert(key, Arc::new(pod));
    }

    /// The last state of the pod `name` in `namespace`, if it was deleted lately.
    pub(crate) fn get(&self, name: &str, namespace: &str) -> Option<Arc<CachedPod>> {
        let gone = self.0.lock().unwrap_or_else(|e| e.into_inner());
        gone.pods
            .get(&ObjectRef::new(name).within(namespace))
            .cloned()
    }
}
