//! The rendered chart against the real API server's validation and Pod Security admission.

use serde_json::json;

use crate::support::{self, TestNamespace};
use crate::{RELEASE, documents, output, run, template, the};

/// A namespace created with Pod Security "restricted" enforced (and warned about) from the
/// start, deleted when dropped.
struct RestrictedNamespace {
    name: String,
}

impl RestrictedNamespace {
    fn create() -> Self {
        let name = format!("t-{:08x}", rand::random::<u32>());
        let namespace = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": { "name": name, "labels": {
                "supervisor.dev/test": "true",
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "restricted",
            }}
        });
        run(
            support::kubectl().args(["create", "-f", "-"]),
            Some(&namespace.to_string()),
        );
        RestrictedNamespace { name }
    }
}

impl Drop for RestrictedNamespace {
    fn drop(&mut self) {
        let out = output(
            support::kubectl().args(["delete", "namespace", &self.name, "--wait=false"]),
            None,
        );
        if !out.status.success() {
            eprintln!(
                "warning: could not delete test namespace {}: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Every object `helm template` renders, in both modes, passes the API server's own validation
/// (a server-side dry run with strict field validation: unknown fields are errors too).
#[tokio::test]
async fn rendered_chart_passes_server_side_validation_in_both_modes() {
    let ns = TestNamespace::new().await;
    let team_a = TestNamespace::new().await;
    let team_b = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let watch = format!("watchNamespaces={{{},{}}}", team_a.name, team_b.name);
    for sets in [vec![], vec![watch.as_str()]] {
        let yaml = template(&ns.name, &sets);
        let out = run(
            support::kubectl().args([
                "apply",
                "--dry-run=server",
                "--validate=strict",
                "--filename=-",
            ]),
            Some(&yaml),
        );
        let accepted = out
            .lines()
            .filter(|l| l.ends_with("(server dry run)"))
            .count();
        assert_eq!(
            accepted,
            documents(&yaml).len(),
            "not every object was accepted:\n{out}"
        );
    }
}

/// The operator's pod, exactly as the Deployment renders it, is admitted without a warning into
/// a namespace that enforces Pod Security "restricted"; pods that break one rule are not.
#[test]
fn operator_pod_is_admitted_under_pod_security_restricted() {
    let ns = RestrictedNamespace::create();
    let docs = documents(&template(&ns.name, &[]));
    let template = &the(&docs, "Deployment", &ns.name, RELEASE)["spec"]["template"];
    let container = &template["spec"]["containers"][0]["securityContext"];
    assert_eq!(container["readOnlyRootFilesystem"], true, "{container:?}");
    assert_eq!(container["runAsUser"], 65532, "{container:?}");
    assert_eq!(container["runAsGroup"], 65532, "{container:?}");
    assert_eq!(template["spec"]["automountServiceAccountToken"], true);
    let account = template["spec"]["serviceAccountName"]
        .as_str()
        .expect("a ServiceAccount");
    run(
        support::kubectl().args(["create", "serviceaccount", account, "--namespace", &ns.name]),
        None,
    );

    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "operator", "namespace": ns.name, "labels": template["metadata"]["labels"] },
        "spec": template["spec"],
    });
    let create = |pod: &serde_json::Value| {
        output(
            support::kubectl().args(["create", "--dry-run=server", "--filename=-"]),
            Some(&pod.to_string()),
        )
    };
    let admitted = create(&pod);
    let stderr = String::from_utf8_lossy(&admitted.stderr);
    assert!(
        admitted.status.success(),
        "the chart's pod was rejected:\n{stderr}"
    );
    assert!(
        !stderr.contains("PodSecurity"),
        "the chart's pod draws warnings:\n{stderr}"
    );

    // The same pod, one setting off: each is refused, so the admission check above is real.
    let variants: [(&str, &str, serde_json::Value); 3] = [
        (
            "allowPrivilegeEscalation",
            "allowPrivilegeEscalation != false",
            json!(true),
        ),
        (
            "capabilities",
            "unrestricted capabilities",
            json!({ "drop": [] }),
        ),
        ("runAsUser", "runAsUser=0", json!(0)),
    ];
    for (field, violation, value) in variants {
        let mut bad = pod.clone();
        bad["spec"]["containers"][0]["securityContext"][field] = value;
        let refused = create(&bad);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success(),
            "a pod with {field} changed was admitted"
        );
        assert!(
            stderr.contains("violates PodSecurity \"restricted:latest\"")
                && stderr.contains(violation),
            "{field}: want a Pod Security violation {violation:?}, got:\n{stderr}"
        );
    }
}
