{{/*
The chart's name, overridable with nameOverride (for umbrella charts).
*/}}
{{- define "agent-supervisor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name: the release name, plus the chart name unless the release name already
contains it. Truncated to 63 characters, the limit of a DNS label.
*/}}
{{- define "agent-supervisor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "agent-supervisor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object of the release.
*/}}
{{- define "agent-supervisor.labels" -}}
helm.sh/chart: {{ include "agent-supervisor.chart" . }}
{{ include "agent-supervisor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agent-supervisor
{{- end }}

{{/*
Labels that select the operator's pods: never change them, a Deployment's selector is immutable.
*/}}
{{- define "agent-supervisor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agent-supervisor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The operator's ServiceAccount.
*/}}
{{- define "agent-supervisor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agent-supervisor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The leader-election Lease, in the release namespace.
*/}}
{{- define "agent-supervisor.leaseName" -}}
{{- default (include "agent-supervisor.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/*
The operator image, tagged with the chart's appVersion unless image.tag says otherwise.
*/}}
{{- define "agent-supervisor.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
What the operator does in a namespace it supervises, and nothing more. The one list of rules
behind both the ClusterRole (all namespaces) and the Role in each watched namespace, so the two
modes cannot drift apart.
*/}}
{{- define "agent-supervisor.rules" -}}
# Agents, RestartPolicies and AgentGroups: read the spec, write only the status.
- apiGroups: ["supervisor.dev"]
  resources: ["agents", "restartpolicies", "agentgroups"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["supervisor.dev"]
  resources: ["agents/status", "restartpolicies/status", "agentgroups/status"]
  verbs: ["get", "patch", "update"]
# Each attempt of an agent is a pod the operator creates, and deletes to restart or stop it.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete", "deletecollection"]
# An agent's memory: claims are created once and kept across restarts, never deleted by the
# operator (garbage collection removes them with their Agent).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create"]
# The agents' heartbeat Leases: created by the operator, renewed by the agents.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create"]
# Events for `kubectl describe agent`: the operator creates them and patches a repeat's count
# and note (core API); kube's recorder reports an object it cannot read (events.k8s.io).
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.agentRBAC.manage }}
# agentRBAC.manage: each Agent with a heartbeat gets a Role on exactly its Lease, bound to its
# pods' ServiceAccount (one is made for it when the template names none). Kubernetes lets the
# operator grant only what it holds: hence update and patch on leases, which it never uses
# itself. Nothing is deleted: garbage collection removes them with their Agent.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["update", "patch"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "list", "watch", "create"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles"]
  verbs: ["get", "list", "watch", "create"]
# patch: a binding follows its pods' ServiceAccount when the one they run as changes.
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["get", "list", "watch", "create", "patch"]
{{- end }}
{{- if .Values.sandboxes.enabled }}
# sandboxes.enabled: an Agent with spec.sandboxRef supervises an agent-sandbox Sandbox. The
# operator reads it, patches its spec.operatingMode (Suspended to stop, Running to restart) and
# an annotation saying it suspended it; it marks the Sandbox's pod as an attempt with labels and
# annotations (patch) and deletes it to restart it (the Sandbox's controller makes the next).
- apiGroups: ["agents.x-k8s.io"]
  resources: ["sandboxes"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["patch"]
# A Sandbox annotated supervisor.dev/restart-policy gets an Agent made for it: created, its
# restartPolicyRef patched when the annotation changes, deleted when the annotation goes.
- apiGroups: ["supervisor.dev"]
  resources: ["agents"]
  verbs: ["create", "patch", "delete"]
# A Sandbox's pods get their AGENT_* values on the Agent's Lease (named after the Sandbox),
# written by the operator before each attempt.
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["patch"]
{{- end }}
{{- end }}

{{/*
Leader election in the release namespace, as kube-lease-manager does it: it reads the Lease,
creates it when missing (a create names no object, so it cannot be limited by resourceNames),
and takes or renews it with patches.
*/}}
{{- define "agent-supervisor.leaderElectionRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: [{{ include "agent-supervisor.leaseName" . | quote }}]
  verbs: ["get", "patch"]
{{- end }}
