#!/bin/sh
# fsgd container entrypoint: ROLE [extra fsgd flags]
#   produce | worker | aggregator   the role against $FSGD_BROKERS with job $FSGD_JOB
#   run                             the whole job; embedded cluster unless $FSGD_BROKERS
#   anything else                   passed to fsgd as is (features, train, model assemble ...)
# A sharded job: $FSGD_SHARDS aggregator shards (default 1); the aggregator
# runs shard $FSGD_SHARD (default 0) of them, and exits 0 with a line when
# that shard is not in the job (docker-compose.yml's aggregator-I services).
set -eu
role=${1:-run}
[ $# -gt 0 ] && shift
job=${FSGD_JOB:-jobs/a9a-dist.yaml}
shards=${FSGD_SHARDS:-1}
shard=${FSGD_SHARD:-0}
case "$shards$shard" in
*[!0-9]*) echo "fsgd entrypoint: FSGD_SHARDS '$shards' and FSGD_SHARD '$shard' must be numbers" >&2; exit 2 ;;
esac
[ "$shards" -ge 1 ] || { echo "fsgd entrypoint: FSGD_SHARDS '$shards': at least 1" >&2; exit 2; }
if [ "$role" = aggregator ] && [ "$shard" -ge "$shards" ]; then
    echo "fsgd entrypoint: aggregator shard $shard: the job has $shards shard(s) (FSGD_SHARDS): nothing to run"
    exit 0
fi
sharding=""
[ "$shards" -gt 1 ] && sharding="--shards $shards"
# Prometheus metrics on $FSGD_METRICS_PORT (all interfaces of the container:
# its network decides who can reach them); unset or empty: none
metrics=""
[ -n "${FSGD_METRICS_PORT:-}" ] && metrics="--metrics-port $FSGD_METRICS_PORT --metrics-addr ${FSGD_METRICS_ADDR:-0.0.0.0}"
case "$role" in
produce | worker | aggregator)
    : "${FSGD_BROKERS:?set FSGD_BROKERS (host:port of the Kafka brokers)}"
    set -- "$job" --brokers "$FSGD_BROKERS" "$@"
    [ "$role" = aggregator ] && [ -n "${FSGD_WORKERS:-}" ] && set -- "$@" --workers "$FSGD_WORKERS"
    [ "$role" = aggregator ] && [ "$shards" -gt 1 ] && set -- "$@" --shard "$shard/$shards"
    # shellcheck disable=SC2086 # flags and their values, no spaces
    set -- "$@" $sharding
    # shellcheck disable=SC2086
    [ "$role" != produce ] && set -- "$@" $metrics
    exec fsgd "$role" "$@"
    ;;
run)
    if [ -n "${FSGD_BROKERS:-}" ]; then set -- --brokers "$FSGD_BROKERS" "$@"; fi
    # shellcheck disable=SC2086
    set -- "$@" $sharding $metrics
    exec fsgd run "$job" "$@"
    ;;
*)
    exec fsgd "$role" "$@"
    ;;
esac
