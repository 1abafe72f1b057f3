#!/usr/bin/env bash
# Installs the Debian packages fsgd needs to build and test, when run as root
# and something is missing; otherwise prints the exact apt-get line. Then the
# Apache Kafka broker the tests run against (jars from Maven Central into
# build/kafka/lib, tests/kafka/broker.sh install; cached, so a second run
# downloads nothing).
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --check  only report what is missing (exit 1 if any)
set -eu
cd "$(dirname "$0")/.."
build_pkgs="gcc make pkg-config librdkafka-dev liblz4-dev libyaml-dev libopenblas-dev libcunit1-dev"
test_pkgs="python3 python3-sklearn liblinear-tools kcat clang libclang-rt-dev iproute2 docker-compose"
# the real Kafka broker of the tests (tests/kafka): a JVM and Maven
test_pkgs="$test_pkgs openjdk-17-jre-headless maven"
# tests/bench/dist_net.sh: the 1 Gbit/s links (DNAT into the namespaces)
test_pkgs="$test_pkgs iptables"
missing=()
for p in $build_pkgs $test_pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
kafka_jars() {
    # the tests' broker; without java/mvn it says so and the suite skips it
    if command -v java >/dev/null && command -v mvn >/dev/null; then
        tests/kafka/broker.sh install
    fi
}
if [ ${#missing[@]} -eq 0 ]; then
    [ "${1:-}" = "--check" ] || kafka_jars
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "missing packages: ${missing[*]}"
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "fsgd needs these Debian packages; install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
kafka_jars
