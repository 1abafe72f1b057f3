#!/usr/bin/env bash
# Issue 40 item 5: `make run` on a machine without a GPU downloads only what
# a CPU run needs. scripts/install-deps.sh --run (make run's) fetches no
# CUDA wheels, no Kafka jars and no peer tools; the CUDA wheels come with
# CUDA=1 (CI, which compiles and links the CUDA plugin without a GPU) and
# never with CUDA=0. The script runs in a copy of scripts/ whose wheel,
# peer and broker installers are stand-ins that record being called.
set -euo pipefail
# real-kafka: skip
cd "$(dirname "$0")/../.."
[ -e /dev/nvidiactl ] || [ -d /proc/driver/nvidia ] && { echo "skipped: this machine has an NVIDIA GPU"; exit 77; }
scripts/install-deps.sh --check >/dev/null 2>&1 || { echo "skipped: packages missing here (install-deps.sh --check)"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$tmp/repo/scripts" "$tmp/repo/tests/kafka"
cp scripts/install-deps.sh "$tmp/repo/scripts/"
for stub in scripts/install-cuda-wheels.sh scripts/install-peers.sh tests/kafka/broker.sh; do
    printf '#!/bin/sh\necho "%s $*" >>"%s/called"\n' "$stub" "$tmp" >"$tmp/repo/$stub"
    chmod +x "$tmp/repo/$stub"
done
deps() { : >"$tmp/called"; (cd "$tmp/repo" && env -u CUDA CUDA_PATH="$tmp/none" "$@" >"$tmp/out" 2>&1) || fail "$* exited $?: $(cat "$tmp/out")"; }

deps scripts/install-deps.sh --run
[ ! -s "$tmp/called" ] || fail "make run's install-deps.sh --run on a CPU machine called: $(cat "$tmp/called")"
grep -q 'no NVIDIA GPU here' "$tmp/out" || fail "it did not say why the CUDA wheels are left out: $(cat "$tmp/out")"
deps env CUDA=1 scripts/install-deps.sh --run
grep -q 'install-cuda-wheels.sh' "$tmp/called" || fail "CUDA=1 did not fetch the CUDA wheels"
deps env CUDA=0 scripts/install-deps.sh
grep -q 'install-cuda-wheels.sh' "$tmp/called" && fail "CUDA=0 fetched the CUDA wheels"
grep -q 'install-peers.sh' "$tmp/called" || fail "the full install (make check) no longer installs the peers"
deps scripts/install-deps.sh
grep -q 'install-cuda-wheels.sh' "$tmp/called" && fail "the full install fetched the CUDA wheels on a machine without a GPU"
grep -q 'CUDA=1' .ci/run || fail ".ci/run no longer asks for the CUDA build (CUDA=1)"
echo "ok: no CUDA wheels, jars or peers for make run on a CPU machine; CUDA=1 fetches the wheels"
