#!/usr/bin/env bash
# Installs the Debian packages fsgd needs to build and test, when run as root
# and something is missing; otherwise prints the exact apt-get line. Then the
# Apache Kafka broker the tests run against (jars from Maven Central into
# build/kafka/lib, tests/kafka/broker.sh install; cached, so a second run
# downloads nothing).
#   scripts/install-deps.sh          build + test dependencies
#   scripts/install-deps.sh --run    what building and running needs (make run):
#                                    the build packages, no test tools, broker jars or peers
#   scripts/install-deps.sh --check  only report what is missing (exit 1 if any)
# Then NVIDIA's CUDA wheels into .deps/cuda (install-cuda-wheels.sh, ~520 MB)
# when CUDA=1 asks for them (CI: the CUDA backend compiled and linked on a
# machine without a GPU), or when this machine has an NVIDIA GPU and no
# complete toolkit at CUDA_PATH (default /usr/local/cuda); never with CUDA=0,
# and not on a machine without a GPU otherwise (issue 40 item 5: a CPU user
# downloaded them for nothing). And last, except with --run, the pinned peer
# tools (Vowpal Wabbit, confluent-kafka) into build/venv (install-peers.sh).
set -eu
cd "$(dirname "$0")/.."
peers=scripts/install-peers.sh

# The pieces the Makefile requires of a toolkit (see cuda_missing there).
cuda_complete() {
    [ -x "$1/bin/nvcc" ] && [ -f "$1/include/cuda_runtime.h" ] && [ -f "$1/include/cusparse.h" ] &&
        { [ -e "$1/lib64/libcusparse.so" ] || [ -e "$1/lib/libcusparse.so" ]; } &&
        { [ -e "$1/lib64/libcudart.so" ] || [ -e "$1/lib/libcudart.so" ]; }
}
have_gpu() { [ -e /dev/nvidiactl ] || [ -d /proc/driver/nvidia ]; }
install_cuda() {
    [ "${CUDA:-}" = 0 ] && return 0
    cuda_complete "${CUDA_PATH:-/usr/local/cuda}" && return 0
    if [ "${CUDA:-}" != 1 ] && ! have_gpu; then
        [ "${1:-}" = --check ] || cuda_complete .deps/cuda ||
            echo "fsgd: no NVIDIA GPU here: the CUDA wheels are not downloaded (CUDA=1 scripts/install-deps.sh fetches them)"
        return 0
    fi
    [ "${1:-}" = --check ] && { cuda_complete .deps/cuda || echo "missing: CUDA toolkit (scripts/install-cuda-wheels.sh)"; return 0; }
    scripts/install-cuda-wheels.sh
}
build_pkgs="gcc make pkg-config librdkafka-dev liblz4-dev libyaml-dev libopenblas-dev liblapacke-dev libcunit1-dev libmicrohttpd-dev libjansson-dev libxxhash-dev libsodium-dev zlib1g-dev libzstd-dev"
# xz-utils: the compressed data sets (data/sets/*.xz, scripts/unpack-data.sh)
test_pkgs="xz-utils python3 python3-pip python3-venv python3-sklearn liblinear-tools kcat clang libclang-rt-dev iproute2 docker-compose"
# the real Kafka broker of the tests (tests/kafka): a JVM and Maven
test_pkgs="$test_pkgs openjdk-17-jre-headless maven"
# tests/bench/dist_net.sh: the 1 Gbit/s links (DNAT into the namespaces)
test_pkgs="$test_pkgs iptables"
# fsgd plot draws with gnuplot; the /metrics test scrapes with curl
test_pkgs="$test_pkgs gnuplot-nox curl"
# tests/integration/compose_up.sh: docker-compose.yml run for real on a Docker
# daemon the test starts, its Debian base image made with debootstrap
test_pkgs="$test_pkgs docker.io debootstrap"
# tests/integration/python_pkg.sh: the Python package's tests (NumPy, SciPy and
# scikit-learn come with python3-sklearn)
test_pkgs="$test_pkgs python3-pytest"
# tests/bench/serve.sh: HTTP load on fsgd serve
test_pkgs="$test_pkgs wrk"
mode=${1:-}
[ "$mode" = --run ] && test_pkgs=""
missing=()
for p in $build_pkgs $test_pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
kafka_jars() {
    # the tests' broker; without java/mvn it says so and the suite skips it
    if command -v java >/dev/null && command -v mvn >/dev/null; then
        tests/kafka/broker.sh install
        # kafka_scram.sh's broker: Debian's librdkafka cannot do SCRAM with Kafka 4
        FSGD_KAFKA_VERSION=3.9.1 tests/kafka/broker.sh install
    fi
}
if [ ${#missing[@]} -eq 0 ]; then
    if [ "$mode" = --run ]; then
        install_cuda
        exit 0
    fi
    [ "$mode" = "--check" ] || kafka_jars
    install_cuda "$mode"
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
if [ "$mode" = --run ]; then
    install_cuda
    exit 0
fi
kafka_jars
install_cuda
"$peers"
