#!/usr/bin/env bash
# docker-compose.yml run for real (kafka_compose.sh only checks the file), on
# a Docker daemon this script starts: `up -d prometheus` (metrics profile),
# then the documented `up --build --scale worker=3 --exit-code-from aggregator
# aggregator` in the foreground, which
#   - returns when the job ends, with the aggregator's exit code 0 (no
#     restart), and the three workers exited 0;
#   - left the model and metrics JSON in the fsgd-out volume: the documented
#     copy to a host folder (`docker cp`, v2: `docker compose cp`) gets them,
#     the model loads (fsgd predict), and its test AUC is within 0.005 of
#     `fsgd train` on the same job (jobs/a9a-dist.yaml, 40 epochs:
#     tests/compose/long-job.yml);
#   - Prometheus scraped fsgd series from the aggregator and from the workers
#     (its HTTP API);
# and the documented `up` again, without `down` (Kafka kept running with the
# first job's topics: topics-reset deletes them), exits 0 with a new model.
# FSGD_COMPOSE_SHARDS=S (2..4; default 1) runs the job with S aggregator
# shards (FSGD_SHARDS): shards 1..S-1 (aggregator-I) exit 0 too, the shards
# the job does not have exit 0 at once saying so, the reference is `fsgd train
# --shards S`, shard 0's metrics JSON says S shards, and Prometheus has
# fsgd_steps_total of every shard (label shard="I").
# Everything it starts is torn down on exit, failure, SIGINT or SIGTERM:
# containers, networks, volumes, the daemon (and its containerd), the data
# root, the bridge and the iptables rules it added.
#
# No image registry is reachable here, so the images docker-compose.yml names
# are made locally and tagged with those names in the private daemon:
#   debian:bookworm(-slim)   debootstrap --variant=minbase + docker import; the
#                            root file system is cached in build/compose-cache
#                            (FSGD_COMPOSE_CACHE), so only a first run bootstraps
#   apache/kafka:VERSION     tests/compose/kafka: Debian's JRE, the suite's broker
#                            jars (tests/kafka/pom.xml, from Maven Central)
#   prom/prometheus:VERSION  tests/compose/prometheus: Debian's prometheus
# The images' apt-get steps need deb.debian.org (FSGD_DEBIAN_MIRROR for debootstrap).
#
# Needs root, dockerd (docker.io), docker-compose, debootstrap, iptables, curl.
# FSGD_COMPOSE="docker compose" runs the same with Compose v2.
# Without them it is skipped (exit 77), except under CI (CI=true), where it
# must run. One run at a time on a machine (a lock; the subnet and port 9090
# are the machine's). FSGD_COMPOSE_TIMEOUT: seconds the job may take (300).
set -euo pipefail
# sanitizers: leave out: the container engine's time; kafka_compose.sh and the kafka_ scripts run the same roles under sanitizers
# real-kafka: skip
# suite: alone: a container engine of its own (dockerd, a bridge, NAT rules, 127.0.0.1:9090) and minutes of image builds
cd "$(dirname "$0")/../.."
root=$(pwd)
FSGD=${FSGD:-bin/fsgd}
. tests/integration/lib/skip.bash
t_start=$SECONDS

cannot() {
    if [ "${CI:-}" = true ]; then echo "FAIL: $* (CI=true: this test must run)"; exit 1; fi
    echo "skipped: $*"; exit 77
}
fail() { echo "FAIL: $*"; exit 1; }
say() { echo "compose_up: $* ($((SECONDS - t_start)) s)"; }

if [ "${FSGD_KAFKA:-mock}" != mock ]; then
    echo "skipped: runs its own broker in a container: the embedded pass only"; exit 77
fi
[ "$(id -u)" -eq 0 ] || cannot "not root: the test starts its own dockerd"
# FSGD_COMPOSE="docker compose": Compose v2 (Docker's plugin; Debian bookworm
# packages only docker-compose, v1) instead of docker-compose
read -r -a COMPOSE <<<"${FSGD_COMPOSE:-docker-compose}"
[ "${COMPOSE[0]}" = docker ] && { docker compose version >/dev/null 2>&1 || cannot "no docker compose (v2 plugin) here"; }
for c in dockerd containerd runc docker "${COMPOSE[0]}" debootstrap iptables ip curl flock python3; do
    command -v "$c" >/dev/null ||
        cannot "$c is not installed (apt-get install docker.io docker-compose debootstrap iptables iproute2 curl)"
done
[ -x "$FSGD" ] || fail "$FSGD not built (make)"
# The static checks first: no daemon for a file that does not parse.
FSGD=$FSGD bash tests/integration/kafka_compose.sh >/dev/null || fail "tests/integration/kafka_compose.sh"
# The Kafka stand-in's jars: the suite's own broker jars.
if ! ls build/kafka/lib/kafka_2.13-*.jar >/dev/null 2>&1; then
    why=$(tests/kafka/broker.sh check) || cannot "$why"
    tests/kafka/broker.sh install >/dev/null || fail "tests/kafka/broker.sh install"
fi

# One run at a time: a second waits (the subnet and port 9090 are shared).
lock=/tmp/fsgd-compose-up.lock
exec 9>"$lock"
flock -w 600 9 || fail "another compose_up.sh held $lock for 10 minutes"

CACHE=${FSGD_COMPOSE_CACHE:-$root/build/compose-cache}
MIRROR=${FSGD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
TIMEOUT=${FSGD_COMPOSE_TIMEOUT:-300}
SHARDS=${FSGD_COMPOSE_SHARDS:-1}
case "$SHARDS" in 1 | 2 | 3 | 4) ;; *) fail "FSGD_COMPOSE_SHARDS must be 1 to 4 (docker-compose.yml has 4 aggregator services), not '$SHARDS'" ;; esac
export FSGD_SHARDS=$SHARDS
W=
BR=fsgdc$$
TAG="fsgd-compose-up:$$"
P=fsgdcompose$$
CG=fsgd-compose-$$
dpid= made_br= fwd_was=

# ipt TABLE RULE...: adds a rule marked with TAG (teardown deletes by the mark).
ipt() { local t=$1; shift; iptables -t "$t" "$@" -m comment --comment "$TAG"; }
# drop_rules TEXT: deletes the iptables rules whose line holds TEXT.
drop_rules() {
    local t line
    for t in filter nat; do
        { iptables-save -t "$t" | grep -F -- "$1" | grep "^-A" || true; } | sed "s/^-A/-D/" |
            while read -r line; do eval "iptables -t $t $line"; done
    done
}
# What a run killed with SIGKILL left (this one holds the lock, so any other
# run's rules and bridge are stale).
drop_rules '"fsgd-compose-up:'
for b in $(ip -o link show type bridge | awk -F': ' '$2 ~ /^fsgdc[0-9]+$/ { print $2 }'); do ip link del "$b"; done

POOL=172.31.0.0/16 BR_ADDR=172.31.0.1/24
if ip -o route | grep -q '^172\.31\.'; then
    cannot "a route into $POOL exists already (another Docker or network here): $(ip -o route | grep '^172\.31\.' | head -1)"
fi
if python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 9090))' 2>/dev/null; then :; else
    cannot "127.0.0.1:9090 is in use (docker-compose.yml publishes Prometheus there)"
fi

teardown() {
    local rc=$? t p pids m
    set +e
    # a signal may land inside a redirected command: write to the script's own output
    exec 1>&3 2>&4
    trap - EXIT INT TERM
    if [ -n "$dpid" ] && kill -0 "$dpid" 2>/dev/null; then
        [ $rc -eq 0 ] || { echo "--- docker-compose logs (last lines)"; dc logs --no-color --tail 15 2>/dev/null | tail -60; }
        timeout 120 dc down -v --remove-orphans -t 5 >/dev/null 2>&1
        kill "$dpid" 2>/dev/null
        for _ in $(seq 30); do kill -0 "$dpid" 2>/dev/null || break; sleep 1; done
        kill -9 "$dpid" 2>/dev/null
        wait "$dpid" 2>/dev/null
    fi
    # What a killed daemon left: container processes (all in the cgroup
    # parent it was given), its containerd and shims ($W in their command
    # lines). Stopped by pid.
    if [ -n "$W" ]; then
        for _ in 1 2 3; do
            pids=$(cat /sys/fs/cgroup/*/"$CG"/*/cgroup.procs 2>/dev/null; pgrep -f -- "$W/")
            [ -n "$pids" ] || break
            kill -9 $pids 2>/dev/null
            sleep 1
        done
        find /sys/fs/cgroup/*/"$CG" -depth -type d -exec rmdir {} + 2>/dev/null
        awk -v w="$W/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
        rm -rf "$W"
    fi
    drop_rules "\"$TAG\""
    # the compose networks' bridges, if the daemon died before removing them
    ip -o -4 addr show | awk '$4 ~ /^172\.31\./ { print $2 }' | sort -u | while read -r b; do
        case $b in br-* | "$BR") ip link del "$b" 2>/dev/null ;; esac
    done
    [ -z "$made_br" ] || ip link del "$BR" 2>/dev/null
    [ -z "$fwd_was" ] || echo "$fwd_was" >/proc/sys/net/ipv4/ip_forward
    say "torn down"
    exit $rc
}
exec 3>&1 4>&2
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
W=$(mktemp -d /tmp/fsgd-compose.XXXXXX)
export DOCKER_HOST=unix://$W/docker.sock
# tests/compose/long-job.yml: 40 epochs, so that Prometheus sees every role
dc() { "${COMPOSE[@]}" -p "$P" -f docker-compose.yml -f tests/compose/long-job.yml --profile metrics "$@"; }
EPOCHS=40

# Reference: the same job trained by fsgd train on this machine.
"$FSGD" train jobs/a9a-dist.yaml --epochs "$EPOCHS" --shards "$SHARDS" --out "$W/ref.model" --metrics-json "$W/ref.json" --quiet >/dev/null
ref_auc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test"]["auc"])' "$W/ref.json")

# The daemon: its own data root, exec root, socket and bridge; no iptables of
# its own (it would rewrite the FORWARD policy), but NAT for the build steps'
# apt-get, in rules this script adds and removes.
ip link add name "$BR" type bridge && made_br=1
ip addr add "$BR_ADDR" dev "$BR"
ip link set "$BR" up
if [ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]; then fwd_was=0; echo 1 >/proc/sys/net/ipv4/ip_forward; fi
ipt nat -A POSTROUTING -s "$POOL" ! -d "$POOL" -j MASQUERADE
ipt filter -I FORWARD 1 -s "$POOL" -j ACCEPT
ipt filter -I FORWARD 1 -d "$POOL" -j ACCEPT
mkdir -p "$W/root" "$W/exec"
# its own session: a Ctrl-C to this script's process group must not stop it
# before the containers are taken down in order
setsid dockerd --data-root "$W/root" --exec-root "$W/exec" --pidfile "$W/dockerd.pid" -H "$DOCKER_HOST" \
    --bridge "$BR" --iptables=false --ip-forward=false --default-address-pool "base=$POOL,size=24" \
    --cgroup-parent "/$CG" >"$W/dockerd.log" 2>&1 3>&- 4>&- 9>&- &
dpid=$!
for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker info >/dev/null 2>&1 || { tail -20 "$W/dockerd.log"; fail "dockerd did not start"; }
dpid=$(cat "$W/dockerd.pid") # the daemon itself, had setsid forked
say "dockerd up"

# Base image: a minbase bookworm, bootstrapped once into the cache.
base=$CACHE/bookworm-minbase.tar
if [ ! -s "$base" ]; then
    mkdir -p "$CACHE"
    debootstrap --variant=minbase bookworm "$W/rootfs" "$MIRROR" >"$W/debootstrap.log" 2>&1 ||
        { tail -20 "$W/debootstrap.log"; fail "debootstrap bookworm from $MIRROR"; }
    rm -rf "$W"/rootfs/var/cache/apt/archives/*.deb "$W"/rootfs/var/lib/apt/lists/*
    tar -C "$W/rootfs" --numeric-owner -cf "$base.part" . && mv -f "$base.part" "$base"
    rm -rf "$W/rootfs"
    say "debootstrap done, cached in $base"
fi
docker import -c 'CMD ["bash"]' "$base" fsgd-compose-base:bookworm >/dev/null
# every debian:bookworm* name a Dockerfile here starts from
for name in $(sed -n 's/^FROM \(debian:bookworm[^ ]*\).*/\1/p' docker/Dockerfile tests/compose/*/Dockerfile | sort -u); do
    docker tag fsgd-compose-base:bookworm "$name"
done

# The stand-ins, tagged with the names docker-compose.yml gives.
kafka_image=$(sed -n 's/^ *image: *\(apache\/kafka:[^ ]*\).*/\1/p' docker-compose.yml | sort -u)
prom_image=$(sed -n 's/^ *image: *\(prom\/prometheus:[^ ]*\).*/\1/p' docker-compose.yml)
[ -n "$kafka_image" ] && [ -n "$prom_image" ] || fail "docker-compose.yml names no apache/kafka or prom/prometheus image"
# kafka and topics-reset run the same image (its kafka-topics.sh)
[ "$(wc -l <<<"$kafka_image")" -eq 1 ] || fail "docker-compose.yml names two apache/kafka images: $kafka_image"
mkdir -p "$W/kafka"
cp -r tests/compose/kafka/. "$W/kafka/"
cp tests/kafka/log4j2.properties "$W/kafka/"
mkdir "$W/kafka/libs" && cp -L build/kafka/lib/*.jar "$W/kafka/libs/"
docker build -q -t "$kafka_image" "$W/kafka" >"$W/build.log" 2>&1 || { tail -30 "$W/build.log"; fail "building the Kafka stand-in"; }
docker build -q -t "$prom_image" tests/compose/prometheus >"$W/build.log" 2>&1 ||
    { tail -30 "$W/build.log"; fail "building the Prometheus stand-in"; }
say "base and stand-in images ready"

dc up -d prometheus >"$W/up.log" 2>&1 || { tail -40 "$W/up.log"; fail "docker-compose up -d prometheus"; }
# up_job LOG [COMPOSE OPTIONS]: the documented command; it returns when the job ends
up_job() {
    local rc=0 log=$1
    shift
    timeout "$TIMEOUT" "${COMPOSE[@]}" -p "$P" -f docker-compose.yml "$@" \
        up --build --scale worker=3 --exit-code-from aggregator aggregator >"$log" 2>&1 || rc=$?
    [ $rc -ne 124 ] || { tail -40 "$log"; fail "up --exit-code-from aggregator still running after ${TIMEOUT} s"; }
    [ $rc -eq 0 ] || { tail -40 "$log"; fail "up --exit-code-from aggregator exited $rc"; }
}
# copy_out DIR: the documented copy of the fsgd-out volume to a host folder
copy_out() {
    if [ "${COMPOSE[0]}" = docker ]; then
        dc cp aggregator:/opt/fsgd/out/. "$1" >/dev/null 2>&1 || fail "docker compose cp aggregator:/opt/fsgd/out/. $1"
    else
        docker cp "$(dc ps -q aggregator)":/opt/fsgd/out/. "$1" || fail "docker cp (aggregator):/opt/fsgd/out/. $1"
    fi
    [ -s "$1/a9a-dist.model" ] || fail "no a9a-dist.model copied out of the fsgd-out volume"
    "$FSGD" predict --model "$1/a9a-dist.model" --data data/sets/a9a.t --out "$W/pred.txt" 2>/dev/null ||
        fail "fsgd predict does not take the compose job's model"
    [ "$(wc -l <"$W/pred.txt")" -eq "$(grep -c . data/sets/a9a.t)" ] || fail "predictions: wrong row count"
}
up_job "$W/up.log" -f tests/compose/long-job.yml --profile metrics
say "docker-compose up --build --scale worker=3 --exit-code-from aggregator aggregator: exited 0"

# state CONTAINER: "status exit_code restart_count"
state() { docker inspect -f '{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}' "$1"; }
# -a: Compose v2 lists running containers only, and these have exited
agg=$(dc ps -a -q aggregator)
[ -n "$agg" ] || fail "no aggregator container"
deadline=$((SECONDS + TIMEOUT))
while :; do
    read -r st code restarts < <(state "$agg") || fail "docker inspect $agg"
    [ "$restarts" -eq 0 ] || fail "the aggregator restarted ($restarts): it failed once (exit $code)"
    [ "$st" = exited ] && break
    [ $SECONDS -lt $deadline ] || fail "the aggregator still $st after ${TIMEOUT} s"
    sleep 2
done
[ "$code" -eq 0 ] || fail "the aggregator exited $code"
say "aggregator exited 0"
# the other shards end with shard 0; those the job does not have at once
for i in 1 2 3; do
    c=$(dc ps -a -q "aggregator-$i")
    [ -n "$c" ] || fail "no aggregator-$i container"
    for _ in $(seq 60); do read -r st code restarts < <(state "$c"); [ "$st" = exited ] && break; sleep 1; done
    [ "$st" = exited ] && [ "$code" -eq 0 ] && [ "$restarts" -eq 0 ] ||
        fail "aggregator-$i: $st, exit $code, $restarts restarts"
    # (a file, not a pipe: grep -q's early exit would fail a long log's docker logs under pipefail)
    docker logs "$c" >"$W/agg$i.log" 2>&1
    if [ "$i" -ge "$SHARDS" ]; then
        grep -q "aggregator shard $i: the job has $SHARDS shard(s)" "$W/agg$i.log" ||
            fail "aggregator-$i (not in a job of $SHARDS shards) does not say so: $(tail -3 "$W/agg$i.log")"
    else
        grep -q "shard $i/$SHARDS (keys k mod $SHARDS = $i, [0-9]* weights)" "$W/agg$i.log" ||
            fail "aggregator-$i does not say which keys it owns: $(tail -3 "$W/agg$i.log")"
    fi
done
say "aggregator shards 1-3 exited 0 ($SHARDS shards in the job)"
workers=$(dc ps -a -q worker)
[ "$(wc -w <<<"$workers")" -eq 3 ] || fail "expected 3 worker containers, got: $workers"
for w in $workers; do
    for _ in $(seq 30); do read -r st code restarts < <(state "$w"); [ "$st" = exited ] && break; sleep 1; done
    [ "$st" = exited ] && [ "$code" -eq 0 ] && [ "$restarts" -eq 0 ] ||
        fail "worker $w: $st, exit $code, $restarts restarts"
done

# The model and metrics, copied to a host folder as docs/run.md says.
copy_out "$W/out"
[ -s "$W/out/a9a-dist.metrics.json" ] || fail "a9a-dist.metrics.json not in the fsgd-out volume"
read -r auc epochs shards < <(python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(d["test"]["auc"], d["epochs"], d["shard"]["shards"])' \
    "$W/out/a9a-dist.metrics.json")
[ "$epochs" = "$EPOCHS" ] || fail "the compose job ran $epochs epochs, not $EPOCHS"
[ "$shards" = "$SHARDS" ] || fail "the compose job ran $shards aggregator shards, not $SHARDS"
python3 -c 'import sys; a, r = map(float, sys.argv[1:]); sys.exit(abs(a - r) > 0.005)' "$auc" "$ref_auc" ||
    fail "compose job's test AUC $auc, fsgd train's $ref_auc: more than 0.005 apart"
say "test auc $auc (fsgd train $ref_auc); model and metrics copied out of the fsgd-out volume"

# Prometheus: fsgd series from each role. count_over_time, not an instant
# query: the targets are gone now, so their series end in staleness markers.
q='count by (job, instance) (count_over_time(fsgd_steps_total[15m]))'
for _ in $(seq 15); do
    res=$(curl -sf http://127.0.0.1:9090/api/v1/query --data-urlencode "query=$q") && break
    sleep 2
done
[ -n "${res:-}" ] || fail "Prometheus API on 127.0.0.1:9090 did not answer"
read -r n_agg n_wrk < <(python3 -c '
import json, sys
r = json.loads(sys.argv[1])["data"]["result"]
print(sum(x["metric"]["job"] == "fsgd-aggregator" for x in r), sum(x["metric"]["job"] == "fsgd-worker" for x in r))' "$res")
[ "$n_agg" -ge 1 ] || fail "Prometheus has no fsgd series from the aggregator: $res"
[ "$n_wrk" -ge 1 ] || fail "Prometheus has no fsgd series from any worker: $res"
if [ "$SHARDS" -gt 1 ]; then
    q='count by (shard) (count_over_time(fsgd_steps_total{job="fsgd-aggregator"}[15m]))'
    res=$(curl -sf http://127.0.0.1:9090/api/v1/query --data-urlencode "query=$q") || fail "Prometheus API: $q"
    got=$(python3 -c 'import json, sys; print(" ".join(sorted(x["metric"].get("shard", "-") for x in json.loads(sys.argv[1])["data"]["result"])))' "$res")
    [ "$got" = "$(seq -s ' ' 0 $((SHARDS - 1)))" ] || fail "Prometheus has aggregator series of shards '$got', expected 0..$((SHARDS - 1))"
    say "Prometheus scraped every aggregator shard ($got)"
fi
say "Prometheus scraped fsgd_steps_total from the aggregator and $n_wrk of 3 workers"

# The documented command again, without down: Kafka still holds the first
# job's topics (fsgd refuses a used job name). docker-compose.yml alone: the
# job file's 5 epochs (quicker), so the metrics copied out say which job
# wrote them.
up_job "$W/up2.log"
copy_out "$W/out2"
epochs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["epochs"])' "$W/out2/a9a-dist.metrics.json")
[ "$epochs" = 5 ] || fail "after the second up the metrics are of a job of $epochs epochs, not the second job's 5"
say "the same up again without down: exited 0, a new model"
echo "ok (compose job: $((SECONDS - t_start)) s before teardown)"
