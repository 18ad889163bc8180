//! examples/outage.yaml: four agents failing with one provider error (each its own request id)
//! share a fingerprint; three within a minute open one outage on their policy, every one of them
//! holds its restart, and after 20 s exactly one is restarted as a probe. kwok fails the probe
//! the same way, so the hold doubles.

use std::time::Duration;

use agent_supervisor::api::{OutageState, Phase, RestartPolicy, Trigger};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;

use super::{apply, setup};
use crate::support::eventually;

const CALLERS: [&str; 4] = ["caller-1", "caller-2", "caller-3", "caller-4"];

#[tokio::test]
async fn agents_failing_with_one_provider_error_open_one_outage_and_one_probe() {
    let (ns, _operator) = setup().await;
    apply(&ns, "outage.yaml").await;
    let policies = ns.api::<RestartPolicy>();

    let mut fingerprints = Vec::new();
    for agent in CALLERS {
        let s = ns
            .wait_status_for(Duration::from_secs(60), agent, "held by the outage", |s| {
                s.phase == Some(Phase::CircuitOpen)
                    && s.restart_history
                        .first()
                        .is_some_and(|r| r.trigger == Trigger::Outage)
            })
            .await;
        fingerprints.push(
            s.last_failure
                .and_then(|f| f.fingerprint)
                .expect("a fingerprint"),
        );
    }
    fingerprints.dedup();
    assert_eq!(
        fingerprints.len(),
        1,
        "one failure, four request ids: {fingerprints:?}"
    );
    let status = policies.get("llm-provider").await.unwrap().status.unwrap();
    assert_eq!(status.outages.len(), 1);
    assert_eq!(status.outages[0].fingerprint, fingerprints[0]);
    assert!(status.outages[0].agents >= 3);

    // One probe: one agent's second pod, and no other.
    let probe = eventually(Duration::from_secs(60), "a probe", || async {
        let outage = policies
            .get("llm-provider")
            .await
            .ok()?
            .status?
            .outages
            .pop()?;
        (outage.state == OutageState::Probing).then_some(outage.probe_agent?)
    })
    .await;
    let pods = ns.api::<Pod>().list(&ListParams::default()).await.unwrap();
    let second: Vec<String> = pods
        .items
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .filter(|n| n.ends_with("-2"))
        .collect();
    assert!(
        second.iter().all(|n| *n == format!("{probe}-2")),
        "{second:?}"
    );

    // kwok fails the probe alike: held again, for twice as long.
    let outage = eventually(Duration::from_secs(60), "a failed probe", || async {
        let outage = policies
            .get("llm-provider")
            .await
            .ok()?
            .status?
            .outages
            .pop()?;
        (outage.failed_probes >= 1).then_some(outage)
    })
    .await;
    assert_eq!(outage.fingerprint, fingerprints[0]);
}
