#!/usr/bin/env bash
# docker-compose.yml and the images it names are consistent: `docker-compose
# config` accepts it (when the tool is installed), every fsgd service uses the
# entrypoint roles, the gpu profile's worker builds from docker/Dockerfile.gpu,
# and the job file the containers run parses with the real job parser.
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
if command -v docker-compose >/dev/null; then
    out=$(docker-compose -f docker-compose.yml config)
    for svc in kafka producer aggregator worker; do
        grep -q "^  $svc:" <<<"$out" || { echo "service $svc missing"; exit 1; }
    done
    grep -q "apache/kafka" <<<"$out"
    grep -q "KAFKA_PROCESS_ROLES: broker,controller" <<<"$out"
    gpu=$(docker-compose -f docker-compose.yml --profile gpu config)
    grep -q "dockerfile: docker/Dockerfile.gpu" <<<"$gpu"
    # the metrics profile: Prometheus with docker/prometheus.yml, scraping the port the roles serve on
    prom=$(docker-compose -f docker-compose.yml --profile metrics config)
    grep -q "image: prom/prometheus" <<<"$prom" || { echo "no prometheus service in the metrics profile"; exit 1; }
    grep -q "docker/prometheus.yml:/etc/prometheus/prometheus.yml" <<<"$prom" || { echo "prometheus.yml not mounted"; exit 1; }
    port=$(sed -n "s/^ *FSGD_METRICS_PORT: *'*\([0-9]*\).*/\1/p" <<<"$out" | head -1)
    [ -n "$port" ] && grep -q "aggregator:$port" docker/prometheus.yml &&
        [ "$(grep -c "port: $port" docker/prometheus.yml)" -eq 2 ] ||
        { echo "docker/prometheus.yml does not scrape FSGD_METRICS_PORT '$port'"; exit 1; }
    # S = 2: every fsgd service is told so, shards 1..3 are there with their own shard and checkpoint
    sharded=$(FSGD_SHARDS=2 docker-compose -f docker-compose.yml config)
    "$PY" - "$sharded" <<'PYEOF'
import sys, yaml
svc = yaml.safe_load(sys.argv[1])["services"]
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
PYEOF
    gpu2=$(FSGD_SHARDS=2 docker-compose -f docker-compose.yml --profile gpu config)
    grep -A1 -- "- --shards" <<<"$gpu2" | grep -q "'2'\|\b2\b" || { echo "worker-gpu is not told --shards"; exit 1; }
    for i in 1 2 3; do
        grep -q "\"aggregator-$i\"" docker/prometheus.yml || { echo "prometheus does not look for aggregator-$i"; exit 1; }
    done
    echo "docker-compose config: ok"
else
    echo "docker-compose not installed: checking the file's references only"
fi
test -f docker/Dockerfile && test -x docker/entrypoint.sh && test -f docker/Dockerfile.gpu
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
