#!/usr/bin/env bash
# Runs the suite locally as in production, one process per service, on loopback:
#
#   redis-server          127.0.0.1:6379   AOF persistence under the data dir
#   adk-session-server    127.0.0.1:50051  metrics http://127.0.0.1:9464/metrics
#   adk-artifact-server   127.0.0.1:50052  metrics http://127.0.0.1:9465/metrics
#   adk-runner-server     127.0.0.1:50053  metrics http://127.0.0.1:9466/metrics
#                         (--agents, default examples/agents.yaml: mock model)
#
# Ctrl-C (SIGINT) or SIGTERM stops them all: the servers drain gracefully, Redis
# flushes its AOF, and nothing is left running. If any process dies on its own,
# the rest are stopped too and the end of its log is shown.
#
# Usage: deploy/local/run.sh [options]
#   --data-dir DIR        Redis data (AOF) and logs [default: $XDG_STATE_HOME/adk-local,
#                         i.e. ~/.local/state/adk-local]; keep it to keep your data
#   --agents FILE         agents file for the runner [default: examples/agents.yaml]
#   --store-url URL       use this Redis (redis://, rediss://, redis+cluster://…) instead
#                         of starting one
#   --profile P           release (default) or debug: which cargo build to run
#   --no-build            don't run cargo; use the binaries already built
#   -h, --help
# Environment:
#   ADK_LOCAL_REDIS_PORT, ADK_LOCAL_SESSION_PORT, ADK_LOCAL_ARTIFACT_PORT,
#   ADK_LOCAL_RUNNER_PORT   ports [6379, 50051, 50052, 50053]
#   ADK_LOCAL_SESSION_METRICS_PORT, ADK_LOCAL_ARTIFACT_METRICS_PORT,
#   ADK_LOCAL_RUNNER_METRICS_PORT   Prometheus ports [9464, 9465, 9466]
#   CARGO_TARGET_DIR        where cargo puts (and this script finds) the binaries
#   ADK_BIN_DIR             take the binaries from this folder instead (implies --no-build)
#   RUST_LOG, ADK_LOG_FORMAT, ADK_SHUTDOWN_GRACE_SECS, …  passed on to the servers
#
# Needs: bash, redis-server (Debian/Ubuntu: `sudo apt-get install redis-server`;
# macOS: `brew install redis`) unless --store-url is given, and cargo to build.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

say() { printf '[run.sh] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

data_dir="${XDG_STATE_HOME:-$HOME/.local/state}/adk-local"
agents="$repo/examples/agents.yaml"
store_url=""
profile="release"
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) data_dir="${2:?--data-dir needs a value}"; shift 2 ;;
    --agents) agents="${2:?--agents needs a value}"; shift 2 ;;
    --store-url) store_url="${2:?--store-url needs a value}"; shift 2 ;;
    --profile) profile="${2:?--profile needs a value}"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option: $1 (see --help)" ;;
  esac
done
case "$profile" in release|debug) ;; *) die "--profile must be release or debug" ;; esac
# Paths given on the command line are relative to where it was typed.
case "$agents" in /*) ;; *) agents="$PWD/$agents" ;; esac
case "$data_dir" in /*) ;; *) data_dir="$PWD/$data_dir" ;; esac
cd "$repo"

redis_port="${ADK_LOCAL_REDIS_PORT:-6379}"
session_port="${ADK_LOCAL_SESSION_PORT:-50051}"
artifact_port="${ADK_LOCAL_ARTIFACT_PORT:-50052}"
runner_port="${ADK_LOCAL_RUNNER_PORT:-50053}"
session_metrics="${ADK_LOCAL_SESSION_METRICS_PORT:-9464}"
artifact_metrics="${ADK_LOCAL_ARTIFACT_METRICS_PORT:-9465}"
runner_metrics="${ADK_LOCAL_RUNNER_METRICS_PORT:-9466}"
host=127.0.0.1

# --- binaries --------------------------------------------------------------------
if [ -n "${ADK_BIN_DIR:-}" ]; then
  bin_dir="$ADK_BIN_DIR"
  build=0
else
  target_dir="${CARGO_TARGET_DIR:-target}"
  case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
  bin_dir="$target_dir/$profile"
fi
if [ "$build" = 1 ]; then
  if command -v cargo >/dev/null; then
    # A no-op when the binaries are up to date; otherwise they would be stale.
    say "building the servers (cargo build --bins, $profile profile)…"
    if [ "$profile" = release ]; then cargo build --quiet --release --bins; else cargo build --quiet --bins; fi
  elif [ ! -x "$bin_dir/adk-session-server" ]; then
    die "cargo is not installed and $bin_dir holds no binaries (install Rust: https://rustup.rs)"
  fi
fi
for bin in adk-session-server adk-artifact-server; do
  [ -x "$bin_dir/$bin" ] || die "$bin_dir/$bin is missing (build with: cargo build --release --bins)"
done
with_runner=1
if [ ! -x "$bin_dir/adk-runner-server" ]; then
  with_runner=0
  say "warning: $bin_dir/adk-runner-server does not exist (yet): starting without the runner"
fi
[ "$with_runner" = 0 ] || [ -r "$agents" ] || die "agents file $agents not found"

# --- ports -----------------------------------------------------------------------
port_busy() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }
ports="$session_port $artifact_port $session_metrics $artifact_metrics"
[ "$with_runner" = 1 ] && ports="$ports $runner_port $runner_metrics"
[ -z "$store_url" ] && ports="$redis_port $ports"
for port in $ports; do
  if port_busy "$port"; then
    hint="set ADK_LOCAL_*_PORT (see --help)"
    [ "$port" = "$redis_port" ] && hint="a Redis is already running there? use it with --store-url redis://$host:$port, or set ADK_LOCAL_REDIS_PORT"
    die "port $port on $host is already in use: $hint"
  fi
done

# --- process bookkeeping and shutdown --------------------------------------------
mkdir -p "$data_dir/logs"
data_dir="$(cd "$data_dir" && pwd)"
names=()   # service names, in start order
pids=()    # their pids
sleeper="" # the supervisor's current `sleep`
stopping=0

stop_pid() { # NAME PID SECONDS: SIGTERM, wait up to SECONDS, then SIGKILL
  local name="$1" pid="$2" limit="$3" waited=0
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge $((limit * 10)) ]; then
      say "$name (pid $pid) still running after ${limit}s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  wait "$pid" 2>/dev/null || true
}

stop_all() {
  [ "$stopping" = 1 ] && return 0
  stopping=1
  trap '' INT TERM   # a second Ctrl-C must not cut the drain short
  [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null || true
  [ "${#pids[@]}" -gt 0 ] || return 0
  say "stopping…"
  local grace="${ADK_SHUTDOWN_GRACE_SECS:-25}" i
  # Servers first (they drain in parallel), Redis last so in-flight calls can finish.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    [ "${names[$i]}" = redis ] || kill -TERM "${pids[$i]}" 2>/dev/null || true
  done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    if [ "${names[$i]}" = redis ]; then stop_pid redis "${pids[$i]}" 15
    else stop_pid "${names[$i]}" "${pids[$i]}" $((grace + 5)); fi
  done
  say "stopped: ${names[*]}"
  # A signal can land between `sleep 1 &` and `sleeper=$!`; that sleep is a job too.
  local leftover
  leftover="$(jobs -p)"
  # shellcheck disable=SC2086 # one pid per word
  [ -z "$leftover" ] || kill $leftover 2>/dev/null || true
}

on_signal() {
  say "received SIG$1"
  stop_all
  exit 0
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'stop_all' EXIT

start() { # NAME COMMAND...: starts COMMAND in the background, logging to logs/NAME.log
  local name="$1"; shift
  "$@" >"$data_dir/logs/$name.log" 2>&1 &
  names+=("$name")
  pids+=("$!")
}

show_log_tail() {
  say "last lines of $data_dir/logs/$1.log:"
  tail -n 20 "$data_dir/logs/$1.log" >&2 || true
}

redis_answers() { # PORT: PING gets +PONG (not -LOADING while the AOF is read back)
  (
    exec 3<>"/dev/tcp/$host/$1" || exit 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 2 reply <&3 || exit 1
    case "$reply" in +PONG*) exit 0 ;; *) exit 1 ;; esac
  ) 2>/dev/null
}

wait_ready() { # NAME PORT [CHECK]: until CHECK PORT succeeds (default: the port accepts
  # connections); the process must stay up meanwhile
  local name="$1" port="$2" ready="${3:-port_busy}" pid="" tries=0 i
  for i in "${!names[@]}"; do [ "${names[$i]}" = "$name" ] && pid="${pids[$i]}"; done
  until "$ready" "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      show_log_tail "$name"
      die "$name exited during startup"
    fi
    tries=$((tries + 1))
    [ "$tries" -le 600 ] || { show_log_tail "$name"; die "$name did not listen on $port within 60s"; }
    sleep 0.1
  done
}

# --- start -----------------------------------------------------------------------
if [ -z "$store_url" ]; then
  command -v redis-server >/dev/null \
    || die "redis-server not found. Install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) or pass --store-url"
  mkdir -p "$data_dir/redis"
  # AOF as in deploy/k8s (appendonly yes, appendfsync everysec); no RDB snapshots.
  start redis redis-server --bind "$host" --port "$redis_port" --dir "$data_dir/redis" \
    --appendonly yes --appendfsync everysec --save "" --daemonize no
  wait_ready redis "$redis_port" redis_answers
  store_url="redis://$host:$redis_port"
fi
export ADK_STORE_URL="$store_url"

# Each server serves Prometheus metrics on its own loopback port (ADK_METRICS_LISTEN).
start session env ADK_METRICS_LISTEN="$host:$session_metrics" \
  "$bin_dir/adk-session-server" --listen "$host:$session_port"
start artifact env ADK_METRICS_LISTEN="$host:$artifact_metrics" \
  "$bin_dir/adk-artifact-server" --listen "$host:$artifact_port"
if [ "$with_runner" = 1 ]; then
  start runner env ADK_METRICS_LISTEN="$host:$runner_metrics" \
    "$bin_dir/adk-runner-server" --listen "$host:$runner_port" --agents "$agents"
fi
wait_ready session "$session_port"
wait_ready artifact "$artifact_port"
[ "$with_runner" = 1 ] && wait_ready runner "$runner_port"

redacted_store="$(printf '%s' "$store_url" | sed -E 's#(://[^:/@]*:)[^@]*@#\1***@#')"
{
  echo
  echo "ADK suite running (store: $redacted_store)"
  printf '  %-9s %-16s %-24s metrics http://%s/metrics\n' \
    session "$host:$session_port" adk.v1.SessionService "$host:$session_metrics" \
    artifact "$host:$artifact_port" adk.v1.ArtifactService "$host:$artifact_metrics"
  if [ "$with_runner" = 1 ]; then
    printf '  %-9s %-16s %-24s metrics http://%s/metrics\n' \
      runner "$host:$runner_port" adk.v1.AgentRunner "$host:$runner_metrics"
    printf '  %-9s %s\n' agents "$agents"
  else
    printf '  %-9s %s\n' runner "not started (adk-runner-server not built)"
  fi
  [ "${names[0]}" = redis ] && printf '  %-9s %-16s AOF in %s\n' redis "$host:$redis_port" "$data_dir/redis"
  echo "  logs      $data_dir/logs/*.log"
  echo "Try: grpcurl -plaintext $host:$session_port list"
  echo "Ctrl-C stops everything."
  echo
} >&2

# --- supervise: any process exiting on its own stops the rest --------------------
while :; do
  for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      status=0
      wait "${pids[$i]}" 2>/dev/null || status=$?
      show_log_tail "${names[$i]}"
      say "${names[$i]} exited on its own (status $status): stopping the rest"
      stop_all
      exit 1
    fi
  done
  # Sleeping in the background keeps the traps responsive.
  sleep 1 &
  sleeper=$!
  wait "$sleeper" 2>/dev/null || true
  sleeper=""
done
