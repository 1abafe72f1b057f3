#!/bin/sh
# fsgd container entrypoint: ROLE [extra fsgd flags]
#   produce | worker | aggregator   the role against $FSGD_BROKERS with job $FSGD_JOB
#   run                             the whole job; embedded cluster unless $FSGD_BROKERS
#   anything else                   passed to fsgd as is (features, train, model assemble ...)
set -eu
role=${1:-run}
[ $# -gt 0 ] && shift
job=${FSGD_JOB:-jobs/a9a-dist.yaml}
# Prometheus metrics on $FSGD_METRICS_PORT (all interfaces of the container:
# its network decides who can reach them); unset or empty: none
metrics=""
[ -n "${FSGD_METRICS_PORT:-}" ] && metrics="--metrics-port $FSGD_METRICS_PORT --metrics-addr ${FSGD_METRICS_ADDR:-0.0.0.0}"
case "$role" in
produce | worker | aggregator)
    : "${FSGD_BROKERS:?set FSGD_BROKERS (host:port of the Kafka brokers)}"
    set -- "$job" --brokers "$FSGD_BROKERS" "$@"
    [ "$role" = aggregator ] && [ -n "${FSGD_WORKERS:-}" ] && set -- "$@" --workers "$FSGD_WORKERS"
    # shellcheck disable=SC2086 # two flags and their values, no spaces
    [ "$role" != produce ] && set -- "$@" $metrics
    exec fsgd "$role" "$@"
    ;;
run)
    if [ -n "${FSGD_BROKERS:-}" ]; then set -- --brokers "$FSGD_BROKERS" "$@"; fi
    # shellcheck disable=SC2086
    set -- "$@" $metrics
    exec fsgd run "$job" "$@"
    ;;
*)
    exec fsgd "$role" "$@"
    ;;
esac
