#!/usr/bin/env bash
# Installs the Debian packages fsgd needs to build and test, when run as root
# and something is missing; otherwise prints the exact apt-get line. Then the
# pinned peer tools (Vowpal Wabbit, confluent-kafka) into build/venv
# (scripts/install-peers.sh).
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --check  only report what is missing (exit 1 if any)
set -eu
peers="$(dirname "$0")/install-peers.sh"
build_pkgs="gcc make pkg-config librdkafka-dev liblz4-dev libyaml-dev libopenblas-dev libcunit1-dev"
test_pkgs="python3 python3-venv python3-sklearn liblinear-tools kcat clang libclang-rt-dev iproute2 docker-compose"
missing=()
for p in $build_pkgs $test_pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exec "$peers" "$@"
fi
if [ "${1:-}" = "--check" ]; then
    echo "missing packages: ${missing[*]}"
    "$peers" --check || true
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
"$peers"
