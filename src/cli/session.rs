//! A connection to the cluster for one command: the reads it makes, and the annotations and
//! patches it writes (only what `kubectl annotate` and `kubectl patch` would).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use super::{CliError, Result, Target};
use crate::api::{Agent, AgentGroup, RestartPolicy};
use crate::supervise::PolicyResolution;
use crate::view::why;

/// A connection to the cluster, and the namespace the command is about.
pub(super) struct Session {
    pub(super) client: Client,
    pub(super) namespace: String,
    pub(super) all: bool,
    pub(super) server: String,
}

impl Session {
    pub(super) async fn connect(target: &Target) -> Result<Session> {
        let options = KubeConfigOptions {
            context: target.context.clone(),
            cluster: None,
            user: None,
        };
        let config = match &target.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                    CliError(format!(
                        "cannot read kubeconfig {}: {e}",
                        path.display()
                    ))
                })?;
                Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => Config::from_kubeconfig(&options).await,
        }
        .map_err(|e| {
            CliError(format!(
                "no usable kubeconfig: {e}; pass --kubeconfig FILE or set KUBECONFIG, and --context to pick a context"
            ))
        })?;
        let server = config.cluster_url.to_string();
        let namespace = target
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let mut config = config;
        config.connect_timeout = Some(std::time::Duration::from_secs(10));
        config.read_timeout = Some(std::time::Duration::from_secs(30));
        let client = Client::try_from(config)
            .map_err(|e| CliError(format!("cannot make a client for {server}: {e}")))?;
        Ok(Session {
            client,
            namespace,
            all: target.all_namespaces,
            server,
        })
    }

    pub(super) fn scope_words(&self) -> String {
        if self.all {
            "in any namespace".into()
        } else {
            format!("in namespace {}", self.namespace)
        }
    }

    pub(super) fn none_found(&self, what: &str) -> String {
        format!("No {what} found {}.\n", self.scope_words())
    }

    /// The namespaces to list in: every one (`None`) with `-A` and no group named, else this one.
    pub(super) async fn namespaces_with_groups(
        &self,
        group: Option<&str>,
    ) -> Result<Vec<Option<String>>> {
        if self.all && group.is_none() {
            Ok(vec![None])
        } else {
            Ok(vec![Some(self.namespace.clone())])
        }
    }

    pub(super) fn api<K>(&self, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    pub(super) async fn agents(&self, selector: Option<&str>) -> Result<Vec<Agent>> {
        let ns = (!self.all).then_some(self.namespace.as_str());
        self.agents_in(ns, selector).await
    }

    pub(super) async fn agents_in(
        &self,
        ns: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<Agent>> {
        let mut params = ListParams::default();
        if let Some(selector) = selector {
            params = params.labels(selector);
        }
        let mut agents = self
            .api::<Agent>(ns)
            .list(&params)
            .await
            .map_err(|e| self.explain(e, "list", "agents", None, ns))?
            .items;
        agents.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        Ok(agents)
    }

    pub(super) async fn groups_in(&self, ns: Option<&str>) -> Result<Vec<AgentGroup>> {
        Ok(self
            .api::<AgentGroup>(ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| self.explain(e, "list", "agentgroups", None, ns))?
            .items)
    }

    pub(super) async fn agent(&self, name: &str) -> Result<Agent> {
        self.api::<Agent>(Some(&self.namespace))
            .get(name)
            .await
            .map_err(|e| self.explain(e, "get", "agents", Some(name), Some(&self.namespace)))
    }

    pub(super) async fn group(&self, name: &str) -> Result<AgentGroup> {
        self.api::<AgentGroup>(Some(&self.namespace))
            .get(name)
            .await
            .map_err(|e| self.explain(e, "get", "agentgroups", Some(name), Some(&self.namespace)))
    }

    /// How the agent's policy resolves, as the operator resolves it.
    pub(super) async fn policy_of(&self, agent: &Agent) -> Result<PolicyResolution> {
        let api = self.api::<RestartPolicy>(Some(&self.namespace));
        let named = agent
            .spec
            .restart_policy_ref
            .as_ref()
            .map(|r| r.name.clone());
        let name = named.clone().unwrap_or_else(|| "default".to_string());
        match api.get_opt(&name).await {
            Ok(Some(policy)) => Ok(match named {
                Some(name) => PolicyResolution::Named(name, policy.spec),
                None => PolicyResolution::NamespaceDefault(policy.spec),
            }),
            Ok(None) => Ok(match named {
                Some(name) => PolicyResolution::Missing(name),
                None => PolicyResolution::BuiltIn,
            }),
            Err(e) => Err(self.explain(
                e,
                "get",
                "restartpolicies",
                Some(&name),
                Some(&self.namespace),
            )),
        }
    }

    /// The RestartPolicies in scope, for their budgets; none if they cannot be read (a person
    /// may read Agents and not policies: the list does without budgets).
    pub(super) async fn policies(&self) -> Vec<RestartPolicy> {
        let ns = (!self.all).then_some(self.namespace.as_str());
        match self
            .api::<RestartPolicy>(ns)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list.items,
            Err(_) => Vec::new(),
        }
    }

    /// The agent's Events; none if they cannot be read (the explanation does without them).
    pub(super) async fn events_of(&self, agent: &Agent) -> Vec<why::EventFact> {
        let uid = agent.metadata.uid.clone().unwrap_or_default();
        let params = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
        let Ok(events) = self.api::<Event>(Some(&self.namespace)).list(&params).await else {
            return Vec::new();
        };
        events
            .items
            .into_iter()
            .filter_map(|e| {
                let last = e
                    .series
                    .as_ref()
                    .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
                    .or(e.last_timestamp.as_ref().map(|t| t.0))
                    .or(e.event_time.as_ref().map(|t| t.0))
                    .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
                Some(why::EventFact {
                    reason: e.reason.unwrap_or_default(),
                    message: e.message.unwrap_or_default(),
                    warning: e.type_.as_deref() == Some("Warning"),
                    last,
                })
            })
            .collect()
    }

    /// Sets `annotation` to the current time, so each request is a new value the operator acts
    /// on once.
    pub(super) async fn annotate(&self, name: &str, annotation: &str) -> Result<Agent> {
        let value = Timestamp::now().to_string();
        let patch = serde_json::json!({ "metadata": { "annotations": { annotation: value } } });
        self.patch(name, &patch).await
    }

    pub(super) async fn suspend(&self, name: &str, suspend: bool) -> Result<Agent> {
        let patch = serde_json::json!({ "spec": { "suspend": suspend } });
        self.patch(name, &patch).await
    }

    pub(super) async fn patch(&self, name: &str, patch: &serde_json::Value) -> Result<Agent> {
        let params = PatchParams {
            field_manager: Some("kubectl-agent".into()),
            ..PatchParams::default()
        };
        self.api::<Agent>(Some(&self.namespace))
            .patch(name, &params, &Patch::Merge(patch))
            .await
            .map_err(|e| self.explain(e, "patch", "agents", Some(name), Some(&self.namespace)))
    }

    /// A failed request as one line that says what to do.
    pub(super) fn explain(
        &self,
        error: kube::Error,
        verb: &str,
        resource: &str,
        name: Option<&str>,
        ns: Option<&str>,
    ) -> CliError {
        let kind = resource
            .trim_end_matches('s')
            .replace("restartpolicie", "restartpolicy");
        let place = match ns {
            Some(ns) => format!("in namespace {ns}"),
            None => "in any namespace".into(),
        };
        match error {
            kube::Error::Api(status) if status.code == 404 => {
                if status
                    .message
                    .contains("could not find the requested resource")
                {
                    CliError(format!(
                        "the cluster at {} has no {resource}.supervisor.dev API: install agent-supervisor's CRDs (the Helm chart, or kubectl apply -f crds/)",
                        self.server
                    ))
                } else {
                    not_found(&kind, name.unwrap_or_default(), ns.unwrap_or_default())
                }
            }
            kube::Error::Api(status) if status.code == 403 => CliError(format!(
                "you may not {verb} {resource} {place} (forbidden: {}); ask a cluster admin for access, and check with: kubectl auth can-i {verb} {resource}.supervisor.dev{}",
                status.message,
                ns.map(|ns| format!(" -n {ns}"))
                    .unwrap_or_else(|| " -A".into())
            )),
            kube::Error::Api(status) if status.code == 401 => CliError(format!(
                "the cluster at {} refused your credentials (unauthorized); log in again, or pick another --context or --kubeconfig",
                self.server
            )),
            kube::Error::Api(status) => CliError(format!(
                "cannot {verb} {resource} {place}: {} ({})",
                status.message, status.reason
            )),
            other => CliError(format!(
                "cannot reach the cluster at {}: {}; is it running, and are --context and --kubeconfig the ones you meant?",
                self.server,
                root_cause(&other)
            )),
        }
    }
}

pub(super) fn not_found(kind: &str, name: &str, ns: &str) -> CliError {
    let list = if kind == "agentgroup" {
        format!("kubectl agent tree -n {ns}")
    } else {
        format!("kubectl agent list -n {ns}")
    };
    CliError(format!(
        "{kind} {name:?} not found in namespace {ns}; see what is there with: {list}"
    ))
}

/// The innermost error of a chain: "connection refused" rather than "client error (Connect)".
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}
