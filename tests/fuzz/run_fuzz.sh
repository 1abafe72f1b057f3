#!/usr/bin/env bash
# Builds every tests/fuzz/fuzz_*.c as a libFuzzer binary (clang,
# -fsanitize=fuzzer,address,undefined) and runs each for FUZZ_SECONDS over a
# scratch copy of its corpus (new inputs are kept in build/fuzz/corpus-*).
set -eu
BUILD=${BUILD:-build}
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
ONLY=${FUZZ_ONLY:-}
mkdir -p "$BUILD/fuzz"
srcs=$(find codec data trainer -name '*.c' -not -path 'trainer/cli/*' | sort)
flags="-std=c11 -O1 -g -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -DFSGD_HAVE_CUDA=0 \
       -Icodec/include -Idata/include -Itrainer/include"
# The library once, with fuzzer instrumentation but no main.
objs=()
for s in $srcs; do
    o="$BUILD/fuzz/obj/${s%.c}.o"; mkdir -p "$(dirname "$o")"
    if [ ! -f "$o" ] || [ "$s" -nt "$o" ]; then
        $FUZZ_CC $flags -fsanitize=fuzzer-no-link -c "$s" -o "$o"
    fi
    objs+=("$o")
done
for f in tests/fuzz/fuzz_*.c; do
    name=$(basename "$f" .c)
    [ -n "$ONLY" ] && [ "$name" != "$ONLY" ] && continue
    $FUZZ_CC $flags "$f" "${objs[@]}" -lrdkafka -llz4 -lyaml -lm -pthread -o "$BUILD/fuzz/$name"
    work="$BUILD/fuzz/corpus-${name#fuzz_}"
    mkdir -p "$work"
    cp -n tests/fuzz/corpus/"${name#fuzz_}"/* "$work"/ 2>/dev/null || true
    echo "== $name for ${FUZZ_SECONDS}s"
    "$BUILD/fuzz/$name" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 "$work" 2>&1 |
        grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' || true
done
