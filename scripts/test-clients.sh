#!/usr/bin/env bash
# Tests the Python, Node.js, Go and Java clients (clients/) against the real server binaries.
#
# Installs what the tests need, idempotently (only what is missing or changed):
#   redis-server                      from apt (when missing)
#   a Python venv                     ${XDG_CACHE_HOME:-$HOME/.cache}/adk/python-venv, with the pinned
#                                     clients/python/requirements-dev.txt (scripts/setup-python.sh)
#   another Python venv               ${XDG_CACHE_HOME:-$HOME/.cache}/adk/python-wheel-venv, for the
#                                     Python client's wheel and its runtime dependencies only
#   clients/node/node_modules         npm ci, from the committed package-lock.json (its `prepare`
#                                     generates the TypeScript from proto/ and builds dist/)
#   chromium, and playwright-core     apt (when missing) and npm, into ${XDG_CACHE_HOME:-$HOME/.cache}/adk/adk-web-node,
#                                     for the `adk web` dev-UI test (scripts/setup-adk-web.sh) and the
#                                     example chat page's test (clients/node/test/web-chat.test.js)
#   Go, protoc and grpc-java          Debian 12's packages, from apt (when missing), and the go.mod that
#                                     builds clients/go offline from their sources
#                                     (scripts/setup-go-java.sh; no Go module proxy, no Maven)
# then generates the Python stubs from proto/ and runs pytest; type-checks the Python client
# (mypy --strict), builds its sdist and wheel (python -m build) and calls a server from the
# wheel installed into a fresh venv; type-checks the Node client
# (tsc --noEmit), bundles the example chat page (examples/web), runs `node --test`, packs the
# client (npm pack) and imports it from a fresh project; generates, vets and tests the Go client
# (go generate, gofmt, go vet, go test); builds and tests the Java client (clients/java/build.sh,
# then its ClientTests); finally runs each client's quickstart as its README writes it, twice
# against one server.
#
# The binaries are not built here: run `cargo build --workspace --bins` first (they are
# looked up in ${CARGO_TARGET_DIR:-target}/debug). The tests start and stop their own
# servers (adk-server, and redis-server + the three separate binaries) on free ports.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

die() { echo "test-clients.sh: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- the server binaries ------------------------------------------------------------
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$root/$target ;; esac
export ADK_BIN_DIR=$target/debug
for bin in adk-server adk-session-server adk-artifact-server adk-runner-server; do
  [ -x "$ADK_BIN_DIR/$bin" ] || die "$ADK_BIN_DIR/$bin not found: run cargo build --workspace --bins first"
done

# --- system tools -------------------------------------------------------------------
if ! command -v redis-server >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi
command -v node >/dev/null && command -v npm >/dev/null || die "Node.js 20 or newer (with npm) is required"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || die "node is $(node --version); 20 or newer is required"

# --- Python: venv with the pinned packages, and the stubs ------------------------------
./scripts/setup-python.sh
cache=${XDG_CACHE_HOME:-$HOME/.cache}/adk
venv=$cache/python-venv

# --- the dev-UI test's browser: system chromium, driven by playwright-core from npm ------
./scripts/setup-adk-web.sh

# --- Go and Java: Debian's packages, and the offline go.mod --------------------------------
go_env=$(./scripts/setup-go-java.sh)

# --- Node: the locked dependencies --------------------------------------------------
# npm ci installs exactly package-lock.json (it reuses npm's cache, so a rerun is quick).
(cd clients/node && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)

# --- the quickstarts, as the READMEs write them ---------------------------------------
# Runs the ```bash quickstart block of a README twice against one adk-server, and checks
# that both runs tell the whole tour. Only this differs from a user at a terminal:
#   - the line marked "# in another terminal" (cargo run … adk-server -- ARGS) is run here
#     as the built binary with ARGS, on a free port that stands in for localhost:50051,
#     with its metrics endpoint off (the machine may run other servers);
#   - the lines marked "# once" (making a venv and installing the pinned packages into it)
#     are the venv above, made from the same requirements file, activated;
#   - every other line runs as written, from the repository root, in one bash -e;
#   - the further arguments are generated paths a fresh clone lacks (git ignores them):
#     they are deleted first, so the block has to make them itself.
quickstart_servers=()
stop_quickstart_servers() {
  local pid
  for pid in "${quickstart_servers[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_quickstart_servers EXIT
# Starts adk-server with ARGS on a free port (set in $port), its metrics endpoint off, logging
# to LOG; returns once the port accepts a connection (15 s at most). Stopped on exit.
start_adk_server() {
  local log=$1
  shift
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$ADK_BIN_DIR/adk-server" "$@" --listen "127.0.0.1:$port" --metrics-listen off >"$log" 2>&1 &
  quickstart_servers+=($!)
  for _ in $(seq 150); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
}
run_quickstart() {
  local readme=$1 block server_line args port steps out run
  shift
  rm -rf "$@"
  block=$(awk '/^```/ { inside = ($0 ~ /^```bash quickstart[[:space:]]*$/) ? !inside : 0; next } inside' "$readme")
  [ -n "$block" ] || die "$readme has no \`\`\`bash quickstart block"
  server_line=$(grep -e '# in another terminal' <<<"$block") || die "$readme: no line starts the server"
  case $server_line in
    "cargo run --profile quick --bin adk-server -- "*) ;;
    *) die "$readme: the server line is not \`cargo run --profile quick --bin adk-server -- …\`: teach this script" ;;
  esac
  args=${server_line#cargo run --profile quick --bin adk-server -- }
  args=${args%%#*}
  # shellcheck disable=SC2086 # ARGS are words, as in the README
  start_adk_server "$cache/quickstart-server.log" $args
  steps=$(grep -v -e '# in another terminal' -e '# once' <<<"$block" | sed "s/localhost:50051/127.0.0.1:$port/g")
  for run in 1 2; do
    echo "   run $run: $(tr '\n' ';' <<<"$steps")"
    if ! out=$(PATH="$venv/bin:$PATH" VIRTUAL_ENV=$venv bash -e -c "$steps" 2>&1); then
      echo "$out" >&2
      return 1
    fi
    for expected in "assistant: You said: Hello, agent!" "booker: Booked: 2 nights at Hotel Sakura."; do
      grep -qF -- "$expected" <<<"$out" || { echo "$out" >&2; echo "run $run: no \"$expected\"" >&2; return 1; }
    done
  done
  kill "${quickstart_servers[-1]}"
}

# --- the tests ----------------------------------------------------------------------
failed=()
echo "== Python client: pytest (clients/python)"
(cd clients/python && "$venv/bin/python" -m pytest -p no:cacheprovider) || failed+=(python)
echo "== Python client: mypy --strict (clients/python)"
(cd clients/python && "$venv/bin/python" -m mypy) || failed+=(python-mypy)
echo "== Python client: python -m build (the sdist, then the wheel from it), the wheel in a fresh venv"
# The wheel goes into a venv of its own (${XDG_CACHE_HOME:-$HOME/.cache}/adk/python-wheel-venv,
# made once, the wheel reinstalled every time), then a script run from outside the repository
# imports it and calls adk-server with the sync and the async client.
package_python_client() {
  local dist wheel_venv=$cache/python-wheel-venv port status=0
  dist=$(mktemp -d)
  if ! "$venv/bin/python" -m build --outdir "$dist" clients/python >"$dist/build.log" 2>&1; then
    tail -30 "$dist/build.log" >&2
    rm -rf "$dist"
    return 1
  fi
  grep -q '/proto/adk/v1/session.proto$' <(tar tzf "$dist"/adk_client-*.tar.gz) \
    || { echo "the sdist does not carry the protos" >&2; rm -rf "$dist"; return 1; }
  (
    if command -v flock >/dev/null; then flock 9; fi
    [ -x "$wheel_venv/bin/python" ] || python3 -m venv "$wheel_venv"
    "$wheel_venv/bin/python" -m pip install --quiet --disable-pip-version-check "$dist"/adk_client-*.whl
    "$wheel_venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
      "$dist"/adk_client-*.whl
  ) 9>"$cache/python-wheel-venv.lock" || status=1
  if [ $status = 0 ]; then
    start_adk_server "$cache/wheel-server.log" --agents examples/agents.yaml
    (cd "$dist" && "$wheel_venv/bin/python" - "127.0.0.1:$port" "$wheel_venv" <<'PY') || status=1
import asyncio, sys, uuid
import adk_client
from adk_client import AdkClient, AsyncAdkClient

target, venv = sys.argv[1], sys.argv[2]
assert adk_client.__file__.startswith(venv), f"imported {adk_client.__file__}, not the installed wheel"
user = f"wheel-{uuid.uuid4().hex[:8]}"
with AdkClient(target) as adk:
    reply = list(adk.run("assistant", user, "s", "Hello, wheel!", create_session=True))[-1]
    assert reply.text == "You said: Hello, wheel!", reply

async def main() -> None:
    async with AsyncAdkClient(target) as adk:
        events = [e async for e in adk.run("assistant", user, "s", "Hello, aio!")]
        assert events[-1].text == "You said: Hello, aio!", events[-1]

asyncio.run(main())
print("the installed wheel works")
PY
    kill "${quickstart_servers[-1]}"
  fi
  rm -rf "$dist"
  return $status
}
package_python_client || failed+=(python-package)
echo "== Node.js client: tsc --noEmit, the chat page's bundle, node --test (clients/node)"
(cd clients/node && npm run --silent typecheck && npm run --silent build:web-example && node --test test/*.test.js) \
  || failed+=(node)
echo "== Node.js client: npm pack, installed into a fresh project"
pack_node_client() {
  local dir tarball
  dir=$(mktemp -d)
  tarball=$(cd clients/node && npm pack --silent --pack-destination "$dir" | tail -1)
  (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --prefer-offline --loglevel=error "./$tarball" \
    && node --input-type=module -e "
      import { connect, AdkError } from 'adk-client';
      import { connectWeb } from 'adk-client/web';
      if (typeof connect !== 'function' || typeof connectWeb !== 'function' || typeof AdkError !== 'function') process.exit(1);")
  local status=$?
  rm -rf "$dir"
  return $status
}
pack_node_client || failed+=(node-pack)
echo "== Go client: go generate, gofmt, go vet, go test (clients/go)"
(eval "$go_env" && cd clients/go && go generate ./... && unformatted=$(gofmt -l .) \
  && { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; false; }; } \
  && go vet ./... && go test -count=1 ./...) || failed+=(go)
echo "== Java client: build.sh, then its tests (clients/java)"
(cd clients/java && ./build.sh && java @build/java.args dev.adk.client.ClientTests) || failed+=(java)
echo "== Python quickstart, as clients/python/README.md writes it, twice"
run_quickstart clients/python/README.md clients/python/src/adk_client/v1 || failed+=(python-quickstart)
echo "== Node.js quickstart, as clients/node/README.md writes it, twice"
run_quickstart clients/node/README.md clients/node/dist clients/node/src/gen || failed+=(node-quickstart)
echo "== Go quickstart, as clients/go/README.md writes it, twice"
run_quickstart clients/go/README.md clients/go/adkv1/*.pb.go || failed+=(go-quickstart)
echo "== Java quickstart, as clients/java/README.md writes it, twice"
run_quickstart clients/java/README.md clients/java/build || failed+=(java-quickstart)
if [ ${#failed[@]} -gt 0 ]; then
  die "client tests failed: ${failed[*]}"
fi
