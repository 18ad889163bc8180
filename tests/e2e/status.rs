//! The status page of the real operator binary, with agents in several phases, rendered in
//! headless Chromium: what a person sees, including a termination message full of HTML shown as
//! text.

use std::process::Stdio;
use std::time::Duration;

use agent_supervisor::api::{Agent, AgentGroup, Phase};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::process::{OperatorProcess, http_get};
use crate::support::{self, TestNamespace};

const HOSTILE: &str =
    "<script>document.title=1</script><img src=x onerror=alert(2)><b>bold</b> & more";

/// The page as Chromium's DOM after loading it (scripts would have run by then).
async fn rendered(url: &str) -> String {
    let profile = tempdir();
    let mut cmd = tokio::process::Command::new("chromium");
    cmd.args([
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--dump-dom",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    // Chromium refuses to run as root with its sandbox on.
    if nix_is_root() {
        cmd.arg("--no-sandbox");
    }
    let child = cmd
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run chromium ({e}): hack/chromium.sh installs it (make test runs it)")
        });
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
        .await
        .expect("chromium rendered the page within 90s")
        .expect("chromium ran");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn nix_is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("status-chromium-{:08x}", rand::random::<u32>()));
    std::fs::create_dir_all(&dir).expect("a profile directory");
    dir
}

#[tokio::test]
async fn the_status_page_shows_every_phase_and_escapes_what_agents_write() {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    let kubeconfig = support::kubeconfig().to_path_buf();
    let mut operator = OperatorProcess::start(
        &kubeconfig,
        "status-test",
        &[&format!("--namespaces={}", ns.name), "--leader-elect=false"],
    );
    operator.ready().await;

    ns.create_policy(
        "slow",
        json!({ "backoff": { "type": "Linear", "initialDelay": "1h", "maxDelay": "2h" } }),
    )
    .await;
    let slow = json!({ "restartPolicyRef": { "name": "slow" } });
    ns.create_agent("steady", json!({})).await;
    ns.create_agent("hostile", slow.clone()).await;
    ns.create_agent("paused", json!({ "suspend": true })).await;
    ns.create_agent("broke", json!({})).await;
    let group: AgentGroup = serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "AgentGroup",
        "metadata": { "name": "crew" },
        "spec": { "members": [{ "agent": "steady" }] }
    }))
    .unwrap();
    ns.api::<AgentGroup>()
        .create(&PostParams::default(), &group)
        .await
        .expect("create group");

    ns.wait_running("hostile-1").await;
    ns.terminate("hostile-1", 3, "Error", HOSTILE).await;
    ns.wait_running("broke-1").await;
    let shutdown =
        json!({ "status": { "shutdown": { "type": "Economic", "reason": "out of credits" } } });
    ns.api::<Agent>()
        .patch_status("broke", &PatchParams::default(), &Patch::Merge(&shutdown))
        .await
        .expect("shut broke down");
    for (agent, phase) in [
        ("steady", Phase::Running),
        ("hostile", Phase::BackingOff),
        ("paused", Phase::Suspended),
        ("broke", Phase::Shutdown),
    ] {
        ns.wait_status(agent, phase.as_str(), |s| s.phase == Some(phase))
            .await;
    }
    ns.wait_group_running("crew").await;

    // The data.
    let base = format!("http://127.0.0.1:{}", operator.status_port);
    let (code, body) = http_get(&format!("{base}/status.json"))
        .await
        .expect("GET /status.json");
    assert_eq!(code, 200, "{body}");
    let page: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(page["agents"], 4, "{page:#}");
    let listed = &page["namespaces"][0];
    assert_eq!(listed["namespace"], ns.name.as_str());
    let phases: Vec<(&str, &str)> = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["phase"].as_str().unwrap()))
        .collect();
    // Those needing attention first.
    assert_eq!(
        phases,
        [
            ("hostile", "BackingOff"),
            ("steady", "Running"),
            ("broke", "Shutdown"),
            ("paused", "Suspended")
        ]
    );
    assert_eq!(listed["agents"][0]["lastFailureMessage"], HOSTILE);
    assert_eq!(page["groups"][0]["tree"]["name"], "crew");
    assert_eq!(page["mostRestarts"].as_array().unwrap().len(), 0);

    // The page, as a browser shows it.
    let dom = rendered(&format!("{base}/status")).await;
    for text in [
        "<title>agent-supervisor status</title>",
        "4 agents at",
        "1 BackingOff",
        ">steady<",
        ">hostile<",
        ">paused<",
        ">broke<",
        ">Suspended<",
        ">Shutdown<",
        "group crew",
    ] {
        assert!(
            dom.contains(text),
            "{text:?} not in the rendered page:\n{dom}"
        );
    }
    // The hostile message is text: escaped in the serialized DOM, and no element came of it.
    assert!(
        dom.contains("Error: &lt;script&gt;document.title=1&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&lt;b&gt;bold&lt;/b&gt; &amp; more"),
        "{dom}"
    );
    let lower = dom.to_lowercase();
    assert!(!lower.contains("<script"), "{dom}");
    assert!(!lower.contains("<img"), "{dom}");
    assert!(!lower.contains("<b>"), "{dom}");

    // Read-only: nothing but GET.
    let post = tokio::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .arg(format!("{base}/status"))
        .output()
        .await
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&post.stdout), "405");
    operator.terminate().await;
}
