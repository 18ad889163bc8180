//! The operator's connection to the API server: kube's client stack, with the server's
//! 429 and 503 answers retried after the `Retry-After` it asks for, and an optional client-side
//! rate limit (`--kube-qps`, `--kube-burst`), each request's round trip timed for the status
//! writer (`controller::round_trips`).
//!
//! Retrying a write is safe here: every pod has a name of its own attempt (a create repeated
//! after it went through is refused as existing, and adopted), every status write carries the
//! resourceVersion its decision was made on (a repeat is refused as a conflict), and deletes
//! name what they delete.

use std::sync::Arc;
use std::time::Duration;

use kube::client::ClientBuilder;
use kube::client::retry::RetryPolicy;
use tower::buffer::BufferLayer;
use tower::limit::RateLimitLayer;
use tower::retry::RetryLayer;
use tower::util::option_layer;

use crate::controller::round_trips::{RoundTrips, Timing};

/// How fast the operator may send requests, and how the server's pushback is honoured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Manners {
    /// Requests a second on average; 0 sets no limit.
    pub qps: f64,
    /// Requests at once, at most, before `qps` applies.
    pub burst: u32,
}

impl Manners {
    /// Requests a retried one waits for, at most, after the server's pushback.
    const RETRIES: u32 = 5;
    /// The first retry's delay when the server names none; each next one doubles, up to `MAX_DELAY`.
    const MIN_DELAY: Duration = Duration::from_millis(50);
    const MAX_DELAY: Duration = Duration::from_secs(10);
    /// Requests that may queue for the limit before a caller waits to be queued.
    const QUEUE: usize = 1024;

    /// The limit as tower takes it: `burst` requests in each window of `burst / qps` seconds
    /// (on average `qps` a second, never more than `burst` at once).
    fn limit(self) -> Option<RateLimitLayer> {
        (self.qps > 0.0).then(|| {
            let burst = self.burst.max(1);
            let window = Duration::from_secs_f64(f64::from(burst) / self.qps);
            RateLimitLayer::new(u64::from(burst), window)
        })
    }
}

/// A client for `config` that honours `manners`. kube's own retry layer is replaced by one with
/// fewer retries and shorter waits (it would hold a reconcile up to 15 retries of up to 1000 s);
/// a request still refused after them fails, and the controller's error policy retries it.
pub fn build(
    mut config: kube::Config,
    manners: Manners,
    round_trips: &Arc<RoundTrips>,
) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    let retry = RetryPolicy::new(
        Manners::MIN_DELAY,
        Manners::MAX_DELAY,
        Manners::RETRIES,
        true,
    )
    .expect("the retry delays are valid");
    Ok(ClientBuilder::try_from(config)?
        // Innermost: each attempt on the wire, not the time it waited for the limit or a retry.
        .with_layer(&Timing(round_trips.clone()))
        .with_layer(&option_layer(manners.limit()))
        .with_layer(&BufferLayer::new(Manners::QUEUE))
        .with_layer(&RetryLayer::new(retry))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use axum::Router;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::get;

    const VERSION: &str = r#"{"major":"1","minor":"36","gitVersion":"v1.36.3","gitCommit":"x",
        "gitTreeState":"clean","buildDate":"2026-01-01T00:00:00Z","goVersion":"go1.26",
        "compiler":"gc","platform":"linux/amd64"}"#;

    /// A server for `/version` that refuses the first `refusals` requests with a 429 asking for
    /// `retry_after` seconds, answers each after `delay`, and records when each request came.
    async fn server(
        refusals: usize,
        retry_after: u64,
        delay: Duration,
    ) -> (kube::Config, Arc<Mutex<Vec<Instant>>>) {
        let seen: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let app = Router::new().route(
            "/version",
            get({
                let seen = seen.clone();
                move || {
                    let seen = seen.clone();
                    async move {
                        tokio::time::sleep(delay).await;
                        let n = {
                            let mut seen = seen.lock().unwrap();
                            seen.push(Instant::now());
                            seen.len()
                        };
                        if n <= refusals {
                            let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure",
                                "reason":"TooManyRequests","code":429}"#;
                            (
                                StatusCode::TOO_MANY_REQUESTS,
                                [("Retry-After", retry_after.to_string())],
                                status,
                            )
                                .into_response()
                        } else {
                            ([("Content-Type", "application/json")], VERSION).into_response()
                        }
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        (config, seen)
    }

    #[tokio::test]
    async fn a_429_is_retried_after_the_delay_the_server_asks_for() {
        let (config, seen) = server(1, 1, Duration::ZERO).await;
        let manners = Manners { qps: 0.0, burst: 1 };
        let trips = RoundTrips::new(Duration::from_secs(10));
        let client = build(config, manners, &trips).unwrap();
        let version = client.apiserver_version().await.expect("answered on retry");
        assert_eq!(version.git_version, "v1.36.3");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "one refusal, one retry");
        assert!(
            seen[1] - seen[0] >= Duration::from_secs(1),
            "retried after {:?}, before the Retry-After of 1s",
            seen[1] - seen[0]
        );
        // Each attempt timed on its own: the server answered at once both times.
        let longest = trips.longest(Instant::now());
        assert!(longest < Duration::from_millis(500), "{longest:?}");
    }

    #[tokio::test]
    async fn a_server_that_keeps_refusing_is_given_up_on_with_its_answer() {
        let (config, seen) = server(usize::MAX, 0, Duration::ZERO).await;
        let manners = Manners { qps: 0.0, burst: 1 };
        let client = build(config, manners, &RoundTrips::new(Duration::from_secs(10))).unwrap();
        let error = client
            .apiserver_version()
            .await
            .expect_err("always refused");
        assert!(
            error.to_string().contains("429") || error.to_string().contains("TooManyRequests"),
            "{error}"
        );
        assert_eq!(seen.lock().unwrap().len(), 1 + Manners::RETRIES as usize);
    }

    #[tokio::test]
    async fn requests_past_the_burst_wait_for_the_rate() {
        let (config, seen) = server(0, 0, Duration::ZERO).await;
        // 2 at once, 10 a second: the third and fourth wait for the next window of 0.2 s, the
        // fifth and sixth for the one after.
        let manners = Manners {
            qps: 10.0,
            burst: 2,
        };
        let client = build(config, manners, &RoundTrips::new(Duration::from_secs(10))).unwrap();
        let began = Instant::now();
        for _ in 0..6 {
            client.apiserver_version().await.unwrap();
        }
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 6);
        assert!(
            seen[5] - began >= Duration::from_millis(400),
            "6 requests at 10 a second in bursts of 2 took {:?}",
            seen[5] - began
        );
    }

    #[tokio::test]
    async fn each_round_trip_is_timed_for_the_status_writer() {
        let (config, _) = server(0, 0, Duration::from_millis(300)).await;
        let manners = Manners { qps: 0.0, burst: 1 };
        let trips = RoundTrips::new(Duration::from_secs(10));
        let client = build(config, manners, &trips).unwrap();
        assert_eq!(trips.longest(Instant::now()), Duration::ZERO);
        client.apiserver_version().await.unwrap();
        let longest = trips.longest(Instant::now());
        assert!(
            longest >= Duration::from_millis(300) && longest < Duration::from_secs(2),
            "{longest:?}"
        );
    }
}
