//! A fresh namespace per test, deleted when the test ends.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use super::cluster::{admin_config, client};
use super::wait::eventually;

/// A namespace of its own for one test, deleted when dropped.
pub struct TestNamespace {
    pub client: Client,
    pub name: String,
}

impl TestNamespace {
    /// Creates `t-<random>` and waits until pods can be created in it (its default
    /// ServiceAccount exists).
    pub async fn new() -> Self {
        let client = client().await;
        let name = format!("t-{:08x}", rand::random::<u32>());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "labels": { "supervisor.dev/test": "true" } }
        }))
        .unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        eventually(
            Duration::from_secs(30),
            "the namespace's default ServiceAccount",
            || {
                let accounts = accounts.clone();
                async move { accounts.get_opt("default").await.ok().flatten() }
            },
        )
        .await;
        TestNamespace { client, name }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be shutting down: delete from a
        // runtime of our own on another thread.
        let name = self.name.clone();
        let result = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let client = Client::try_from(admin_config().await)?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await?;
                anyhow::Ok(())
            })
        })
        .join();
        if let Ok(Err(e)) = result {
            eprintln!(
                "warning: could not delete test namespace {}: {e}",
                self.name
            );
        }
    }
}
