#!/usr/bin/env bash
# Runs every benchmark binary and the CLI benchmarks. Each prints
# machine-readable lines "bench <name> key=value ..." with ratios to a
# reference measured in the same run.
set -eu
BUILD=${BUILD:-build}
FSGD=${FSGD:-bin/fsgd}
export FSGD_DATA=${FSGD_DATA:-$(scripts/unpack-data.sh "$BUILD/datasets")}
for b in "$BUILD"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo "== $b"
    "$b"
done
for s in tests/bench/*.sh; do
    [ "$(basename "$s")" = run_bench.sh ] && continue
    echo "== $s"
    FSGD=$FSGD bash "$s"
done
