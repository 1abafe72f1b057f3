#!/usr/bin/env bash
# make fuzz can fail (issue 12, finding 7): it used to pipe every target
# through `grep ... || true`, so a target that called abort() printed
# "deadly signal", exited 0 and left crash-* in the repository root. Here a
# tiny target that aborts on an input in its (temporary) corpus must make
# `make fuzz FUZZ_SECONDS=5` fail, with the crash input under $BUILD/fuzz/
# and nothing in the working directory; the same target without that input
# passes. Undefined behaviour is a finding too: an input that overflows a
# signed int must fail it the same way (UBSan used to print and go on).
set -euo pipefail
. "$(dirname "$0")/lib/skip.bash"
needs_cmd clang
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/fuzz_selftest.c" <<'C'
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* FNV-1a: a comparison of hashes gives the fuzzer nothing to follow, so it
 * does not find the crashing input by itself within seconds */
static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char key[] = "CRASH now", ub[] = "UB now";
    if (fnv(data, size) == fnv((const uint8_t *)key, sizeof key - 1))
        abort();
    if (fnv(data, size) == fnv((const uint8_t *)ub, sizeof ub - 1)) {
        volatile int big = INT_MAX;
        return big + (int)size; /* signed overflow */
    }
    return 0;
}
C
# libFuzzer must be there (clang without compiler-rt cannot link it)
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$tmp/probe.c"
clang -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" 2>/dev/null || { echo "skipped: clang cannot link libFuzzer"; exit 77; }
before=$(ls crash-* leak-* timeout-* 2>/dev/null || true)
mkdir -p "$tmp/corpus/selftest"
echo harmless >"$tmp/corpus/selftest/ok"
# no crash in the corpus, 5 s of fuzzing: passes
make --no-print-directory fuzz FUZZ_SECONDS=5 BUILD="$tmp/build" FUZZ_TARGETS="$tmp/fuzz_selftest.c" \
    FUZZ_CORPUS="$tmp/corpus" >"$tmp/clean.log" 2>&1 || { cat "$tmp/clean.log"; echo "make fuzz failed without a crash"; exit 1; }
grep -q "fuzzing: no target failed" "$tmp/clean.log"
# a crashing input in the corpus: make fuzz fails, names the target, keeps
# the input under build/
printf 'CRASH now' >"$tmp/corpus/selftest/crash-input"
rc=0
make --no-print-directory fuzz FUZZ_SECONDS=5 BUILD="$tmp/build2" FUZZ_TARGETS="$tmp/fuzz_selftest.c" \
    FUZZ_CORPUS="$tmp/corpus" >"$tmp/crash.log" 2>&1 || rc=$?
cat "$tmp/crash.log"
[ $rc -ne 0 ] || { echo "make fuzz exited 0 although a target crashed"; exit 1; }
grep -q "fuzzing failed: fuzz_selftest" "$tmp/crash.log"
ls "$tmp/build2/fuzz/artifacts/" | grep -q '^fuzz_selftest-crash-' || { echo "no crash input under build/"; exit 1; }
# undefined behaviour on an input in the corpus: make fuzz fails too
rm "$tmp/corpus/selftest/crash-input"
printf 'UB now' >"$tmp/corpus/selftest/ub-input"
rc=0
make --no-print-directory fuzz FUZZ_SECONDS=5 BUILD="$tmp/build3" FUZZ_TARGETS="$tmp/fuzz_selftest.c" \
    FUZZ_CORPUS="$tmp/corpus" >"$tmp/ub.log" 2>&1 || rc=$?
cat "$tmp/ub.log"
[ $rc -ne 0 ] || { echo "make fuzz exited 0 although a target hit undefined behaviour"; exit 1; }
grep -q "fuzzing failed: fuzz_selftest" "$tmp/ub.log"
grep -q "runtime error: signed integer overflow" "$tmp/build3/fuzz/fuzz_selftest.log"
after=$(ls crash-* leak-* timeout-* 2>/dev/null || true)
[ "$before" = "$after" ] || { echo "crash files left in $(pwd): $after"; exit 1; }
echo "make fuzz fails on a crash or undefined behaviour and keeps the input in build/fuzz/artifacts"
