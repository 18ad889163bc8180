//! Test support for integration tests: a client for a real local control plane, and a fresh
//! namespace per test.
//!
//! With `TEST_KUBECONFIG` set (as `make test` does), the tests use that cluster. Without it, the
//! first test starts a private cluster with `hack/cluster.sh` that stops itself when the test
//! process exits. A `KUBECONFIG` in the environment is never used: tests create and delete
//! things, and must not do so on a cluster nobody chose for them. A test that cannot reach its
//! control plane panics with the reason; it never skips.
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod faults;
pub mod groups;
pub mod kubelet;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The kubeconfig of the control plane this test process uses.
pub fn kubeconfig() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| match std::env::var_os("TEST_KUBECONFIG") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => start_private_cluster(),
    })
}

fn start_private_cluster() -> PathBuf {
    let pid = std::process::id();
    let dir = repo_root().join(format!("target/test-clusters/{pid}"));
    eprintln!(
        "TEST_KUBECONFIG is not set: starting a private control plane in {}",
        dir.display()
    );
    let out = Command::new(repo_root().join("hack/cluster.sh"))
        .args(["up", "--dir"])
        .arg(&dir)
        .args(["--owner-pid", &pid.to_string()])
        .output()
        .expect("cannot run hack/cluster.sh");
    if !out.status.success() {
        panic!(
            "cannot start a control plane for the tests (run `make tools`, or point TEST_KUBECONFIG \
             at a cluster):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir.join("kubeconfig")
}

/// The client configuration for the test control plane, as the cluster admin.
pub async fn admin_config() -> Config {
    let path = kubeconfig();
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read kubeconfig {}: {e}", path.display()));
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("invalid kubeconfig {}: {e}", path.display()))
}

/// A client for the test control plane, checked to be reachable.
pub async fn client() -> Client {
    let client = Client::try_from(admin_config().await).expect("cannot build a client");
    if let Err(e) = client.apiserver_version().await {
        panic!(
            "cannot reach the control plane in {}: {e}\nstart one with `make cluster-up` and set \
             TEST_KUBECONFIG=target/cluster/kubeconfig, or unset TEST_KUBECONFIG to let the \
             tests start their own",
            kubeconfig().display()
        );
    }
    client
}

/// A namespace of its own for one test, deleted when dropped.
pub struct TestNamespace {
    pub client: Client,
    pub name: String,
}

impl TestNamespace {
    /// Creates `t-<random>` and waits until pods can be created in it (its default
    /// ServiceAccount exists).
    pub async fn new() -> Self {
        let client = client().await;
        let name = format!("t-{:08x}", rand::random::<u32>());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "supervisor.dev/test": "true" } }
        }))
        .unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        eventually(
            Duration::from_secs(30),
            "the namespace's default ServiceAccount",
            || {
                let accounts = accounts.clone();
                async move { accounts.get_opt("default").await.ok().flatten() }
            },
        )
        .await;
        TestNamespace { client, name }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be shutting down: delete from a
        // runtime of our own on another thread.
        let name = self.name.clone();
        let result = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let client = Client::try_from(admin_config().await)?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await?;
                anyhow::Ok(())
            })
        })
        .join();
        if let Ok(Err(e)) = result {
            eprintln!(
                "warning: could not delete test namespace {}: {e}",
                self.name
            );
        }
    }
}

/// Polls `check` until it returns `Some`, or panics naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A fresh token for the ServiceAccount `namespace/account`, from the TokenRequest API.
pub async fn service_account_token(client: &Client, namespace: &str, account: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request: TokenRequest = serde_json::from_value(
        serde_json::json!({ "spec": { "audiences": [], "expirationSeconds": 3600 } }),
    )
    .expect("a valid TokenRequest");
    accounts
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            account,
            &PostParams::default(),
            &request,
        )
        .await
        .unwrap_or_else(|e| panic!("cannot get a token for {namespace}/{account}: {e}"))
        .status
        .and_then(|s| s.token)
        .unwrap_or_else(|| panic!("no token for {namespace}/{account}"))
}

/// Installs (or updates) the CRDs from `crds/` with server-side apply and waits until they are
/// established. Safe to call from every test.
pub async fn install_crds(client: &Client) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Patch, PatchParams};
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("agent-supervisor-tests").force();
    for (name, yaml) in agent_supervisor::api::crd_files() {
        let crd: CustomResourceDefinition =
            serde_yaml::from_str(&yaml).expect("generated CRD parses");
        let crd_name = crd.metadata.name.clone().expect("CRD has a name");
        crds.patch(&crd_name, &params, &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("cannot install CRD {name}: {e}"));
        eventually(
            Duration::from_secs(30),
            &format!("CRD {crd_name} to be established"),
            || {
                let crds = crds.clone();
                let crd_name = crd_name.clone();
                async move {
                    let crd = crds.get(&crd_name).await.ok()?;
                    let established = crd
                        .status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    established.then_some(())
                }
            },
        )
        .await;
    }
}

/// Waits until the garbage collector acts on Agents: it discovers new resource types only every
/// 30 seconds, and dependents of an Agent deleted before then would never be collected. Proven
/// by deleting a probe Agent and seeing its dependent ConfigMap collected. Once per process.
pub async fn wait_for_garbage_collection_of_agents(ns: &TestNamespace) {
    use agent_supervisor::api::Agent;
    use k8s_openapi::api::core::v1::ConfigMap;
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_init(|| async {
            let agents: Api<Agent> = ns.api();
            let maps: Api<ConfigMap> = ns.api();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
            for round in 0.. {
                let name = format!("gc-probe-{round}");
                let agent: Agent = serde_json::from_value(serde_json::json!({
                    "metadata": { "name": name },
                    "spec": { "suspend": true, "template": { "spec": { "containers": [{ "name": "c", "image": "none" }] } } }
                }))
                .unwrap();
                let agent = agents.create(&PostParams::default(), &agent).await.expect("create probe agent");
                let map: ConfigMap = serde_json::from_value(serde_json::json!({
                    "metadata": { "name": name, "ownerReferences": [{
                        "apiVersion": "supervisor.dev/v1alpha1", "kind": "Agent", "name": name,
                        "uid": agent.metadata.uid, "controller": true
                    }]}
                }))
                .unwrap();
                maps.create(&PostParams::default(), &map).await.expect("create probe dependent");
                agents.delete(&name, &DeleteParams::background()).await.expect("delete probe agent");
                let collected = tokio::time::timeout(Duration::from_secs(10), async {
                    while maps.get_opt(&name).await.ok().flatten().is_some() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                })
                .await
                .is_ok();
                if collected {
                    return;
                }
                assert!(tokio::time::Instant::now() < deadline, "the garbage collector never collected Agent dependents");
            }
        })
        .await;
}

/// A `kubectl` command for the test control plane: the pinned kubectl, this KUBECONFIG.
pub fn kubectl() -> Command {
    tool("kubectl")
}

/// A `helm` command for the test control plane: the pinned helm, this KUBECONFIG.
pub fn helm() -> Command {
    tool("helm")
}

/// A command from the pinned tools (`hack/tools.sh --print`), pointed at the test control plane.
pub fn tool(name: &str) -> Command {
    let out = Command::new(repo_root().join("hack/tools.sh"))
        .arg("--print")
        .output()
        .expect("cannot run hack/tools.sh --print");
    let mut path: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect();
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let mut cmd = Command::new(name);
    cmd.env("PATH", std::env::join_paths(path).expect("valid PATH"));
    cmd.env("KUBECONFIG", kubeconfig());
    cmd
}

/// The operator, running in this test process and watching only `namespace`. Stopped on drop.
pub struct Operator {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The user agent of the in-process operator's requests, so audit logs tell them apart.
pub const OPERATOR_USER_AGENT: &str = "agent-supervisor-test-operator";

impl Operator {
    pub async fn start(namespace: &str) -> Operator {
        let mut config = admin_config().await;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(OPERATOR_USER_AGENT),
        ));
        Operator::start_with(
            Client::try_from(config).expect("operator client"),
            namespace,
        )
    }

    pub fn start_with(client: Client, namespace: &str) -> Operator {
        let config = agent_supervisor::controller::Config {
            namespaces: vec![namespace.to_string()],
            ..Default::default()
        };
        Operator::start_with_config(client, config)
    }

    /// Stops the operator at once, as a crash would: no graceful shutdown.
    pub async fn kill(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The in-process operator with a configuration of the test's own (its metrics, its readiness).
impl Operator {
    /// A client for the in-process operator: the cluster admin, with the operator's user agent.
    pub async fn admin_client() -> Client {
        let mut config = admin_config().await;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(OPERATOR_USER_AGENT),
        ));
        Client::try_from(config).expect("operator client")
    }

    /// Starts the operator with `client` and `config` as given (its namespaces included).
    pub fn start_with_config(
        client: Client,
        config: agent_supervisor::controller::Config,
    ) -> Operator {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(agent_supervisor::controller::run(
            client,
            config,
            async move {
                let _ = stopped.await;
            },
        ));
        Operator {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Whether the operator still runs: it was neither stopped nor has it ended on its own.
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|task| !task.is_finished())
    }
}

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

/// The local control plane's audit log (the tests' cluster audits every request).
pub fn audit_log() -> PathBuf {
    kubeconfig()
        .parent()
        .expect("kubeconfig has a directory")
        .join("logs/audit.log")
}

/// A place in the audit log: the file (by inode, which a rotation keeps) and an offset in it.
#[derive(Clone, Copy, Debug)]
pub struct AuditPosition {
    inode: u64,
    offset: u64,
}

/// The end of the audit log now: what is logged later is read with [`audit_log_since`].
pub fn audit_log_position() -> AuditPosition {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(audit_log())
        .map(|m| AuditPosition {
            inode: m.ino(),
            offset: m.len(),
        })
        .unwrap_or(AuditPosition {
            inode: 0,
            offset: 0,
        })
}

/// The audit log's text from `position` on. The API server rotates the log when it is large
/// (keeping the old file, renamed, beside it): then the rest of the old file comes first.
pub fn audit_log_since(position: AuditPosition) -> String {
    use std::os::unix::fs::MetadataExt;
    let log = audit_log();
    let current = std::fs::metadata(&log).map(|m| m.ino()).unwrap_or(0);
    if current == position.inode {
        return read_from(&log, position.offset);
    }
    let rotated = std::fs::read_dir(log.parent().expect("the log has a directory"))
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.metadata().is_ok_and(|m| m.ino() == position.inode));
    let mut text = rotated
        .map(|e| read_from(&e.path(), position.offset))
        .unwrap_or_default();
    text.push_str(&read_from(&log, 0));
    text
}

/// Waits until the audit log holds every request completed before this call: a ConfigMap this
/// creates in `ns` shows up in it. (The API server writes audit events as requests complete, so
/// a log read right after a request may not show it yet.)
pub async fn audit_log_caught_up(ns: &TestNamespace) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let position = audit_log_position();
    let name = format!("audit-mark-{:08x}", rand::random::<u32>());
    let map: ConfigMap =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": name } }))
            .expect("a valid ConfigMap");
    ns.api::<ConfigMap>()
        .create(&PostParams::default(), &map)
        .await
        .expect("create the audit mark");
    eventually(
        kubelet::REACT,
        &format!("the audit log {} to show {name}", audit_log().display()),
        || {
            let text = audit_log_since(position);
            let found = text.lines().any(|line| {
                line.contains(&name)
                    && serde_json::from_str::<serde_json::Value>(line).is_ok_and(|e| {
                        e["verb"] == "create" && e["objectRef"]["name"] == name.as_str()
                    })
            });
            async move { found.then_some(()) }
        },
    )
    .await;
}

/// The text of `path` from byte `offset` on (all of it if the file is now shorter).
fn read_from(path: &Path, offset: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if len >= offset { offset } else { 0 };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_ok() {
        let _ = file.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
