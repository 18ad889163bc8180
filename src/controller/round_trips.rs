//! How long the API server takes to answer, now: the longest round trip of the operator's
//! requests over the last status interval or two, each timed on the wire (one attempt, inside
//! the retries and the client-side rate limit). The status writer sends a trailing write that
//! much sooner (`writer`), so that a write sent while the server is slow is still served within
//! its interval.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The longest round trips, in two windows of an interval each: the one under way and the one
/// before (so what it tells covers at least the last interval).
#[derive(Debug)]
pub struct RoundTrips {
    window: Duration,
    state: Mutex<Windows>,
}

#[derive(Debug)]
struct Windows {
    /// When the window under way began.
    began: Instant,
    current: Duration,
    previous: Duration,
}

impl RoundTrips {
    /// Round trips remembered for `window` (the status interval) to two.
    pub fn new(window: Duration) -> Arc<Self> {
        Arc::new(RoundTrips {
            window,
            state: Mutex::new(Windows {
                began: Instant::now(),
                current: Duration::ZERO,
                previous: Duration::ZERO,
            }),
        })
    }

    fn windows(&self, now: Instant) -> std::sync::MutexGuard<'_, Windows> {
        let mut w = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let since = now.saturating_duration_since(w.began);
        if since >= self.window * 2 {
            (w.began, w.current, w.previous) = (now, Duration::ZERO, Duration::ZERO);
        } else if since >= self.window {
            w.began += self.window;
            w.previous = std::mem::take(&mut w.current);
        }
        w
    }

    /// A request answered at `now` took `took`.
    pub fn observe(&self, took: Duration, now: Instant) {
        let mut w = self.windows(now);
        w.current = w.current.max(took);
    }

    /// The longest round trip of the last interval or two, at `now`.
    pub fn longest(&self, now: Instant) -> Duration {
        let w = self.windows(now);
        w.current.max(w.previous)
    }
}

/// A client layer that times each request of the service it wraps until its response begins,
/// into `RoundTrips`.
#[derive(Clone)]
pub struct Timing(pub Arc<RoundTrips>);

impl<S> tower::Layer<S> for Timing {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            trips: self.0.clone(),
        }
    }
}

/// A service whose requests are timed (`Timing`).
#[derive(Clone)]
pub struct Timed<S> {
    inner: S,
    trips: Arc<RoundTrips>,
}

impl<S, R> tower::Service<R> for Timed<S>
where
    S: tower::Service<R>,
    S::Future: Send + 'static,
    S::Response: 'static,
    S::Error: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let (trips, sent) = (self.trips.clone(), Instant::now());
        let response = self.inner.call(request);
        Box::pin(async move {
            let answered = response.await;
            let now = Instant::now();
            trips.observe(now.saturating_duration_since(sent), now);
            answered
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn the_longest_round_trip_is_remembered_for_an_interval_to_two() {
        let trips = RoundTrips::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(trips.longest(t0), Duration::ZERO, "nothing measured");
        trips.observe(SECOND * 2, t0 + SECOND);
        trips.observe(SECOND / 2, t0 + SECOND * 3);
        assert_eq!(trips.longest(t0 + SECOND * 4), SECOND * 2);
        // The next window: the one before still counts.
        trips.observe(SECOND / 10, t0 + SECOND * 12);
        assert_eq!(trips.longest(t0 + SECOND * 19), SECOND * 2);
        // Two windows on, only the round trips of the last one.
        assert_eq!(trips.longest(t0 + SECOND * 21), SECOND / 10);
        // Nothing for two windows: nothing remembered.
        assert_eq!(trips.longest(t0 + SECOND * 60), Duration::ZERO);
    }
}
