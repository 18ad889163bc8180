//! Crashing the operator right after one of its writes (Sieve's "intermediate states"): a tower
//! Layer for the operator's client that numbers its mutating requests and, once the k-th has
//! been answered by the API server, completes no request of that client ever again.
//!
//! Requests that never complete are what a crashed process leaves behind: they also stop the
//! tasks the operator spawned (Event publishing), which aborting its main task would not.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::FutureExt;
use http::{Method, Request};
use kube::client::{Body, ClientBuilder};
use tokio::sync::watch;
use tower::{Layer, Service};

/// One mutating request of the operator: its number (from 1), method, path and what it wrote.
#[derive(Clone, Debug)]
pub struct Mutation {
    pub index: usize,
    pub method: Method,
    /// The request path with the namespace replaced by `NS`, and `?dryRun=All` kept.
    pub path: String,
    /// What the body said, in a few words (a status's phase and attempt, an Event's reason).
    pub summary: String,
}

impl std::fmt::Display for Mutation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{} {} {}", self.index, self.method, self.path)?;
        if !self.summary.is_empty() {
            write!(f, " [{}]", self.summary)?;
        }
        Ok(())
    }
}

/// The fault plan of one client, shared by the layer and the test: crash after the k-th
/// mutating request (or never), and the log of every mutating request made.
#[derive(Clone)]
pub struct Faults {
    shared: Arc<Shared>,
}

struct Shared {
    crash_at: Option<usize>,
    log: Mutex<Vec<Mutation>>,
    crashed: watch::Sender<bool>,
}

impl Faults {
    /// A client that crashes right after the API server answers its `k`-th mutating request.
    pub fn crash_after(k: usize) -> Faults {
        assert!(k >= 1, "mutating requests are numbered from 1");
        Faults::new(Some(k))
    }

    /// A client that only counts and logs its mutating requests.
    pub fn counting() -> Faults {
        Faults::new(None)
    }

    fn new(crash_at: Option<usize>) -> Faults {
        Faults {
            shared: Arc::new(Shared {
                crash_at,
                log: Mutex::new(Vec::new()),
                crashed: watch::Sender::new(false),
            }),
        }
    }

    /// A client for the test control plane, as the cluster admin, through this layer.
    pub async fn client(&self) -> kube::Client {
        let mut config = super::admin_config().await;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(super::OPERATOR_USER_AGENT),
        ));
        ClientBuilder::try_from(config)
            .expect("operator client")
            .with_layer(self)
            .build()
    }

    pub fn crash_at(&self) -> Option<usize> {
        self.shared.crash_at
    }

    /// Every mutating request so far, in order.
    pub fn mutations(&self) -> Vec<Mutation> {
        self.shared.log.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.shared.log.lock().unwrap().len()
    }

    pub fn has_crashed(&self) -> bool {
        *self.shared.crashed.borrow()
    }

    /// Resolves once the crash has happened (never, for a counting client).
    pub async fn crashed(&self) {
        let mut receiver = self.shared.crashed.subscribe();
        let _ = receiver.wait_for(|crashed| *crashed).await;
    }

    fn crash(&self) {
        self.shared.crashed.send_replace(true);
    }

    /// Numbers and logs a mutating request.
    fn record(&self, request: &Request<Body>) -> usize {
        let body = request
            .body()
            .try_clone()
            .and_then(|b| b.collect_bytes().now_or_never())
            .and_then(Result::ok)
            .unwrap_or_default();
        let mut log = self.shared.log.lock().unwrap();
        let index = log.len() + 1;
        let path = request.uri().path();
        log.push(Mutation {
            index,
            method: request.method().clone(),
            path: normalize_path(path, request.uri().query()),
            summary: summarize(path, &body),
        });
        index
    }
}

impl<S> Layer<S> for Faults {
    type Service = FaultService<S>;

    fn layer(&self, inner: S) -> FaultService<S> {
        FaultService {
            inner,
            faults: self.clone(),
        }
    }
}

/// The operator's client stack under a fault plan.
pub struct FaultService<S> {
    inner: S,
    faults: Faults,
}

type Pending<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

fn never<R: Send + 'static, E: Send + 'static>() -> Pending<R, E> {
    Box::pin(std::future::pending())
}

impl<S> Service<Request<Body>> for FaultService<S>
where
    S: Service<Request<Body>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pending<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let faults = self.faults.clone();
        if faults.has_crashed() {
            return never();
        }
        let index = is_mutating(request.method()).then(|| faults.record(&request));
        let crash_at = faults.crash_at();
        if let (Some(index), Some(k)) = (index, crash_at)
            && index > k
        {
            // Sent after the crash point while its answer was on the way: never sent at all.
            return never();
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            if index.is_some() && index == crash_at {
                faults.crash();
            }
            if faults.has_crashed() {
                // The process died before it could read this answer.
                std::future::pending::<()>().await;
            }
            result
        })
    }
}

fn is_mutating(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// `/api/v1/namespaces/t-1234/pods/x` → `/api/v1/namespaces/NS/pods/x`, plus `?dryRun=All`.
fn normalize_path(path: &str, query: Option<&str>) -> String {
    let mut parts: Vec<&str> = path.split('/').collect();
    for i in 1..parts.len() {
        if parts[i - 1] == "namespaces" && i + 1 < parts.len() {
            parts[i] = "NS";
        }
    }
    let mut out = parts.join("/");
    if query.is_some_and(|q| q.split('&').any(|p| p.starts_with("dryRun="))) {
        out.push_str("?dryRun=All");
    }
    out
}

/// A few words about a request body: a status write's phase and counters, an Event's reason,
/// a created object's name.
fn summarize(path: &str, body: &[u8]) -> String {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    if path.ends_with("/status") {
        let status = &value["status"];
        let mut words = Vec::new();
        for key in [
            "phase",
            "attempt",
            "restartCount",
            "consecutiveFailures",
            "podName",
            "handledRestartRequest",
            "agents",
            "incarnation",
        ] {
            if !status[key].is_null() {
                words.push(format!("{key}={}", status[key]).replace('"', ""));
            }
        }
        // A group's orders: `restart=a@1,b@1` (member@attempt to end), `stop=a,b`.
        if let Some(members) = status["members"].as_array() {
            let orders = |key: &str, what: fn(&serde_json::Value) -> String| {
                let named: Vec<String> = members
                    .iter()
                    .filter(|m| !m[key].is_null())
                    .map(|m| format!("{}{}", m["name"].as_str().unwrap_or("?"), what(&m[key])))
                    .collect();
                (!named.is_empty()).then(|| format!("{key}={}", named.join(",")))
            };
            words.extend(orders("restart", |r| format!("@{}", r["attempt"])));
            words.extend(orders("stop", |_| String::new()));
        }
        if !status["gaveUp"].is_null() {
            words.push("gaveUp".into());
        }
        if let Some(history) = status["restartHistory"].as_array() {
            words.push(format!("history={}", history.len()));
        }
        if let Some(state) = status["circuitBreaker"]["state"].as_str() {
            words.push(format!("breaker={state}"));
        }
        if !status["shutdown"].is_null() {
            words.push("shutdown".into());
        }
        return words.join(" ");
    }
    if let Some(reason) = value["reason"].as_str() {
        return format!("reason={reason}");
    }
    match value["metadata"]["name"].as_str() {
        Some(name) => format!("name={name}"),
        None => String::new(),
    }
}
