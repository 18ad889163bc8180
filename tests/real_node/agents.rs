//! Real containers under the operator the chart installed: a crash loop, an OOM kill, a typed
//! shutdown, and the operator's own pod deleted mid-run.

use std::time::Duration;

use agent_supervisor::api::{FailureReason, Phase};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use serde_json::json;

use crate::install::{self, shell_template};
use crate::monitor::Monitor;
use crate::support::{self, TestNamespace, eventually};

/// Real containers start in about a second here, but CI's machine is loaded: every wait allows
/// two minutes, and only a failing test waits it out.
const REAL: Duration = Duration::from_secs(120);

#[tokio::test]
async fn the_chart_from_its_image_supervises_real_containers_and_survives_its_own_pod_deleted() {
    let release = TestNamespace::new().await;
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    install::real_node(&ns.client).await;
    install::restricted(&release).await;
    let monitor = Monitor::start(&ns).await;
    install::install_chart(&release, &ns.name).await;

    ns.create_policy(
        "quick",
        json!({ "backoff": { "type": "Linear", "initialDelay": "1s", "maxDelay": "1s" },
                "circuitBreaker": { "failureThreshold": 0 }, "historyLimit": 50 }),
    )
    .await;
    let policy = json!({ "name": "quick" });
    // Crashes a second after each start, saying why on its termination message.
    let crash = "sleep 1; echo 'llm client: connection reset' >/dev/termination-log; exit 3";
    ns.create_agent(
        "crasher",
        json!({ "restartPolicyRef": policy, "template": shell_template(crash, json!({})) }),
    )
    .await;
    // Doubles a string until the kernel kills it at its 20 MiB limit.
    let hog = "x=a; while true; do x=$x$x; done";
    ns.create_agent(
        "hog",
        json!({ "restartPolicyRef": policy,
                "template": shell_template(hog, json!({ "limits": { "memory": "20Mi" } })) }),
    )
    .await;
    let quit =
        r#"echo '{"shutdown":"voluntary","reason":"task done"}' >/dev/termination-log; exit 0"#;
    ns.create_agent(
        "quitter",
        json!({ "restartPolicyRef": policy, "template": shell_template(quit, json!({})) }),
    )
    .await;

    let stuck = r#"echo '{"permanent":true,"reason":"no API key configured"}' >/dev/termination-log; exit 1"#;
    ns.create_agent(
        "keyless",
        json!({ "restartPolicyRef": policy, "template": shell_template(stuck, json!({})) }),
    )
    .await;

    let crashes = ns
        .wait_status_for(REAL, "crasher", "two restarts of a real crash", |s| {
            s.restart_count >= 2
                && s.restart_history.len() >= 2
                && s.restart_history.iter().all(|r| {
                    r.exit_code == Some(3)
                        && r.reason == Some(FailureReason::Error)
                        && r.message.as_deref().map(str::trim)
                            == Some("llm client: connection reset")
                })
        })
        .await;
    eprintln!("crasher: {:?}", crashes.restart_history);
    let oom = ns
        .wait_status_for(REAL, "hog", "a real OOM kill recorded", |s| {
            s.restart_history
                .iter()
                .any(|r| r.reason == Some(FailureReason::OomKilled) && r.exit_code == Some(137))
        })
        .await;
    eprintln!("hog: {:?}", oom.restart_history.first());
    let quitter = ns
        .wait_status_for(REAL, "quitter", "a voluntary shutdown", |s| {
            s.phase == Some(Phase::Shutdown)
        })
        .await;
    assert_eq!(
        quitter.restart_count, 0,
        "a shutdown is left alone: {quitter:?}"
    );
    let shutdown = quitter.shutdown.expect("status.shutdown from the message");
    assert_eq!(shutdown.reason.as_deref(), Some("task done"));

    let keyless = ns
        .wait_status_for(REAL, "keyless", "stopped by its permanent failure", |s| {
            s.phase == Some(Phase::Stopped)
        })
        .await;
    let failure = keyless.last_failure.expect("the failure recorded");
    assert_eq!(
        failure.class,
        agent_supervisor::api::FailureClass::Permanent
    );
    assert_eq!(failure.message.as_deref(), Some("no API key configured"));
    assert_eq!(keyless.restart_count, 0, "never restarted");

    // The operator's own pod deleted: the Deployment makes another, which leads, and the crash
    // loop goes on being supervised with nothing lost.
    let old = install::leader(&release).await.expect("a leader");
    let before = ns.status("crasher").await.restart_count;
    release
        .api::<Pod>()
        .delete(&old, &DeleteParams::default())
        .await
        .expect("delete the operator's pod");
    let new = eventually(REAL, "a new operator pod leading", || {
        let release = &release;
        let old = old.clone();
        async move { install::leader(release).await.filter(|l| *l != old) }
    })
    .await;
    install::available(&release).await;
    let after = ns
        .wait_status_for(REAL, "crasher", "restarts under the new leader", |s| {
            s.restart_count >= before + 2
        })
        .await;
    eprintln!(
        "leader {old} -> {new}: restartCount {before} -> {}",
        after.restart_count
    );

    // Nothing lost, nothing done twice: suspended, the crasher has had exactly one pod per
    // attempt, and its history counts each restart once.
    let patch = json!({ "spec": { "suspend": true } });
    ns.api::<agent_supervisor::api::Agent>()
        .patch(
            "crasher",
            &Default::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("suspend the crasher");
    let suspended = eventually(REAL, "the crasher suspended, one pod per attempt", || {
        let (ns, monitor) = (&ns, &monitor);
        async move {
            let status = ns.status("crasher").await;
            let pods = monitor
                .created()
                .into_iter()
                .filter(|c| c.agent == "crasher")
                .count();
            (status.phase == Some(Phase::Suspended) && pods as u32 == status.restart_count + 1)
                .then_some(status)
        }
    })
    .await;
    let history: Vec<u32> = suspended
        .restart_history
        .iter()
        .map(|r| r.attempt)
        .collect();
    let mut unique = history.clone();
    unique.dedup();
    assert_eq!(history, unique, "no attempt recorded twice: {history:?}");
    let violations = monitor.violations();
    assert!(
        violations.is_empty(),
        "{violations:?}\n{}",
        install::operator_log(&release).await
    );
    eprintln!(
        "crasher suspended after {} restarts ({} pods)",
        suspended.restart_count,
        suspended.restart_count + 1
    );
}
