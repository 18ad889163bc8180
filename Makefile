# agent-supervisor: `make demo` shows it working, `make test` proves it.
# Tools are built from pinned Go modules into $(AGENT_SUPERVISOR_CACHE) (default ~/.cache/agent-supervisor).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo

.PHONY: all image tools cluster-up cluster-down cluster-env crds demo test bench-scale fmt fmt-check clippy unit integration sdk-test

all: test

## tools: build etcd, the Kubernetes control plane, kubectl, kwok, helm, agent-sandbox's controller and the real node
## (cached; a no-op when built)
tools:
	@hack/tools.sh

## image: the operator's image without a daemon (buildah): target/image/agent-supervisor.tar,
## localhost/agent-supervisor:dev, loaded into the local control plane's real node (PROFILE=dev: debug build)
image: tools
	@hack/image.sh operator

## cluster-up: start a local control plane; KUBECONFIG is target/cluster/kubeconfig
## (AGENT_SANDBOX=1: with kubernetes-sigs/agent-sandbox's CRDs and controller)
cluster-up: tools
	@hack/cluster.sh up

## cluster-down: stop exactly what cluster-up started and remove its data
cluster-down:
	@hack/cluster.sh down

## cluster-env: shell exports for the local cluster: eval "$$(make -s cluster-env)"
cluster-env:
	@hack/cluster.sh env

## crds: regenerate crds/ and the chart's CRDs from the Rust types
crds:
	@hack/crds.sh

## demo: start a control plane, show the operator at work, tear down (KEEP=1 keeps it running)
demo: tools
	@hack/demo.sh

## test: format, lint, unit, property and integration tests against a real control plane
test: fmt-check clippy tools
	@hack/test.sh

## sdk-test: run the Python SDK's tests (sdk/python: builds its wheel into a pinned venv, ruff, pytest)
sdk-test:
	@hack/sdk.sh

## bench-scale: the operator against a bare controller at scale, each on a control plane of its own
## (N=1000 agents, M=200 crash-looping for STORM=60 seconds; see the README's Performance section)
bench-scale: tools
	@hack/bench-scale.sh

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --all-targets --locked -- -D warnings
