#!/usr/bin/env bash
# docker-compose.yml and the images it names are consistent: `docker-compose
# config` (v1) and `docker compose config` (v2) accept it (each when
# installed) and give the same services, every fsgd service uses the
# entrypoint roles, the gpu profile's worker builds from docker/Dockerfile.gpu,
# and the job file the containers run parses with the real job parser. A
# second `up` without `down` works (topics-reset deletes the job's topics
# first), and `up --exit-code-from aggregator aggregator` starts the job.
# Sharded (FSGD_SHARDS=S): aggregator-1..3 are shards 1..3 with their own
# checkpoints, Prometheus finds them, and the entrypoint gives each role the
# flags of its shard (what it runs is recorded by an fsgd found first on PATH).
set -euo pipefail
# real-kafka: skip
if [ "${FSGD_KAFKA:-mock}" != mock ]; then
    echo "SKIP: no broker involved (it checks docker-compose.yml and the images): runs in the embedded pass only"
    exit 77
fi
FSGD=${FSGD:-bin/fsgd}
PY=/usr/bin/python3
cd "$(dirname "$0")/../.."
# The same checks with every compose tool here: `docker-compose` (v1, Debian
# bookworm's) and `docker compose` (v2, Docker's plugin: not packaged by
# bookworm; built from its Go module it ran here, issue 40 item 3). Their
# `config` outputs differ in form (v2 writes volumes as mappings, quotes
# numbers), so the checks read them as YAML.
config_checks() { # COMPOSE_COMMAND...
    local dc=("$@")
    local out gpu prom sharded gpu2
    out=$("${dc[@]}" -f docker-compose.yml config)
    gpu=$("${dc[@]}" -f docker-compose.yml --profile gpu config)
    prom=$("${dc[@]}" -f docker-compose.yml --profile metrics config)
    sharded=$(FSGD_SHARDS=2 "${dc[@]}" -f docker-compose.yml config)
    gpu2=$(FSGD_SHARDS=2 "${dc[@]}" -f docker-compose.yml --profile gpu config)
    "$PY" - "$out" "$gpu" "$prom" "$sharded" "$gpu2" docker/prometheus.yml <<'PYEOF'
import re, sys, yaml
out, gpu, prom, sharded, gpu2 = (yaml.safe_load(a)["services"] for a in sys.argv[1:6])
prom_conf = open(sys.argv[6]).read()
for svc in ("kafka", "producer", "aggregator", "worker"):
    assert svc in out, f"service {svc} missing"
# a second `up` without `down`: topics-reset (the broker's image and tool)
# deletes the job's topics an earlier up left, and nothing else, before the
# producer runs (fsgd refuses a job name whose topics hold a job)
job = yaml.safe_load(open("jobs/a9a-dist.yaml"))["job"]["name"]
r = out["topics-reset"]
assert r["image"] == out["kafka"]["image"] and r["command"][0] == "/opt/kafka/bin/kafka-topics.sh", r
assert "--delete" in r["command"] and "--if-exists" in r["command"], r["command"]
topics = re.compile(r["command"][r["command"].index("--topic") + 1])
assert all(topics.fullmatch(f"{job}.{t}") for t in ("data", "grads", "model", "ctl", "pull")), topics.pattern
assert not any(topics.fullmatch(t) for t in (f"{job}x.data", f"x{job}.data", "__consumer_offsets")), topics.pattern
assert r["depends_on"]["kafka"]["condition"] == "service_healthy", r["depends_on"]
assert out["producer"]["depends_on"]["topics-reset"]["condition"] == "service_completed_successfully"
# `up --exit-code-from aggregator aggregator` starts the whole job: the
# workers and the other shards are the aggregator's dependencies
deps = out["aggregator"]["depends_on"]
for d in ("worker", "aggregator-1", "aggregator-2", "aggregator-3"):
    assert deps.get(d, {}).get("condition") == "service_started", (d, deps)
assert out["kafka"]["image"].startswith("apache/kafka:"), out["kafka"]["image"]
assert out["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
assert gpu["worker-gpu"]["build"]["dockerfile"] == "docker/Dockerfile.gpu", gpu["worker-gpu"]["build"]
# the metrics profile: Prometheus with docker/prometheus.yml, scraping the port the roles serve on
p = prom["prometheus"]
assert p["image"].startswith("prom/prometheus"), "no prometheus service in the metrics profile"
mounts = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in p["volumes"]]
assert any("docker/prometheus.yml:/etc/prometheus/prometheus.yml" in m for m in mounts), f"prometheus.yml not mounted: {mounts}"
port = str(out["aggregator"]["environment"]["FSGD_METRICS_PORT"])
assert port and f"aggregator:{port}" in prom_conf and prom_conf.count(f"port: {port}") == 2, \
    f"docker/prometheus.yml does not scrape FSGD_METRICS_PORT '{port}'"
# S = 2: every fsgd service is told so, shards 1..3 are there with their own shard and checkpoint
svc = sharded
for name in ("producer", "aggregator", "worker", "aggregator-1", "aggregator-2", "aggregator-3"):
    assert str(svc[name]["environment"]["FSGD_SHARDS"]) == "2", (name, svc[name]["environment"])
ckpts = set()
for i in (1, 2, 3):
    s = svc["aggregator-%d" % i]
    assert str(s["environment"]["FSGD_SHARD"]) == str(i), s["environment"]
    assert s["command"][0] == "aggregator", s["command"]
    ckpts.add(s["command"][s["command"].index("--checkpoint") + 1])
assert len(ckpts) == 3 and "out/a9a-dist.ckpt" not in ckpts, ckpts
assert "FSGD_SHARD" not in svc["aggregator"]["environment"]
cmd = [str(c) for c in gpu2["worker-gpu"]["command"]]
assert cmd[cmd.index("--shards") + 1] == "2", f"worker-gpu is not told --shards: {cmd}"
for i in (1, 2, 3):
    assert f'"aggregator-{i}"' in prom_conf, f"prometheus does not look for aggregator-{i}"
PYEOF
    echo "${dc[*]} config: ok"
}
tools=0
if command -v docker-compose >/dev/null; then
    config_checks docker-compose
    tools=$((tools + 1))
fi
if command -v docker >/dev/null && docker compose version >/dev/null 2>&1; then
    config_checks docker compose
    tools=$((tools + 1))
else
    echo "note: no docker compose (v2 plugin) here: the file checked with docker-compose (v1) only"
fi
[ "$tools" -gt 0 ] || echo "no compose tool installed: checking the file's references only"
test -f docker/Dockerfile && test -x docker/entrypoint.sh && test -f docker/Dockerfile.gpu
# the documented command that returns when the job ends is the one compose_up.sh runs
for f in README.md docs/run.md tests/integration/compose_up.sh; do
    grep -q -- '--exit-code-from aggregator aggregator' "$f" || { echo "$f: no 'up ... --exit-code-from aggregator aggregator'"; exit 1; }
done
# compose_up.sh's Kafka stand-in has the tool topics-reset runs
test -x tests/compose/kafka/bin/kafka-topics.sh && grep -q 'tools.TopicCommand' tests/compose/kafka/bin/kafka-topics.sh
grep -q "^FROM debian:bookworm AS build" docker/Dockerfile
grep -q "^USER fsgd" docker/Dockerfile
sh -n docker/entrypoint.sh
# what the entrypoint runs, per role and shard (fsgd on PATH records its argv)
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
printf '#!/bin/sh\nprintf "%%s\\n" "$*"\n' >"$shim/fsgd"
chmod +x "$shim/fsgd"
ep() { env PATH="$shim:$PATH" FSGD_BROKERS=kafka:9092 FSGD_WORKERS=3 FSGD_METRICS_PORT= "$@"; }
want() { # WHAT GOT EXPECTED
    [ "$2" = "$3" ] || { echo "entrypoint $1: ran 'fsgd $2', expected 'fsgd $3'"; exit 1; }
}
J=jobs/a9a-dist.yaml
want "aggregator" "$(ep sh docker/entrypoint.sh aggregator)" "aggregator $J --brokers kafka:9092 --workers 3"
want "aggregator, S=4 I=2" "$(ep FSGD_SHARDS=4 FSGD_SHARD=2 sh docker/entrypoint.sh aggregator --checkpoint c2)" \
    "aggregator $J --brokers kafka:9092 --checkpoint c2 --workers 3 --shard 2/4 --shards 4"
want "aggregator, S=4" "$(ep FSGD_SHARDS=4 sh docker/entrypoint.sh aggregator)" \
    "aggregator $J --brokers kafka:9092 --workers 3 --shard 0/4 --shards 4"
want "worker, S=4" "$(ep FSGD_SHARDS=4 FSGD_SHARD=3 sh docker/entrypoint.sh worker)" "worker $J --brokers kafka:9092 --shards 4"
want "produce, S=2" "$(ep FSGD_SHARDS=2 sh docker/entrypoint.sh produce)" "produce $J --brokers kafka:9092 --shards 2"
want "run, S=2" "$(ep FSGD_SHARDS=2 sh docker/entrypoint.sh run)" "run $J --brokers kafka:9092 --shards 2"
# the serve profile: fsgd serve following the compose job's model topic
# (its name and broker), on the port it publishes, with options fsgd serve
# knows, run by the entrypoint as written
if "$PY" -c 'import yaml' 2>/dev/null; then
    serve_opts=$("$PY" - <<'PYEOF'
import yaml
d = yaml.safe_load(open("docker-compose.yml"))
s = d["services"]["serve"]
job = yaml.safe_load(open("jobs/a9a-dist.yaml"))["job"]["name"]
c = s["command"]
assert s["profiles"] == ["serve"] and c[0] == "serve", s
opt = dict(zip(c[1::2], c[2::2]))
assert opt["--brokers"] == d["x-fsgd-env"]["FSGD_BROKERS"] and opt["--name"] == job, (opt, job)
assert any(str(p).endswith(":" + opt["--port"]) for p in s["ports"]), s["ports"]
print(" ".join(opt))
PYEOF
    ) || { echo "docker-compose.yml's serve service does not follow the job's topic"; exit 1; }
    serve_help=$("$FSGD" serve --help)
    for o in $serve_opts; do
        grep -q -- "$o " <<<"$serve_help" || { echo "serve service: fsgd serve has no option $o"; exit 1; }
    done
else
    echo "python3-yaml not installed: the serve service not checked"
fi
want "serve" "$(ep sh docker/entrypoint.sh serve --brokers kafka:9092 --name a9a)" "serve --brokers kafka:9092 --name a9a"
# a shard the job does not have: nothing run, exit 0, a line that says so
got=$(ep FSGD_SHARDS=2 FSGD_SHARD=3 sh docker/entrypoint.sh aggregator)
[[ "$got" == *"aggregator shard 3: the job has 2 shard(s)"*"nothing to run" ]] || { echo "shard 3 of 2: '$got'"; exit 1; }
got=$(ep FSGD_SHARD=1 sh docker/entrypoint.sh aggregator)
[[ "$got" == *"nothing to run" ]] || { echo "shard 1 of an unsharded job: '$got'"; exit 1; }
set +e
ep FSGD_SHARDS=two sh docker/entrypoint.sh aggregator >/dev/null 2>"$shim/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "FSGD_SHARDS 'two'" "$shim/err" || { cat "$shim/err"; echo "FSGD_SHARDS=two not refused"; exit 1; }
set +e
ep FSGD_SHARDS=0 sh docker/entrypoint.sh aggregator >/dev/null 2>"$shim/err"; rc=$?
set -e
[ "$rc" = 2 ] && grep -q "FSGD_SHARDS '0'" "$shim/err" || { cat "$shim/err"; echo "FSGD_SHARDS=0 not refused"; exit 1; }
# the job the containers run is valid (paths are relative to /opt/fsgd there)
"$FSGD" run jobs/a9a-dist.yaml --data /nonexistent-check-only --help >/dev/null
cd data/sets 2>/dev/null && cd ../.. && test -f data/sets/a9a
