//! Every version of the objects a watch delivers, to check a whole interval afterwards.

use std::time::Duration;

use kube::Api;

use super::kubelet;
use super::wait::eventually;

/// How an object's version came to be recorded by a [`Recorder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// It existed when the recording started.
    Existing,
    Added,
    Modified,
    Deleted,
}

/// Every version of the objects a watch delivers, from the moment [`Recorder::start`] returns:
/// a test can ask what happened over a whole interval instead of looking once, and can find a
/// state that lasted only a moment (which a poll may miss on a loaded machine).
///
/// A watch that breaks is resumed from the last version seen. If the API server no longer has
/// that version (410 Gone: its watch cache was rebuilt, as it is when a CRD changes), the
/// objects are listed again; an object whose version did not change lost nothing, and one
/// that changed meanwhile is recorded as it is now and named in [`Recorder::gaps`].
pub struct Recorder<K> {
    seen: std::sync::Arc<std::sync::Mutex<Vec<(Change, K)>>>,
    gaps: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Recorder<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    /// Lists the objects of `api` (those matching the field selector `fields`, if any) and
    /// records every change to them until dropped.
    pub async fn start(api: Api<K>, fields: Option<&str>) -> Recorder<K> {
        use futures::StreamExt;
        use kube::api::{ListParams, WatchEvent, WatchParams};
        use std::sync::{Arc, Mutex};
        let mut list_params = ListParams::default();
        let mut watch_params = WatchParams::default().timeout(290);
        if let Some(fields) = fields {
            list_params = list_params.fields(fields);
            watch_params = watch_params.fields(fields);
        }
        let list = api
            .list(&list_params)
            .await
            .expect("list objects to record");
        let mut version = list
            .metadata
            .resource_version
            .expect("a list has a resourceVersion");
        let seen = Arc::new(Mutex::new(
            list.items
                .into_iter()
                .map(|o| (Change::Existing, o))
                .collect::<Vec<_>>(),
        ));
        let gaps = Arc::new(Mutex::new(Vec::new()));
        // The watch is open before `start` returns: nothing done afterwards can be missed.
        let first = api
            .watch(&watch_params, &version)
            .await
            .expect("watch objects to record");
        let task = tokio::spawn({
            let (seen, gaps) = (seen.clone(), gaps.clone());
            async move {
                let mut stream = first.boxed();
                loop {
                    let mut expired = false;
                    while let Some(event) = stream.next().await {
                        let (change, object) = match event {
                            Ok(WatchEvent::Added(o)) => (Change::Added, o),
                            Ok(WatchEvent::Modified(o)) => (Change::Modified, o),
                            Ok(WatchEvent::Deleted(o)) => (Change::Deleted, o),
                            Ok(WatchEvent::Bookmark(b)) => {
                                version = b.metadata.resource_version;
                                continue;
                            }
                            Ok(WatchEvent::Error(status)) => {
                                expired = status.code == 410;
                                if !expired {
                                    gaps.lock().unwrap().push(format!("watch error {status:?}"));
                                }
                                break;
                            }
                            // The connection broke: watch again from the last version seen.
                            Err(_) => break,
                        };
                        if let Some(v) = object.meta().resource_version.clone() {
                            version = v;
                        }
                        seen.lock().unwrap().push((change, object));
                    }
                    // Resume, for as long as a test may wait.
                    loop {
                        if expired {
                            match resync(&api, &list_params, &seen, &gaps).await {
                                Some(listed) => {
                                    version = listed;
                                    expired = false;
                                }
                                None => {
                                    tokio::time::sleep(Duration::from_secs(1)).await;
                                    continue;
                                }
                            }
                        }
                        match api.watch(&watch_params, &version).await {
                            Ok(s) => {
                                stream = s.boxed();
                                break;
                            }
                            Err(kube::Error::Api(status)) if status.code == 410 => expired = true,
                            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                        }
                    }
                }
            }
        });
        Recorder { seen, gaps, task }
    }

    /// Every version recorded so far, oldest first.
    pub fn all(&self) -> Vec<(Change, K)> {
        self.seen.lock().unwrap().clone()
    }

    /// Objects that changed while the watch could not be resumed: their versions in between
    /// are not recorded (only the one after).
    pub fn gaps(&self) -> Vec<String> {
        self.gaps.lock().unwrap().clone()
    }

    /// Every version recorded so far, oldest first, without how it changed.
    pub fn versions(&self) -> Vec<K> {
        self.all().into_iter().map(|(_, o)| o).collect()
    }

    /// Waits (up to the tests' REACT timeout) until some recorded version satisfies `check`,
    /// and returns the first that does.
    pub async fn wait_for(&self, what: &str, check: impl Fn(&K) -> bool) -> K {
        let gaps = self.gaps();
        let what = if gaps.is_empty() {
            what.to_string()
        } else {
            format!("{what} (the recording has gaps: {gaps:?})")
        };
        eventually(kubelet::REACT, &what, || {
            let found = self.versions().into_iter().find(|o| check(o));
            async move { found }
        })
        .await
    }

    /// The first version recorded of each object (by uid), in the order they appeared.
    pub fn distinct(&self) -> Vec<K> {
        let mut uids = std::collections::HashSet::new();
        self.versions()
            .into_iter()
            .filter(|o| uids.insert(o.meta().uid.clone()))
            .collect()
    }
}

/// Lists the recorded objects again after their watch expired, records what changed since
/// their last recorded versions, and returns the list's resourceVersion to watch from.
async fn resync<K>(
    api: &Api<K>,
    params: &kube::api::ListParams,
    seen: &std::sync::Mutex<Vec<(Change, K)>>,
    gaps: &std::sync::Mutex<Vec<String>>,
) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(params).await.ok()?;
    let mut seen = seen.lock().unwrap();
    let mut last = std::collections::HashMap::new();
    for (change, object) in seen.iter() {
        last.insert(object.meta().uid.clone(), (*change, object.clone()));
    }
    let name = |o: &K| o.meta().name.clone().unwrap_or_default();
    for object in list.items {
        match last.remove(&object.meta().uid) {
            Some((change, before))
                if change != Change::Deleted
                    && before.meta().resource_version == object.meta().resource_version => {}
            Some(_) => {
                gaps.lock()
                    .unwrap()
                    .push(format!("{} changed", name(&object)));
                seen.push((Change::Modified, object));
            }
            None => {
                gaps.lock()
                    .unwrap()
                    .push(format!("{} appeared", name(&object)));
                seen.push((Change::Added, object));
            }
        }
    }
    for (change, before) in last.into_values() {
        if change != Change::Deleted {
            gaps.lock().unwrap().push(format!("{} went", name(&before)));
            seen.push((Change::Deleted, before));
        }
    }
    list.metadata.resource_version
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
