//! The plugin's errors: no such agent, no cluster, no permission, bad usage.

use kube::api::PostParams;
use serde_json::json;

use crate::support;
use crate::{Run, assert_says, plugin_with, setup};

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
