//! The operator, run inside the test process against the test control plane.

use kube::Client;

use super::cluster::admin_config;

/// The operator, running in this test process and watching only `namespace`. Stopped on drop.
pub struct Operator {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// The user agent of the in-process operator's requests, so audit logs tell them apart.
pub const OPERATOR_USER_AGENT: &str = "agent-supervisor-test-operator";

impl Operator {
    pub async fn start(namespace: &str) -> Operator {
        Operator::start_with(Operator::admin_client().await, namespace)
    }

    pub fn start_with(client: Client, namespace: &str) -> Operator {
        let config = agent_supervisor::controller::Config {
            namespaces: vec![namespace.to_string()],
            ..Default::default()
        };
        Operator::start_with_config(client, config)
    }

    /// An operator that writes each status change at once (a status interval of 100 ms) and
    /// sends each Event as it comes: for tests that watch states a busy agent passes through
    /// within an interval, which the default one merges.
    pub async fn start_prompt(namespace: &str) -> Operator {
        Operator::start_with_config(Operator::admin_client().await, prompt(namespace))
    }

    /// Stops the operator gracefully, as SIGTERM does, and waits until it has stopped.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops the operator at once, as a crash would: no graceful shutdown.
    pub async fn kill(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The configuration of `Operator::start_prompt`.
pub fn prompt(namespace: &str) -> agent_supervisor::controller::Config {
    agent_supervisor::controller::Config {
        namespaces: vec![namespace.to_string()],
        status_interval: std::time::Duration::from_millis(100),
        event_limit: agent_supervisor::controller::budget::BudgetConfig {
            rate: 100.0,
            burst: 100,
        },
        ..Default::default()
    }
}

/// The in-process operator with a configuration of the test's own (its metrics, its readiness).
impl Operator {
    /// A client for the in-process operator: the cluster admin, with the operator's user agent.
    pub async fn admin_client() -> Client {
        let mut config = admin_config().await;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(OPERATOR_USER_AGENT),
        ));
        Client::try_from(config).expect("operator client")
    }

    /// Starts the operator with `client` and `config` as given (its namespaces included).
    pub fn start_with_config(
        client: Client,
        config: agent_supervisor::controller::Config,
    ) -> Operator {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(agent_supervisor::controller::run(
            client,
            config,
            async move {
                let _ = stopped.await;
            },
        ));
        Operator {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Whether the operator still runs: it was neither stopped nor has it ended on its own.
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|task| !task.is_finished())
    }
}
