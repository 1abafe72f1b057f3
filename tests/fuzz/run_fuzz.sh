#!/usr/bin/env bash
# Builds every tests/fuzz/fuzz_*.c as a libFuzzer binary (clang,
# -fsanitize=fuzzer,address,undefined) and runs each for FUZZ_SECONDS over a
# scratch copy of its corpus (new inputs are kept in $BUILD/fuzz/corpus-*).
# Every target runs even after one fails; the script exits non-zero when any
# target found a crash or undefined behaviour (or failed to build), listing
# them. Crash inputs go to $BUILD/fuzz/artifacts/, never the working
# directory.
#
# FUZZ_ONLY=fuzz_x runs one target; FUZZ_TARGETS="a.c b.c" replaces the list
# of target sources and FUZZ_CORPUS the corpus root (default
# tests/fuzz/corpus; a target fuzz_x reads FUZZ_CORPUS/x), which is how
# tests/integration/fuzz_tool.sh checks that a crash fails this script.
set -euo pipefail
BUILD=${BUILD:-build}
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
ONLY=${FUZZ_ONLY:-}
TARGETS=${FUZZ_TARGETS:-$(ls tests/fuzz/fuzz_*.c)}
CORPUS=${FUZZ_CORPUS:-tests/fuzz/corpus}
mkdir -p "$BUILD/fuzz/artifacts"
# -fno-sanitize-recover: undefined behaviour is a finding (it stops the run
# and fails the target), as under `make asan`, not a line in the log.
# Every module's public headers (make checks which module may use which).
flags="-std=c11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
       -D_GNU_SOURCE -DFSGD_HAVE_CUDA=0 \
       -Icommon/include -Icodec/include -Idata/include -Istrategy/include $(printf -- '-I%s ' trainer/*/include)"
# The library once, with fuzzer instrumentation but no main, for the targets
# that use it.
objs=()
build_lib() {
    [ ${#objs[@]} -gt 0 ] && return 0
    local s o
    # Objects built with other flags (or another compiler) are rebuilt.
    if [ "$(cat "$BUILD/fuzz/obj/.flags" 2>/dev/null)" != "$FUZZ_CC $flags" ]; then
        rm -rf "$BUILD/fuzz/obj"
        mkdir -p "$BUILD/fuzz/obj"
        echo "$FUZZ_CC $flags" >"$BUILD/fuzz/obj/.flags"
    fi
    for s in $(find common codec data strategy trainer -name '*.c' -not -path 'trainer/cli/*' | sort); do
        o="$BUILD/fuzz/obj/${s%.c}.o"; mkdir -p "$(dirname "$o")"
        if [ ! -f "$o" ] || [ "$s" -nt "$o" ]; then
            $FUZZ_CC $flags -fsanitize=fuzzer-no-link -c "$s" -o "$o"
        fi
        objs+=("$o")
    done
}
failed=()
for f in $TARGETS; do
    name=$(basename "$f" .c)
    [ -n "$ONLY" ] && [ "$name" != "$ONLY" ] && continue
    link=()
    # the private headers this target may include (the Makefile's PRIVATE_ lists)
    private=()
    for p in ${FUZZ_PRIVATE:-}; do
        if [ "${p%%=*}" = "$name" ]; then private+=("-I${p#*=}"); fi
    done
    if [ ${#private[@]} -gt 0 ] || grep -qE '#include "(fsgd/|codec_fuzz\.h)' "$f"; then
        build_lib
        link=("${objs[@]}" -lrdkafka -llz4 -lz -lzstd -lyaml -lmicrohttpd -ljansson -lsodium -llapacke -lopenblas -lm -ldl -pthread)
    fi
    if ! $FUZZ_CC $flags ${private[@]+"${private[@]}"} "$f" ${link[@]+"${link[@]}"} -o "$BUILD/fuzz/$name"; then
        failed+=("$name (build)")
        continue
    fi
    work="$BUILD/fuzz/corpus-${name#fuzz_}"
    mkdir -p "$work"
    for c in "$CORPUS/${name#fuzz_}"/*; do
        [ -f "$c" ] && [ ! -e "$work/$(basename "$c")" ] && cp "$c" "$work/"
    done
    echo "== $name for ${FUZZ_SECONDS}s"
    log="$BUILD/fuzz/$name.log"
    rc=0
    "$BUILD/fuzz/$name" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
        -artifact_prefix="$BUILD/fuzz/artifacts/$name-" "$work" >"$log" 2>&1 || rc=$?
    sed -n -E '/stat::number_of_executed_units|ERROR|SUMMARY|Done|deadly signal|Test unit written/p' "$log"
    if [ $rc -ne 0 ]; then
        failed+=("$name (exit $rc; log $log)")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing failed: ${failed[*]}"
    echo "crash inputs: $(ls "$BUILD/fuzz/artifacts" | tr '\n' ' ')"
    exit 1
fi
echo "fuzzing: no target failed"
