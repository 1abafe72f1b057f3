#!/usr/bin/env bash
# fsgd train's models, byte for byte, as the commit that split train.c by idea
# (issue 41, base bd4a7c3) wrote them: a refactoring of the trainer must not
# move a bit. Each run below takes a different path through trainer/core (in
# memory with early stopping and best weights, fixed epochs on one thread,
# FTRL, simulated shards, a codec, a warm start, the streamed cache), on a9a
# and on a small generated CTR set; the SHA-256 of every model file must be
# the one in tests/golden/train/models.sha256, made by the base commit's
# binary. Threads are always given: how a step's gradient is split over
# threads decides the last bits of its sums.
#
# A change that means to change the models (new math, a new default)
# rewrites the sums with FSGD_WRITE_SUMS=1 and says so in its commit.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
needs_data a9a a9a.t
root=$(cd "$(dirname "$0")/../.." && pwd)
sums=$root/tests/golden/train/models.sha256
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FSGD" gen --rows 20000 --dim 2^18 --nnz 30 --seed 11 --quiet --out "$tmp/ctr.svm"
train() { # NAME ARGS...: trains into $tmp/models/NAME.fsgd
    local name=$1
    shift
    "$FSGD" train "$@" --seed 3 --quiet --out "$tmp/models/$name.fsgd" > "$tmp/$name.txt" 2>&1 ||
        fail "$name: fsgd train failed: $(cat "$tmp/$name.txt")"
}
mkdir -p "$tmp/models"
A=(--data "$DATA/a9a" --test "$DATA/a9a.t")
C=(--data "$tmp/ctr.svm")
train a9a_auto "${A[@]}" --threads 2
train a9a_epochs_1thread "${A[@]}" --threads 1 --epochs 2
train a9a_ftrl "${A[@]}" --threads 2 --optimizer ftrl --epochs 2
train a9a_fastsgd "${A[@]}" --threads 2 --epochs 1 --codec fastsgd
train ctr_auto "${C[@]}" --threads 2
train ctr_shards "${C[@]}" --threads 2 --epochs 2 --shards 3
train ctr_state "${C[@]}" --threads 2 --epochs 1 --save-state
train ctr_warm "${C[@]}" --threads 2 --epochs 1 --init "$tmp/models/ctr_state.fsgd"
train ctr_cache "${C[@]}" --threads 2 --epochs 2 --cache "$tmp/ctr.cache"
train ctr_cache_again "${C[@]}" --threads 2 --epochs 2 --cache "$tmp/ctr.cache"
train ctr_cache_auto "${C[@]}" --threads 2 --cache "$tmp/ctr_auto.cache"
train a9a_cache_ftrl_1thread --data "$DATA/a9a" --threads 1 --epochs 2 --optimizer ftrl --cache "$tmp/a9a.cache"

(cd "$tmp/models" && sha256sum *.fsgd) > "$tmp/now.sha256"
if [ "${FSGD_WRITE_SUMS:-0}" = 1 ]; then
    mkdir -p "$(dirname "$sums")" && cp "$tmp/now.sha256" "$sums"
    echo "train_identical: wrote $sums"
    exit 0
fi
[ -s "$sums" ] || fail "$sums missing"
diff "$sums" "$tmp/now.sha256" > "$tmp/diff" ||
    fail "models differ from $sums (-: expected, +: now):$(printf '\n'; cat "$tmp/diff")"
echo "PASS train_identical: $(wc -l < "$sums") models byte for byte the same"
