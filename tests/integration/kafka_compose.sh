#!/usr/bin/env bash
# docker-compose.yml and the images it names are consistent: `docker-compose
# config` accepts it (when the tool is installed), every fsgd service uses the
# entrypoint roles, the gpu profile's worker builds from docker/Dockerfile.gpu,
# and the job file the containers run parses with the real job parser.
set -euo pipefail
# real-kafka: skip
if [ "${FSGD_KAFKA:-mock}" != mock ]; then
    echo "SKIP: no broker involved (it checks docker-compose.yml and the images): runs in the embedded pass only"
    exit 77
fi
FSGD=${FSGD:-bin/fsgd}
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
    [ -n "$port" ] && [ "$(grep -c "aggregator:$port\|port: $port" docker/prometheus.yml)" -eq 2 ] ||
        { echo "docker/prometheus.yml does not scrape FSGD_METRICS_PORT '$port'"; exit 1; }
    echo "docker-compose config: ok"
else
    echo "docker-compose not installed: checking the file's references only"
fi
test -f docker/Dockerfile && test -x docker/entrypoint.sh && test -f docker/Dockerfile.gpu
grep -q "^FROM debian:bookworm AS build" docker/Dockerfile
grep -q "^USER fsgd" docker/Dockerfile
sh -n docker/entrypoint.sh
# the job the containers run is valid (paths are relative to /opt/fsgd there)
"$FSGD" run jobs/a9a-dist.yaml --data /nonexistent-check-only --help >/dev/null
cd data/sets 2>/dev/null && cd ../.. && test -f data/sets/a9a
