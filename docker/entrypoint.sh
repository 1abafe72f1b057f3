#!/bin/sh
# fsgd container entrypoint: ROLE [extra fsgd flags]
#   produce | worker | aggregator   the role against $FSGD_BROKERS with job $FSGD_JOB
#   run                             the whole job; embedded cluster unless $FSGD_BROKERS
#   anything else                   passed to fsgd as is (features, train, model assemble ...)
set -eu
role=${1:-run}
[ $# -gt 0 ] && shift
job=${FSGD_JOB:-jobs/a9a-dist.yaml}
case "$role" in
produce | worker | aggregator)
    : "${FSGD_BROKERS:?set FSGD_BROKERS (host:port of the Kafka brokers)}"
    set -- "$job" --brokers "$FSGD_BROKERS" "$@"
    [ "$role" = aggregator ] && [ -n "${FSGD_WORKERS:-}" ] && set -- "$@" --workers "$FSGD_WORKERS"
    exec fsgd "$role" "$@"
    ;;
run)
    if [ -n "${FSGD_BROKERS:-}" ]; then set -- --brokers "$FSGD_BROKERS" "$@"; fi
    exec fsgd run "$job" "$@"
    ;;
*)
    exec fsgd "$role" "$@"
    ;;
esac
