//! The test control plane (`TEST_KUBECONFIG`'s or a private one), its clients and tools.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PostParams;
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
