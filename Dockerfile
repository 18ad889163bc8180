# The agent-supervisor operator image: built with the Rust toolchain, run on distroless as non-root.
#
#   docker build -t ghcr.io/agent-supervisor/agent-supervisor:0.1.0 .

FROM rust:1.95-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin agent-supervisor

# glibc and libgcc, no shell, no package manager; the nonroot tag runs as 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /src/target/release/agent-supervisor /usr/local/bin/agent-supervisor
USER 65532:65532
# /metrics, /healthz and /readyz (--metrics-addr).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/agent-supervisor"]
