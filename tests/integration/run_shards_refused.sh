#!/usr/bin/env bash
# What a sharded job cannot do is refused by fsgd run before anything
# starts (issue 42, item 13): epochs auto (the default), --follow,
# --optimizer ftrl, --init, --codec gradiveq or mqgrad with --shards 2 exit
# 2 with the reason, start no aggregator, produce no data and leave no job
# key folder (they used to be refused by the aggregator after the data was
# produced, and fsgd run died of SIGPIPE, exit 141, its key folder left).
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$FSGD" gen --rows 400 --dim 30 --nnz 4 --seed 5 --quiet --out "$tmp/d.svm"
"$FSGD" train --data "$tmp/d.svm" --epochs 1 --quiet --out "$tmp/m.fsgd" >/dev/null
check() {
    local want=$1; shift
    local rc=0
    "$FSGD" run --data "$tmp/d.svm" --shards 2 --name refused "$@" >"$tmp/out.txt" 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "run --shards 2 $*: status $rc, not 2: $(tail -3 "$tmp/out.txt")"
    grep -q -- "$want" "$tmp/out.txt" || fail "run --shards 2 $*: no '$want' in: $(cat "$tmp/out.txt")"
    ! grep -q -e "aggregator pid" -e "produced" -e "fsgd-key-" "$tmp/out.txt" ||
        fail "run --shards 2 $*: started before refusing: $(cat "$tmp/out.txt")"
    echo "PASS: --shards 2 $*: $(grep -o -- "$want.*" "$tmp/out.txt" | head -1 | cut -c1-90)"
}
check "epochs auto scores held-out rows on the whole model"
check "follow (continuous training) is not sharded yet" --follow
check "the ftrl optimizer is not sharded yet" --epochs 1 --optimizer ftrl
check "init (a model to start from) is not sharded yet" --epochs 1 --init "$tmp/m.fsgd"
check "strategy gradiveq cannot run on 2 shards" --epochs 1 --codec gradiveq
check "strategy mqgrad cannot run on 2 shards" --epochs 1 --codec mqgrad
echo "ok: run_shards_refused"
