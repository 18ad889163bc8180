//! The chart installed into the test control plane, and the operator binary run under the
//! chart's ServiceAccount identity (a token from the TokenRequest API) — exactly what the
//! Deployment would run, minus the container.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::config::Kubeconfig;

use crate::support::{self, TestNamespace};

/// The release name: the chart names its ServiceAccount, Roles and leader Lease after it.
pub const RELEASE: &str = "agent-supervisor";

/// `helm install` of the chart into `release_ns`, watching `watched`. CRDs come from
/// `support::install_crds`, as cluster-wide objects are shared by all tests.
pub fn install_chart(release_ns: &str, watched: &[&str]) {
    install_chart_with(release_ns, watched, &[]);
}

/// `install_chart`, with extra `--set` values (`key=value`).
pub fn install_chart_with(release_ns: &str, watched: &[&str], values: &[&str]) {
    let chart = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("charts/agent-supervisor");
    let out = support::helm()
        .args(["install", RELEASE])
        .arg(&chart)
        .args(["--namespace", release_ns, "--skip-crds", "--wait=false"])
        .arg(format!("--set=watchNamespaces={{{}}}", watched.join(",")))
        .args(values.iter().map(|v| format!("--set={v}")))
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm install failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kubeconfig file that authenticates as `namespace/account` with a fresh token.
pub async fn token_kubeconfig(ns: &TestNamespace, namespace: &str, account: &str) -> PathBuf {
    let token = support::service_account_token(&ns.client, namespace, account).await;
    let mut config = Kubeconfig::read_from(support::kubeconfig()).expect("read admin kubeconfig");
    for auth in &mut config.auth_infos {
        auth.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.clone().into()),
            ..Default::default()
        });
    }
    let path =
        std::env::temp_dir().join(format!("agent-supervisor-{}-{account}.kubeconfig", ns.name));
    let yaml = serde_yaml::to_string(&config).expect("serialize kubeconfig");
    // The serialized token is redacted by the secrecy wrapper: put it back.
    let yaml = yaml.replace("token: '[REDACTED]'", &format!("token: {token}"));
    assert!(yaml.contains(&token), "the kubeconfig carries the token");
    std::fs::write(&path, yaml).expect("write kubeconfig");
    path
}

/// The operator binary, running until dropped (or stopped).
pub struct OperatorProcess {
    child: Child,
    pub metrics_port: u16,
    /// Where its status page is served (each process its own port, as tests run at once).
    pub status_port: u16,
    pub log: PathBuf,
}

impl OperatorProcess {
    /// Starts `agent-supervisor` with `args`, as `hostname` (its user agent and leader
    /// identity), with `kubeconfig`.
    pub fn start(kubeconfig: &PathBuf, hostname: &str, args: &[&str]) -> OperatorProcess {
        let metrics_port = free_port();
        let status_port = free_port();
        let log = kubeconfig.with_extension(format!("{hostname}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_agent-supervisor"))
            .args(args)
            .arg(format!("--metrics-addr=127.0.0.1:{metrics_port}"))
            .arg(format!("--status-addr=127.0.0.1:{status_port}"))
            .env("KUBECONFIG", kubeconfig)
            .env("HOSTNAME", hostname)
            .env("RUST_LOG", "info,kube=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("create operator log"))
            .spawn()
            .expect("start the operator binary");
        OperatorProcess {
            child,
            metrics_port,
            status_port,
            log,
        }
    }

    /// Waits until /readyz answers.
    pub async fn ready(&mut self) {
        let url = format!("http://127.0.0.1:{}/readyz", self.metrics_port);
        for _ in 0..150 {
            if let Some(status) = self.child.try_wait().expect("poll operator") {
                panic!("the operator exited with {status}:\n{}", self.log_text());
            }
            if http_get(&url).await.is_some_and(|(code, _)| code == 200) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "the operator was not ready within 30s:\n{}",
            self.log_text()
        );
    }

    pub async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        http_get(&url).await.expect("scrape /metrics").1
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, as Kubernetes stops a pod; waits for the process to exit.
    pub async fn terminate(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        // As long as the tests wait for any reaction: a graceful stop on a loaded machine can
        // take seconds, and a process that ignores SIGTERM still fails here.
        let deadline = tokio::time::Instant::now() + support::kubelet::REACT;
        while tokio::time::Instant::now() < deadline {
            if self.child.try_wait().expect("poll operator").is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the operator did not stop within {:?} of SIGTERM",
            support::kubelet::REACT
        );
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A plain HTTP/1.0 GET on loopback: (status code, body).
pub async fn http_get(url: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest.split_once('/')?;
    let mut stream = tokio::net::TcpStream::connect(host).await.ok()?;
    stream
        .write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((code, body))
}
