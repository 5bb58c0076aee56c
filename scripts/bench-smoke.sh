#!/usr/bin/env bash
# Runs every command of BENCHMARKS.md's ```bash blocks as written, shrunk to a smoke run,
# and fails if any of them fails. It proves that the documented commands work on the
# servers' default flags; it measures nothing (tests never assert timings).
#
# What it changes, and only that:
#   - `cargo build …` and `cargo fetch` are skipped: the binaries come from
#     ${CARGO_TARGET_DIR:-target}/debug (scripts/test.sh builds them), so
#     `target/release/` is read as that directory; a `cargo build --release … --features …`
#     (features the test build lacks) is run without `--release`, into that directory;
#   - each adk-bench command gets tiny sizes appended (adk-bench lets a flag given
#     twice take its last value), e.g. `--ops 2 --lengths 2,20`;
#   - a server started in the background (`… &`) listens on a free loopback port
#     with its metrics endpoint off (the machine may run other servers), and the
#     commands' `127.0.0.1:50051` is read as that port;
#   - a command for a real model provider (`OPENAI_API_KEY=… target/release/adk-bench …`,
#     its model files naming `base_url_env: OPENAI_BASE_URL`) runs with the variables it
#     sets, and OPENAI_BASE_URL pointing at a local stand-in speaking OpenAI's chat
#     completions (its every reply suits each question the suite asks: facts, no
#     consolidation, an answer, the label CORRECT).
# Any other command fails the run: teach this script how to shrink it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

die() { echo "bench-smoke.sh: $*" >&2; exit 1; }

target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$root/$target ;; esac
bin=$target/debug
for name in adk-bench adk-server adk-session-server adk-artifact-server adk-runner-server; do
  [ -x "$bin/$name" ] || die "$bin/$name not found: run cargo build --workspace --bins first"
done

# Tiny sizes per bench, appended to the documented flags.
declare -A shrink=(
  [sessions]="--ops 2 --lengths 2,20"
  [artifacts]="--small-ops 2 --medium-ops 1 --large-ops 1"
  [runner]="--turns 32 --turns-per-session 2"
  [watch]="--watchers 3 --rounds 1 --appends-per-round 2"
  [memory]="--ops 2 --sizes 20,40"
  [append-path]="--ops 2 --rounds 1"
  [resume]="--repetitions 1 --lease-ttl-ms 1000"
  [memory-locomo]="--data LOCOMO_SMOKE"
)

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

logs=$(mktemp -d)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${servers[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap cleanup EXIT

# `adk-bench memory-locomo` reads LoCoMo, which may not ship with the project
# (../shared/data/locomo): its smoke run reads two made-up turns in the data set's format.
cat >"$logs/locomo-smoke.json" <<'JSON'
[{"sample_id": "smoke", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
  "session_1_date_time": "1:00 pm on 8 May, 2023",
  "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! I started learning the cello."}]},
  "qa": [{"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4}]}]
JSON

# The stand-in for OpenAI: its port is its first line of output.
python3 -c '
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
content = json.dumps({"facts": [{"fact": "Ann has a puppy named Rex", "topics": ["USER_PERSONAL_INFO"]}],
                      "actions": [], "label": "CORRECT"})
reply = json.dumps({"id": "smoke", "object": "chat.completion", "created": 0, "model": "smoke",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
' >"$logs/fake-openai.port" 2>"$logs/fake-openai.log" &
servers+=($!)
for _ in $(seq 100); do [ -s "$logs/fake-openai.port" ] && break; sleep 0.1; done
[ -s "$logs/fake-openai.port" ] || { cat "$logs/fake-openai.log" >&2; die "the OpenAI stand-in never started"; }
fake_openai="http://127.0.0.1:$(head -1 "$logs/fake-openai.port")/v1"

# The commands of every ```bash block, one per line (a trailing comment dropped).
mapfile -t commands < <(awk '
  /^```/ { inside = ($0 ~ /^```bash[[:space:]]*$/) ? !inside : 0; next }
  inside { sub(/[[:space:]]+#.*$/, ""); if ($0 !~ /^[[:space:]]*(#|$)/) print }
' BENCHMARKS.md)
[ ${#commands[@]} -gt 0 ] || die "no commands found in BENCHMARKS.md"
# `adk-bench runner --tool mcp-…` runs @modelcontextprotocol/server-everything: install it
# (idempotent; a no-op when scripts/test.sh already did).
if printf '%s\n' "${commands[@]}" | grep -q -- '--tool mcp'; then
  ./scripts/setup-mcp.sh
fi

port=""
ran=0
for command in "${commands[@]}"; do
  read -r -a words <<<"$command"
  # Leading `NAME=value` words: the command's environment.
  envs=()
  while [[ ${words[0]:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
    envs+=("${words[0]}")
    words=("${words[@]:1}")
  done
  case ${words[*]} in
    "cargo build --release "*--features*)
      # A build with features the test build lacks (the embedding model inside the
      # server): built here, unoptimised, into the debug binaries the commands run.
      debug=("${words[@]}")
      for i in "${!debug[@]}"; do [ "${debug[$i]}" = --release ] && unset 'debug[$i]'; done
      echo "== built unoptimised: ${debug[*]}"
      "${debug[@]}"
      continue ;;
    "cargo build "*|"cargo fetch"*)
      echo "== skipped (the debug binaries stand in for release): $command"
      continue ;;
    "cargo test -p adk-grpc-e2e --test e2e "*)
      # An e2e test that measures as it checks: scripts/test.sh's `cargo test --workspace`
      # ran it just before (its name must be one of the e2e tests, or that fails here).
      filter=${words[6]}
      grep -q "^mod ${filter%::};" tests/tests/e2e/main.rs || die "no e2e module ${filter%::}: $command"
      echo "== ran by the test step (cargo test --workspace): $command"
      continue ;;
    target/release/adk-bench\ *)
      bench=${words[1]}
      [ -n "${shrink[$bench]:-}" ] || die "no smoke sizes for \`adk-bench $bench\`: add them to this script"
      if [[ $command == *"127.0.0.1:50051"* ]]; then
        [ -n "$port" ] || die "\`$command\` needs the server BENCHMARKS.md starts before it"
      fi
      run=("$bin/adk-bench" "${words[@]:1}")
      run=("${run[@]/127.0.0.1:50051/127.0.0.1:$port}")
      sizes=${shrink[$bench]//LOCOMO_SMOKE/$logs/locomo-smoke.json}
      # Long-session runner runs pre-fill their sessions: short ones only.
      if [[ $command == *--session-events* ]]; then sizes+=" --session-events 10,100"; fi
      # shellcheck disable=SC2206 # the sizes are words
      run+=($sizes)
      echo "== $command   [smoke: $sizes]"
      started=$SECONDS
      OPENAI_BASE_URL=$fake_openai timeout 600 env "${envs[@]}" "${run[@]}" >"$logs/bench.log" 2>&1 || {
        cat "$logs/bench.log" >&2
        die "failed: $command"
      }
      echo "   ok in $((SECONDS - started)) s"
      ran=$((ran + 1)) ;;
    target/release/adk-*" &")
      server=${words[0]#target/release/}
      port=$(free_port)
      args=("${words[@]:1}")
      unset 'args[${#args[@]}-1]' # the trailing &
      echo "== $command   [on 127.0.0.1:$port]"
      "$bin/$server" "${args[@]}" --listen "127.0.0.1:$port" --metrics-listen off >"$logs/$server.log" 2>&1 &
      servers+=($!)
      # Ready once the port accepts a connection (15 s at most).
      for _ in $(seq 150); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "${servers[-1]}" 2>/dev/null || { cat "$logs/$server.log" >&2; die "$server exited: $command"; }
        sleep 0.1
      done
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || die "$server never listened on $port" ;;
    *)
      die "does not know how to run \`$command\` from BENCHMARKS.md: teach it" ;;
  esac
done
[ $ran -gt 0 ] || die "BENCHMARKS.md has no adk-bench command"
echo "bench-smoke.sh: all $ran benchmark commands of BENCHMARKS.md ran"

# adk-bench shipped without its build tree (a release, another machine): it starts the
# servers beside it and never builds; a missing one is named, with exit status 2, before
# anything starts. Either way it leaves no process behind: each run gets a session of its
# own (setsid), which must be empty once adk-bench has exited.
shipped=$(mktemp -d)
run_shipped() { # EXPECTED_STATUS ARGS...: runs $shipped/adk-bench, checks status and leftovers
  local want=$1 status=0; shift
  # The session's id is the pid of its first process: the shell that execs adk-bench.
  setsid --wait bash -c 'echo $$ >"$0"; exec "$@"' "$logs/sid" "$shipped/adk-bench" "$@" \
    >"$logs/shipped.log" 2>&1 || status=$?
  [ "$status" = "$want" ] || { cat "$logs/shipped.log" >&2; die "shipped adk-bench $*: status $status, not $want"; }
  local sid left
  sid=$(cat "$logs/sid")
  left=$(ps -eo sid=,pid=,args= | awk -v sid="$sid" '$1 == sid' || true)
  [ -z "$left" ] || die "shipped adk-bench $* left processes running: $left"
}
cp "$bin/adk-bench" "$shipped/"
run_shipped 2 sessions --ops 2 --lengths 2
grep -q "adk-session-server not found beside $shipped/adk-bench" "$logs/shipped.log" ||
  { cat "$logs/shipped.log" >&2; die "shipped adk-bench did not name the missing adk-session-server"; }
grep -qi "panicked\|cargo" "$logs/shipped.log" && { cat "$logs/shipped.log" >&2; die "shipped adk-bench panicked or built"; }
echo "== adk-bench alone in $shipped: names the missing adk-session-server, exit 2, nothing left running"
cp "$bin/adk-session-server" "$shipped/"
run_shipped 0 sessions --ops 2 --lengths 2
echo "== adk-bench beside adk-session-server in $shipped: ran, nothing left running"
rm -rf "$shipped"
