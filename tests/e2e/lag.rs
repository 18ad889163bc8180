//! The status lag histogram counts from each change's cause (a report on the heartbeat Lease, a
//! pod's end) to the write that records it: never nothing, never past the promised interval.

use std::time::Duration;

use agent_supervisor::api::{Agent, Phase};
use serde_json::json;

use crate::metrics::sample;
use crate::process::OperatorProcess;
use crate::support::{self, TestNamespace};

/// The operator's default `--status-interval`: every change is written within it.
const INTERVAL: f64 = 10.0;

/// The histogram's count, sum, and how many observations its buckets hold at `le` or below
/// (`le` the smallest bucket bound at or above `at_most`).
fn lag(metrics: &str, at_most: f64) -> (f64, f64, f64) {
    let count = sample(metrics, "agent_supervisor_status_lag_seconds_count");
    let sum = sample(metrics, "agent_supervisor_status_lag_seconds_sum");
    let within = metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("agent_supervisor_status_lag_seconds_bucket{le=\"")?;
            let (le, value) = rest.split_once("\"} ")?;
            let le: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, value.trim().parse::<f64>().ok()?))
        })
        .filter(|(le, _)| *le >= at_most)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, v)| v)
        .expect("the histogram's buckets are exported");
    (count, sum, within)
}

#[tokio::test]
async fn the_status_lag_counts_a_report_and_a_crash_from_when_they_were_seen() {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let kubeconfig = support::kubeconfig().to_path_buf();
    let mut operator = OperatorProcess::start(
        &kubeconfig,
        "lag-test",
        &[&format!("--namespaces={}", ns.name), "--leader-elect=false"],
    );
    operator.ready().await;
    ns.create_immediate_policy().await;
    ns.create_agent(
        "lagger",
        json!({ "restartPolicyRef": { "name": "immediate" }, "heartbeat": { "timeout": "5m" } }),
    )
    .await;
    ns.wait_running("lagger-1").await;
    ns.wait_status("lagger", "Running", |s| s.phase == Some(Phase::Running))
        .await;
    // Once its status was last written an interval ago (by the API server's clock, in whole
    // seconds: a second more), the next change is written at once (the leading edge), with
    // nothing held before it.
    let agents = ns.api::<Agent>();
    support::eventually(
        Duration::from_secs(30),
        "the status last written an interval ago",
        || async {
            let agent = agents.get("lagger").await.ok()?;
            let written = agent
                .metadata
                .managed_fields
                .iter()
                .flatten()
                .filter(|f| f.subresource.as_deref() == Some("status"))
                .filter_map(|f| f.time.as_ref())
                .map(|t| t.0)
                .max()?;
            let age = jiff::Timestamp::now().duration_since(written);
            (age.as_secs_f64() > INTERVAL + 1.0).then_some(())
        },
    )
    .await;
    // Everything written before the agent reports or crashes is left out: the slack covers a
    // loaded machine, the bound is what the histogram must never exceed.
    let slack = 5.0;
    let scrape = || async { lag(&operator.metrics().await, INTERVAL + slack) };
    let before = scrape().await;

    // It reports progress on its Lease: written at once, timed from when the Lease watch showed
    // it (not from the write's own decision, which would count nothing).
    ns.report_on_lease("lagger", "lagger-1", "7", "").await;
    ns.wait_status("lagger", "the report recorded", |s| {
        s.progress.as_ref().is_some_and(|p| p.value == 7)
    })
    .await;
    // The metric follows the write the test saw: scrape until it is counted.
    let counted = |writes: f64| {
        let scrape = &scrape;
        move || async move { Some(scrape().await).filter(|now| now.0 >= before.0 + writes) }
    };
    let reported =
        support::eventually(Duration::from_secs(30), "the report's write", counted(1.0)).await;
    assert_eq!(
        (reported.0 - before.0, reported.1 > before.1),
        (1.0, true),
        "one write, lagging the report a little: before {before:?}, after {reported:?}"
    );

    // Later its pod ends.
    ns.terminate("lagger-1", 1, "Error", "boom").await;
    ns.wait_status("lagger", "the crash recorded", |s| s.restart_count == 1)
        .await;
    let after =
        support::eventually(Duration::from_secs(30), "the crash's write", counted(2.0)).await;
    let (count, sum, within) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    assert!(
        sum > 0.0,
        "each write lags its cause a little: {count} writes, sum {sum}"
    );
    assert_eq!(
        within,
        count,
        "every write within {INTERVAL} s (+{slack} s) of its cause: {count} writes, sum {sum} s:\n{}",
        operator.log_text()
    );
    assert!(
        sum / count <= INTERVAL + slack,
        "{count} writes, sum {sum} s"
    );
}
