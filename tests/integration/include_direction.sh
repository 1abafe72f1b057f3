#!/usr/bin/env bash
# The build enforces which module may include which (the list of modules in
# the Makefile): a source sees only the public headers (M/include/fsgd/) of
# the modules below it, and one it may not see fails to build with an
# #error that names the header and its module.
#
# In a scratch tree shaped like this one (the real public headers, linked)
# the Makefile's own rule compiles one probe per module and public header,
# each a source in that module's folder that includes the header: the
# probes of a header the module may include build, the others fail with
# that message. The table below states the order on its own, so a change to
# the Makefile's include paths that lets a module see more (or less) fails
# here. Also: no source under trainer/ or tests/ steps around the include
# paths with "../"; a test sees a module's private headers only when the
# Makefile lists it for that folder (PRIVATE_...); and with a CUDA toolkit
# the CUDA plugin's sources (nvcc) are held to the same rule.
set -euo pipefail
# sanitizers: leave out: a static check of the sources; it runs no fsgd code
cd "$(dirname "$0")/../.."
repo=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The Makefile in the scratch tree, without the variables of a make that runs
# this suite (make asan's BUILD, SAN, ...).
clean_make() { env -i PATH="$PATH" HOME="${HOME:-/root}" make --no-print-directory -C "$tmp" -f "$repo/Makefile" "$@"; }

# What each module may include, besides itself; trainer/cli sees everything.
declare -A below=(
    [common]=""
    [codec]="common"
    [data]="common"
    [strategy]="common codec"
    [trainer/loss]="common"
    [trainer/backend]="common codec data trainer/loss"
    [trainer/core]="common codec data strategy trainer/loss trainer/backend"
    [trainer/kafka]="common"
    [trainer/distributed]="common codec data strategy trainer/loss trainer/backend trainer/core trainer/kafka"
    [trainer/job]="common codec data strategy trainer/loss trainer/backend trainer/core trainer/kafka trainer/distributed"
    [trainer/observe]="common codec data strategy trainer/loss trainer/backend trainer/core trainer/kafka trainer/distributed trainer/job"
    [trainer/serve]="common codec data strategy trainer/loss trainer/backend trainer/core trainer/kafka trainer/distributed trainer/job trainer/observe"
    [trainer/cli]="common codec data strategy trainer/loss trainer/backend trainer/core trainer/kafka trainer/distributed trainer/job trainer/observe trainer/serve"
)
modules="common codec data strategy trainer/loss trainer/backend trainer/core trainer/kafka trainer/distributed trainer/job trainer/observe trainer/serve trainer/cli"

# Every module with public headers is in the table, and every folder of
# trainer/ with sources is a module.
for d in */include trainer/*/include; do
    m=${d%/include}
    [ "${below[$m]+set}" ] || { echo "FAIL: $m has public headers but is not in this test's table"; exit 1; }
done
for d in trainer/*/; do
    m=${d%/}
    ls "$m"/*.c "$m"/*.cu >/dev/null 2>&1 || continue
    [ "${below[$m]+set}" ] || { echo "FAIL: $m has sources but is not in this test's table"; exit 1; }
done

# 1. No "../" includes under trainer/ or tests/ (they would reach any
# folder's files).
if grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"\.\./' trainer tests; then
    echo "FAIL: the includes above step out of their folder with ../: include a public header (fsgd/...)," \
        "or for a test a private one by plain name with the test listed in the Makefile's PRIVATE_ lists"
    exit 1
fi
echo "ok: no source under trainer/ or tests/ includes a path starting with ../"

# 2. The probes: the scratch tree has every public header dir (linked) and,
# in each module's folder, a probe per header.
hdrs=()
for m in $modules; do
    mkdir -p "$tmp/$m"
    [ -d "$m/include" ] && ln -s "$repo/$m/include" "$tmp/$m/include"
    for h in "$m"/include/fsgd/*.h; do
        [ -e "$h" ] && hdrs+=("$h")
    done
done
targets=()
for m in $modules; do
    for h in "${hdrs[@]}"; do
        n=$(basename "$h" .h)
        printf '#include "fsgd/%s.h"\ntypedef int fsgd_probe_t;\n' "$n" >"$tmp/$m/probe__$n.c"
        targets+=("build/$m/probe__$n.o")
    done
done
echo "probes: ${#targets[@]} (${#hdrs[@]} public headers in each of $(wc -w <<<"$modules") modules)"
clean_make -k CUDA=0 "${targets[@]}" >"$tmp/make.log" 2>&1 || true
# Direct includes of a stub: "In file included from M/probe__H.c:1:" then
# "build/layering/fsgd/H.h:1:2: error: #error "fsgd/H.h belongs to OWNER/, ...".
awk '/^In file included from .*probe__[a-z0-9_]*\.c:1:$/ { f = $5; sub(/:1:$/, "", f); next }
     f && /build\/layering\/fsgd\/.*error: #error "fsgd\/.* belongs to / {
         match($0, /belongs to [^,]*\//); print f, substr($0, RSTART + 11, RLENGTH - 12) } { f = "" }' \
    "$tmp/make.log" | sort -u >"$tmp/refused.txt"
bad=0
for m in $modules; do
    for h in "${hdrs[@]}"; do
        n=$(basename "$h" .h) owner=${h%/include/fsgd/*}
        may=0
        [ "$owner" = "$m" ] || [ "$m" = trainer/cli ] && may=1
        for b in ${below[$m]}; do [ "$b" = "$owner" ] && may=1; done
        if [ $may = 1 ] && [ ! -f "$tmp/build/$m/probe__$n.o" ]; then
            echo "FAIL: $m may include fsgd/$n.h ($owner) but its probe does not build:"
            grep -A3 "$m/probe__$n.c" "$tmp/make.log" | head -8
            bad=1
        elif [ $may = 0 ] && [ -f "$tmp/build/$m/probe__$n.o" ]; then
            echo "FAIL: $m may not include fsgd/$n.h ($owner), yet its probe builds"
            bad=1
        elif [ $may = 0 ] && ! grep -qx "$m/probe__$n.c $owner" "$tmp/refused.txt"; then
            echo "FAIL: $m/probe__$n.c (fsgd/$n.h, $owner) failed without the #error naming $owner:"
            grep -A3 "$m/probe__$n.c" "$tmp/make.log" | head -8
            bad=1
        fi
    done
done
[ $bad = 0 ] || exit 1
echo "ok: each module builds with the headers of the modules below it and fails on the others, e.g.:"
grep -m1 -A1 '^In file included from trainer/core/probe__dist.c:1:$' "$tmp/make.log" | sed 's/^/    /'

# 2b. A test's private headers: test_kafka_frame is listed for
# trainer/distributed (PRIVATE_trainer/distributed), so "wire.h" is found;
# a test that is not listed cannot find it.
mkdir -p "$tmp/tests/unit"
ln -s "$repo/trainer/distributed/wire.h" "$tmp/trainer/distributed/wire.h"
for t in test_kafka_frame test_probe_unlisted; do
    printf '#include "wire.h"\ntypedef int fsgd_probe_t;\n' >"$tmp/tests/unit/$t.c"
done
clean_make -k CUDA=0 build/tests/unit/test_kafka_frame.o build/tests/unit/test_probe_unlisted.o \
    >"$tmp/private.log" 2>&1 || true
[ -f "$tmp/build/tests/unit/test_kafka_frame.o" ] ||
    { echo "FAIL: test_kafka_frame is listed for trainer/distributed but cannot include wire.h:"; tail -8 "$tmp/private.log"; exit 1; }
[ ! -f "$tmp/build/tests/unit/test_probe_unlisted.o" ] && grep -q 'wire.h: No such file' "$tmp/private.log" ||
    { echo "FAIL: a test not listed for trainer/distributed included its wire.h (or failed otherwise):"; tail -8 "$tmp/private.log"; exit 1; }
echo "ok: a test listed for trainer/distributed includes wire.h by plain name; one not listed cannot"

# 3. The CUDA plugin (nvcc, the same include paths): a .cu in trainer/backend
# may use loss/'s formulas but not core/'s headers.
complete() { # the pieces the Makefile's cuda_missing asks for
    [ -x "$1/bin/nvcc" ] && [ -f "$1/include/cuda_runtime.h" ] && [ -f "$1/include/cusparse.h" ] &&
        ls "$1"/lib64/libcusparse.so "$1"/lib/libcusparse.so >/dev/null 2>&1
}
toolkit=
for d in "${CUDA_PATH:-}" /usr/local/cuda .deps/cuda; do
    [ -n "$d" ] && complete "$d" && { toolkit=$(cd "$d" && pwd -P); break; }
done
if [ -z "$toolkit" ] || [ "${CUDA:-}" = 0 ]; then
    echo "skipped: no CUDA toolkit (or CUDA=0): the nvcc probes need one"
    exit 0
fi
printf '#include "fsgd/loss_formulas.h"\n__global__ void probe_ok(double *y) { *y = fsgd_loss_formula_value(1, 0, 1); }\n' \
    >"$tmp/trainer/backend/probe_ok.cu"
printf '#include "fsgd/train.h"\n__global__ void probe_bad(void) {}\n' >"$tmp/trainer/backend/probe_bad.cu"
clean_make -k CUDA=1 CUDA_PATH="$toolkit" CUDA_ARCH="-gencode arch=compute_80,code=sm_80" \
    build/trainer/backend/probe_ok.cu.o build/trainer/backend/probe_bad.cu.o >"$tmp/nvcc.log" 2>&1 || true
[ -f "$tmp/build/trainer/backend/probe_ok.cu.o" ] ||
    { echo "FAIL: nvcc could not build a backend .cu that includes fsgd/loss_formulas.h:"; tail -20 "$tmp/nvcc.log"; exit 1; }
[ ! -f "$tmp/build/trainer/backend/probe_bad.cu.o" ] &&
    grep -q '#error "fsgd/train.h belongs to trainer/core/' "$tmp/nvcc.log" ||
    { echo "FAIL: nvcc built (or failed otherwise) a backend .cu that includes fsgd/train.h:"; tail -20 "$tmp/nvcc.log"; exit 1; }
echo "ok: nvcc ($toolkit) builds trainer/backend/*.cu with fsgd/loss_formulas.h and refuses fsgd/train.h"
