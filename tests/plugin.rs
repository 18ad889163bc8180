//! `kubectl agent`, the plugin binary, against the real API server: agents put in each phase
//! (their status written as the operator writes it, no operator running to change it), the text
//! each command prints about them, the changes its actions make, and its errors. One test runs
//! the real operator and reads a real crash back.

mod support;

use std::path::Path;
use std::process::Command;

use agent_supervisor::api::{Agent, AgentGroup};
use jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use support::TestNamespace;

/// What a run of the plugin printed.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn plugin_with(kubeconfig: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-agent"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run kubectl-agent");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the plugin in `ns`, and expects success.
fn plugin(ns: &TestNamespace, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["-n", &ns.name]);
    let run = plugin_with(support::kubeconfig(), &all);
    assert_eq!(
        run.code, 0,
        "kubectl agent {args:?} failed:\n{}{}",
        run.stdout, run.stderr
    );
    assert!(
        !run.stdout.contains('\x1b'),
        "no colour when not on a terminal:\n{}",
        run.stdout
    );
    run.stdout
}

async fn setup() -> TestNamespace {
    let ns = TestNamespace::new().await;
    support::install_crds(&ns.client).await;
    ns
}

fn at(offset_secs: i64) -> String {
    let t = Timestamp::now() + SignedDuration::from_secs(offset_secs);
    Timestamp::from_second(t.as_second()).unwrap().to_string()
}

/// The absolute form `why` prints next to a relative time.
fn absolute(time: &str) -> String {
    let t: Timestamp = time.parse().unwrap();
    t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn condition(type_: &str, status: &str, reason: &str, message: &str, since: i64) -> Value {
    json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": at(since), "observedGeneration": 1
    })
}

fn failure(reason: &str, exit_code: i32, message: &str, ago: i64) -> Value {
    json!({
        "time": at(-ago), "reason": reason, "class": "Transient", "exitCode": exit_code,
        "message": message, "container": "agent", "ranFor": "3s"
    })
}

/// Creates an agent and writes its status, as the operator would have.
async fn agent_with(ns: &TestNamespace, name: &str, spec: Value, status: Value) -> Agent {
    ns.create_agent(name, spec).await;
    let patch = json!({ "status": status });
    ns.api::<Agent>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("write the status of {name}: {e}"))
}

fn assert_says(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "expected {part:?} in:\n{text}");
    }
}

// The ages asserted are of ten minutes or more, written in whole minutes: they read the same
// for a minute, however slow the machine between writing a status and reading it.
#[tokio::test]
async fn why_explains_each_phase_and_what_to_do() {
    let ns = setup().await;
    let n = ns.name.as_str();
    ns.create_policy(
        "careful",
        json!({
            "backoff": { "type": "Exponential", "initialDelay": "10s", "maxDelay": "5m" },
            "limits": { "maxRestarts": 3, "window": "10m" },
            "circuitBreaker": { "failureThreshold": 5, "openDuration": "5m" },
            "resetAfter": "10m"
        }),
    )
    .await;
    let careful = json!({ "restartPolicyRef": { "name": "careful" } });

    // Running after two restarts.
    agent_with(
        &ns,
        "runner",
        careful.clone(),
        json!({
            "phase": "Running", "podName": "runner-3", "attempt": 3, "restartCount": 2,
            "lastFailure": failure("Error", 1, "connection reset", 600),
            "conditions": [condition("Ready", "True", "PodReady", "pod runner-3", -300)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "runner"]);
    assert_says(
        &why,
        &[
            "Agent runner is running: pod runner-3, attempt 3.",
            "restarted 2 times",
            "Error, exit code 1",
            "\"connection reset\"",
            "Nothing needs doing",
            &format!("kubectl agent restart runner -n {n}"),
        ],
    );

    // Backing off after its third failure in a row.
    let due = at(600);
    agent_with(
        &ns,
        "crasher",
        careful.clone(),
        json!({
            "phase": "BackingOff", "podName": "crasher-4", "attempt": 4, "restartCount": 3,
            "consecutiveFailures": 3, "nextRestartAt": due,
            "lastFailure": failure("Error", 1, "model API returned 500", 5),
            "recentRestarts": [at(-120), at(-60)],
            "restartHistory": [{
                "attempt": 4, "trigger": "Failure", "failedAt": at(-5), "reason": "Error",
                "class": "Transient", "exitCode": 1, "message": "model API returned 500",
                "ranFor": "3s", "backoff": "40s"
            }],
            "conditions": [condition("Ready", "False", "BackingOff", "restart scheduled", -5)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "crasher"]);
    assert_says(
        &why,
        &[
            "Agent crasher crashed: Error, exit code 1, after running 3s",
            "\"model API returned 500\"",
            "its 3rd failure in a row",
            "The operator restarts it in ",
            &absolute(&due),
            "after a backoff of 40s, as attempt 5",
            "2 more failures in a row open its circuit breaker (threshold 5)",
            "used 2 of 3 restarts allowed within 10m",
            &format!("kubectl agent restart crasher -n {n}"),
        ],
    );

    // The breaker is open.
    let probe = at(300);
    agent_with(
        &ns,
        "tripped",
        careful.clone(),
        json!({
            "phase": "CircuitOpen", "attempt": 5, "restartCount": 4, "consecutiveFailures": 5,
            "lastFailure": failure("OOMKilled", 137, "", 900),
            "circuitBreaker": { "state": "Open", "trips": 2, "openedAt": at(-900), "halfOpenAt": probe },
            "conditions": [
                condition("Ready", "False", "CircuitOpen", "circuit breaker open", -900),
                condition("CircuitBreakerOpen", "True", "Tripped", "opened", -900),
            ],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "tripped"]);
    assert_says(
        &why,
        &[
            "failed 5 times in a row, most recently OOMKilled, exit code 137",
            "its circuit breaker opened 15m ago",
            "opened 2 times without recovering",
            "one probe restart through in ",
            &absolute(&probe),
            "If the probe runs for 10m, the breaker closes",
            "close the breaker and restart it now",
            &format!("kubectl agent reset tripped -n {n}"),
        ],
    );

    // Held by an outage of its policy.
    agent_with(
        &ns,
        "caller",
        careful.clone(),
        json!({
            "phase": "CircuitOpen", "attempt": 1, "restartCount": 0,
            "lastFailure": failure("Error", 1, "provider: 503", 20),
            "conditions": [
                condition("Ready", "False", "Outage",
                    "held by RestartPolicy careful's outage 0123456789abcdef: next probe at 2026-11-22T15:00:00Z", -20),
                condition("CircuitBreakerOpen", "True", "Outage", "held", -20),
            ],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "caller"]);
    assert_says(
        &why,
        &[
            "Agent caller failed with Error, exit code 1",
            "treats it as an outage of something they share",
            "Its restart is held: held by RestartPolicy careful's outage 0123456789abcdef: next probe at 2026-11-22T15:00:00Z.",
            "count toward no limit",
            &format!("kubectl agent restart caller -n {n}"),
        ],
    );
    let list = plugin(&ns, &["list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("caller ") && l.contains("held by outage")),
        "{list}"
    );

    // Half-open: the probe runs.
    agent_with(
        &ns,
        "probing",
        careful.clone(),
        json!({
            "phase": "Running", "podName": "probing-6", "attempt": 6, "restartCount": 5,
            "consecutiveFailures": 5,
            "circuitBreaker": { "state": "HalfOpen", "trips": 1, "openedAt": at(-400) },
            "conditions": [condition("Ready", "True", "PodReady", "pod probing-6", -60)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "probing"]);
    assert_says(
        &why,
        &[
            "is running: pod probing-6",
            "This run is its circuit breaker's probe: if it keeps running for 10m, the breaker closes",
        ],
    );

    // Stopped by the restart limit.
    agent_with(
        &ns,
        "limited",
        careful.clone(),
        json!({
            "phase": "Stopped", "attempt": 4, "restartCount": 3, "consecutiveFailures": 4,
            "lastFailure": failure("Error", 2, "bad config", 900),
            "conditions": [condition("Ready", "False", "RestartLimitExceeded", "more than 3 restarts", -900)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "limited"]);
    assert_says(
        &why,
        &[
            "Agent limited was stopped 15m ago: it was restarted more than 3 times within 10m, the limit of RestartPolicy careful.",
            "\"bad config\"",
            "will not restart it by itself",
            &format!("kubectl agent reset limited -n {n}"),
        ],
    );

    // Shut down for economic reasons, by someone else.
    agent_with(
        &ns,
        "broke",
        json!({}),
        json!({
            "phase": "Shutdown", "attempt": 2,
            "shutdown": { "type": "Economic", "reason": "budget exhausted", "at": at(-3600), "source": "economy-service" },
            "conditions": [condition("Ready", "False", "Shutdown", "left alone", -3600)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "broke"]);
    assert_says(
        &why,
        &[
            "Agent broke shut down 60m ago for an economic reason: budget exhausted, recorded by economy-service.",
            "a decision to stop, not a crash",
            "leaves it alone",
            &format!(
                r#"kubectl patch agent broke -n {n} --subresource=status --type=merge -p '{{"status":{{"shutdown":null}}}}'"#
            ),
        ],
    );

    // Suspended.
    agent_with(
        &ns,
        "paused",
        json!({ "suspend": true }),
        json!({
            "phase": "Suspended", "attempt": 1,
            "conditions": [condition("Ready", "False", "Suspended", "spec.suspend is true", -10)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "paused"]);
    assert_says(
        &why,
        &[
            "Agent paused is suspended",
            &format!("kubectl agent resume paused -n {n}"),
        ],
    );

    // Its policy does not exist.
    agent_with(
        &ns,
        "orphan",
        json!({ "restartPolicyRef": { "name": "nowhere" } }),
        json!({
            "conditions": [condition("PolicyResolved", "False", "PolicyNotFound", "RestartPolicy nowhere not found", -10)],
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "orphan"]);
    assert_says(
        &why,
        &[
            &format!(
                "names RestartPolicy nowhere in spec.restartPolicyRef, and no such policy exists in namespace {n}, so the operator starts no pod"
            ),
            "as soon as RestartPolicy nowhere exists",
            &format!("kubectl edit agent orphan -n {n}"),
        ],
    );

    // Every explanation is also data.
    let json: Value =
        serde_json::from_str(&plugin(&ns, &["why", "crasher", "-o", "json"])).expect("JSON");
    assert_eq!(json["phase"], "BackingOff");
    assert_eq!(
        json["command"],
        format!("kubectl agent restart crasher -n {n}")
    );
    assert!(json["next"].as_str().unwrap().contains("restarts it in"));

    // Pending after a failure: the replacement is not recorded running until it has stayed up.
    agent_with(
        &ns,
        "replaced",
        careful.clone(),
        json!({
            "phase": "Pending", "podName": "replaced-2", "attempt": 2, "restartCount": 1,
            "consecutiveFailures": 1, "lastFailure": failure("Error", 1, "boom", 3),
        }),
    )
    .await;
    let why = plugin(&ns, &["why", "replaced"]);
    assert_says(
        &why,
        &[
            "Agent replaced's pod replaced-2 (attempt 2",
            "is not running yet. After a failure, a replacement counts as running once it has stayed up 5s.",
            "the startupTimeout of RestartPolicy careful",
            &format!("kubectl describe pod replaced-2 -n {n}"),
        ],
    );
}

#[tokio::test]
async fn group_members_are_explained_and_drawn_as_a_tree() {
    let ns = setup().await;
    let group: AgentGroup = serde_json::from_value(json!({
        "apiVersion": "supervisor.dev/v1alpha1", "kind": "AgentGroup",
        "metadata": { "name": "crew" },
        "spec": { "strategy": "OneForAll", "members": [{ "agent": "planner" }, { "agent": "tools" }] }
    }))
    .unwrap();
    ns.api::<AgentGroup>()
        .create(&PostParams::default(), &group)
        .await
        .expect("create group");
    let status = json!({ "status": {
        "phase": "Restarting", "ready": "1/2", "restartCount": 1,
        "members": [
            { "name": "planner", "kind": "Agent", "phase": "Running" },
            { "name": "tools", "kind": "Agent", "phase": "BackingOff", "waitingFor": "planner" }
        ]
    }});
    ns.api::<AgentGroup>()
        .patch_status("crew", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write group status");
    agent_with(
        &ns,
        "planner",
        json!({}),
        json!({
            "phase": "Running", "podName": "planner-1", "attempt": 1, "group": { "name": "crew" },
            "conditions": [condition("Ready", "True", "PodReady", "pod planner-1", -60)],
        }),
    )
    .await;
    agent_with(
        &ns,
        "tools",
        json!({}),
        json!({
            "phase": "BackingOff", "attempt": 2, "restartCount": 1, "consecutiveFailures": 1,
            "nextRestartAt": at(-2), "group": { "name": "crew" },
            "lastFailure": failure("Error", 3, "tool server crashed", 10),
            "conditions": [condition("Ready", "False", "WaitingForGroup",
                "waiting for planner to be running (group crew starts its members in order)", -10)],
        }),
    )
    .await;
    agent_with(
        &ns,
        "loner",
        json!({}),
        json!({ "phase": "Pending", "attempt": 1, "podName": "loner-1" }),
    )
    .await;

    let why = plugin(&ns, &["why", "tools"]);
    assert_says(
        &why,
        &[
            "Agent tools crashed: Error, exit code 3",
            "Its group decides when: waiting for planner to be running (group crew starts its members in order).",
            "It is a member of AgentGroup crew (one-for-all: a crash restarts every member)",
        ],
    );

    let tree = plugin(&ns, &["tree"]);
    let lines: Vec<&str> = tree.lines().collect();
    assert!(
        lines[0].starts_with("group/crew  OneForAll  Restarting  ready 1/2  1 restart"),
        "{tree}"
    );
    assert!(
        lines[1].starts_with("├── planner  Running  0 restarts"),
        "{tree}"
    );
    assert!(
        lines[2].starts_with("└── tools  BackingOff  1 restart"),
        "{tree}"
    );
    assert!(lines[2].ends_with("(waiting for planner)"), "{tree}");
    assert!(tree.contains("Not in any group (1): loner"), "{tree}");

    let json: Value = serde_json::from_str(&plugin(&ns, &["tree", "crew", "-o", "json"])).unwrap();
    assert_eq!(json[0]["name"], "crew");
    assert_eq!(json[0]["members"][1]["name"], "tools");
    assert_eq!(json[0]["members"][1]["phase"], "BackingOff");

    let run = plugin_with(support::kubeconfig(), &["tree", "nope", "-n", &ns.name]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("agentgroup \"nope\" not found"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn list_history_and_top_show_the_restarts() {
    let ns = setup().await;
    let mut history = Vec::new();
    // Attempts 1..=3 each failed after running a while; the fourth runs now.
    for attempt in (1..=3).rev() {
        let failed = -100 * (4 - attempt);
        history.push(json!({
            "attempt": attempt, "trigger": "Failure", "failedAt": at(failed), "reason": "Error",
            "class": "Transient", "exitCode": attempt, "message": format!("failure number {attempt}"),
            "ranFor": "20s", "backoff": "10s", "restartedAt": at(failed + 10)
        }));
    }
    agent_with(
        &ns,
        "flaky",
        json!({}),
        json!({
            "phase": "Running", "podName": "flaky-4", "attempt": 4, "restartCount": 3,
            "lastFailure": failure("Error", 3, "failure number 3", 100),
            "restartHistory": history,
        }),
    )
    .await;
    let due = at(42);
    agent_with(
        &ns,
        "waiting",
        json!({}),
        json!({
            "phase": "BackingOff", "attempt": 1, "restartCount": 0, "nextRestartAt": due,
            "lastFailure": failure("OOMKilled", 137, "", 1),
        }),
    )
    .await;
    agent_with(
        &ns,
        "calm",
        json!({}),
        json!({ "phase": "Running", "attempt": 1, "podName": "calm-1" }),
    )
    .await;

    let list = plugin(&ns, &["list"]);
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{list}");
    assert_says(
        lines[0],
        &[
            "PHASE",
            "RESTARTS",
            "BREAKER",
            "LAST FAILURE",
            "NEXT RESTART",
            "AGE",
        ],
    );
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{list}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("flaky")[1..5],
        ["Running", "3", "Closed", "Error"],
        "{list}"
    );
    assert_eq!(
        row("waiting")[1..5],
        ["BackingOff", "0", "Closed", "OOMKilled"],
        "{list}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("waiting") && (l.contains("in 4") || l.contains("in 3"))),
        "{list}"
    );
    assert_eq!(row("calm")[1..5], ["Running", "0", "Closed", "-"], "{list}");

    let rows: Value = serde_json::from_str(&plugin(&ns, &["list", "-o", "json"])).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3);
    assert_eq!(rows[1]["name"], "flaky");
    assert_eq!(rows[1]["lastFailureMessage"], "failure number 3");
    let yaml: Value = serde_yaml::from_str(&plugin(&ns, &["list", "-o", "yaml"])).unwrap();
    assert_eq!(yaml, rows);
    let all = plugin(&ns, &["list", "-A"]);
    assert!(
        all.lines().next().unwrap().starts_with("NAMESPACE"),
        "{all}"
    );
    assert!(
        all.lines()
            .any(|l| l.starts_with(&ns.name) && l.contains("flaky")),
        "{all}"
    );
    let wide = plugin(&ns, &["list", "-o", "wide"]);
    assert_says(
        &wide,
        &["POD", "GROUP", "MESSAGE", "flaky-4", "failure number 3"],
    );

    let history = plugin(&ns, &["history", "flaky"]);
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines[0].starts_with("Agent flaky: Running, attempt 4, 3 restarts"),
        "{history}"
    );
    assert_says(
        lines[1],
        &[
            "ATTEMPT", "STARTED", "RAN", "ENDED", "BACKOFF", "RESTART", "TIMELINE",
        ],
    );
    // One line per attempt, oldest first, the running one last.
    for (line, attempt) in lines[2..6].iter().zip(1..) {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], attempt.to_string(), "{history}");
        if attempt < 4 {
            assert!(
                line.contains(&format!("Error (exit {attempt})")),
                "{history}"
            );
            assert!(
                line.contains("20s") && line.contains("10s") && line.contains("Failure"),
                "{history}"
            );
            assert!(
                line.contains(&format!("failure number {attempt}")),
                "{history}"
            );
            assert!(
                line.contains('█') && line.contains('·'),
                "a run and a wait:\n{history}"
            );
        } else {
            assert!(line.contains("running") && line.contains('█'), "{history}");
        }
    }
    assert!(lines[6].starts_with("Timeline: the last "), "{history}");
    let attempts: Value =
        serde_json::from_str(&plugin(&ns, &["history", "flaky", "-o", "json"])).unwrap();
    assert_eq!(attempts.as_array().unwrap().len(), 4);
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[3]["current"], true);

    let top = plugin(&ns, &["top"]);
    let lines: Vec<&str> = top.lines().collect();
    assert_says(lines[0], &["NAME", "LAST HOUR", "RESTARTS"]);
    assert!(lines[1].starts_with("flaky"), "{top}");
    assert_eq!(
        lines.len(),
        2,
        "agents that never restarted are left out:\n{top}"
    );
}

#[tokio::test]
async fn actions_write_what_kubectl_would() {
    let ns = setup().await;
    agent_with(
        &ns,
        "a",
        json!({}),
        json!({ "phase": "Running", "attempt": 1, "podName": "a-1" }),
    )
    .await;
    let get = || async { ns.api::<Agent>().get("a").await.unwrap() };
    let annotation = |agent: &Agent, key: &str| {
        agent
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key).cloned())
    };

    let out = plugin(&ns, &["restart", "a"]);
    assert_eq!(out, "agent/a restart requested\n");
    let first = annotation(&get().await, "supervisor.dev/restart-requested-at")
        .expect("restart annotation");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    plugin(&ns, &["restart", "a"]);
    let second = annotation(&get().await, "supervisor.dev/restart-requested-at").unwrap();
    assert_ne!(first, second, "each request is a new value, acted on once");

    plugin(&ns, &["reset", "a"]);
    assert!(annotation(&get().await, "supervisor.dev/reset-requested-at").is_some());

    let out = plugin(&ns, &["suspend", "a"]);
    assert!(out.starts_with("agent/a suspended"), "{out}");
    assert!(get().await.spec.suspend);
    let out = plugin(&ns, &["restart", "a"]);
    assert!(
        out.contains("it is suspended"),
        "a restart of a suspended agent says it waits:\n{out}"
    );
    plugin(&ns, &["resume", "a"]);
    assert!(!get().await.spec.suspend);
}

#[tokio::test]
async fn errors_are_one_line_with_what_to_do_and_a_failing_exit() {
    let ns = setup().await;
    let one_line = |run: &Run| {
        assert_eq!(run.code, 1, "exit code:\n{}{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        assert_eq!(run.stderr.lines().count(), 1, "one line:\n{}", run.stderr);
        assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
        run.stderr.clone()
    };

    // No such agent.
    for command in ["why", "history", "restart", "suspend"] {
        let run = plugin_with(support::kubeconfig(), &[command, "ghost", "-n", &ns.name]);
        let err = one_line(&run);
        assert_says(
            &err,
            &[
                "agent \"ghost\" not found in namespace",
                &format!("kubectl agent list -n {}", ns.name),
            ],
        );
    }

    // No cluster: a kubeconfig naming a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dead = std::env::temp_dir().join(format!("{}-dead.kubeconfig", ns.name));
    std::fs::write(
        &dead,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: x\n"
        ),
    )
    .unwrap();
    let err = one_line(&plugin_with(&dead, &["list"]));
    assert_says(
        &err,
        &[
            &format!("cannot reach the cluster at https://127.0.0.1:{port}/"),
            "--context",
        ],
    );
    let err = one_line(&plugin_with(&dead, &["list", "--context", "elsewhere"]));
    assert_says(&err, &["no usable kubeconfig", "elsewhere"]);

    // No permission: a ServiceAccount with no role.
    let account: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({ "metadata": { "name": "nobody" } })).unwrap();
    ns.api::<k8s_openapi::api::core::v1::ServiceAccount>()
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let token = support::service_account_token(&ns.client, &ns.name, "nobody").await;
    let admin = std::fs::read_to_string(support::kubeconfig()).unwrap();
    let mut config: serde_yaml::Value = serde_yaml::from_str(&admin).unwrap();
    for user in config["users"].as_sequence_mut().unwrap() {
        user["user"] = serde_yaml::to_value(json!({ "token": token })).unwrap();
    }
    let nobody = std::env::temp_dir().join(format!("{}-nobody.kubeconfig", ns.name));
    std::fs::write(&nobody, serde_yaml::to_string(&config).unwrap()).unwrap();
    let err = one_line(&plugin_with(&nobody, &["list", "-n", &ns.name]));
    assert_says(
        &err,
        &[
            &format!("you may not list agents in namespace {}", ns.name),
            "kubectl auth can-i list agents.supervisor.dev",
        ],
    );
    let err = one_line(&plugin_with(&nobody, &["why", "a", "-n", &ns.name]));
    assert_says(&err, &["you may not get agents"]);

    // Bad usage is clap's: exit code 2 and a usage line.
    let run = plugin_with(support::kubeconfig(), &["why"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("Usage: kubectl agent why"),
        "{}",
        run.stderr
    );
    let _ = std::fs::remove_file(dead);
    let _ = std::fs::remove_file(nobody);
}

#[tokio::test]
async fn why_reads_a_real_crash_from_the_operator() {
    let ns = setup().await;
    let _operator = support::Operator::start(&ns.name).await;
    ns.create_policy(
        "default",
        json!({ "backoff": { "type": "Linear", "initialDelay": "10m", "maxDelay": "30m", "jitter": 0 } }),
    )
    .await;
    ns.create_agent("real", json!({})).await;
    ns.wait_running("real-1").await;
    ns.terminate("real-1", 7, "Error", "the planner lost its context")
        .await;
    ns.wait_status("real", "backing off", |s| {
        s.phase == Some(agent_supervisor::api::Phase::BackingOff)
    })
    .await;
    let why = plugin(&ns, &["why", "real"]);
    assert_says(
        &why,
        &[
            "Agent real crashed: Error, exit code 7",
            "\"the planner lost its context\"",
            "The operator restarts it in ",
            "after a backoff of 10m, as attempt 2",
            "kubectl agent restart real",
        ],
    );
    assert!(
        why.contains("restarts it in 9m") || why.contains("restarts it in 10m"),
        "{why}"
    );
    let history = plugin(&ns, &["history", "real"]);
    let line = history.lines().nth(2).unwrap_or_default();
    assert!(
        line.starts_with('1') && line.contains("Error (exit 7)") && line.contains("pending"),
        "{history}"
    );
}
