#!/usr/bin/env bash
# fsgd train --shards S through the CLI (issue 25): with codec none the
# model file is the same bit for bit at S = 1, 2 and 4 (and with --staleness,
# --save-state and --init);
# the metrics JSON
# reports the shards and the busiest shard's share of a step's keys (and
# what contiguous ranges would have had; on a9a both are near 1); the
# strategies that cannot shard and --cache are refused with a clear error
# and a non-zero exit.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
D=$DATA
needs_data a9a a9a.t
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
tr() { "$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --threads 2 --batch 4096 --epochs 3 --quiet "$@"; }

for s in 1 2 4; do
    tr --codec none --shards "$s" --out "$tmp/m$s.fsgd" --metrics-json "$tmp/m$s.json" > /dev/null
done
cmp "$tmp/m1.fsgd" "$tmp/m2.fsgd" || fail "codec none: S = 2's model file differs from S = 1's"
cmp "$tmp/m1.fsgd" "$tmp/m4.fsgd" || fail "codec none: S = 4's model file differs from S = 1's"
/usr/bin/python3 - "$tmp" <<'PY'
import json, math, sys
t = sys.argv[1]
m = {s: json.load(open(f"{t}/m{s}.json")) for s in (1, 2, 4)}
assert m[1]["shards"] == 1 and m[1]["shard_busy_mean"] is None, m[1]
for s in (2, 4):
    j = m[s]
    assert j["shards"] == s and j["threads"] == 2, (s, j["shards"], j["threads"])
    assert 1 <= j["shard_busy_mean"] <= j["shard_busy_max"] <= s, j
    assert 1 <= j["shard_range_busy_mean"] <= j["shard_range_busy_max"] <= s, j
    assert j["raw_bytes"] == m[1]["raw_bytes"] and j["wire_bytes"] > m[1]["wire_bytes"], j
    assert j["test"]["auc"] == m[1]["test"]["auc"], (j["test"]["auc"], m[1]["test"]["auc"])
print("shards: none bit for bit at S = 1, 2, 4; busiest shard %.3f / %.3f of the mean (contiguous ranges %.3f / %.3f)"
      % (m[2]["shard_busy_mean"], m[4]["shard_busy_mean"], m[2]["shard_range_busy_mean"],
         m[4]["shard_range_busy_mean"]))
PY

# --staleness τ: the sharded step keeps θ before its update for the rewind,
# so the simulated delay gives S = 1's model too
tr --codec none --staleness 3 --shards 1 --out "$tmp/st1.fsgd" > /dev/null
tr --codec none --staleness 3 --shards 4 --out "$tmp/st4.fsgd" > /dev/null
cmp "$tmp/st1.fsgd" "$tmp/st4.fsgd" || fail "codec none, staleness 3: S = 4's model file differs from S = 1's"

# --save-state writes the shards' optimizer state back into one model, and
# --init hands it to the shards again: S = 1's files, Adam and FTRL
for opt in adam ftrl; do
    for s in 1 4; do
        tr --codec none --optimizer "$opt" --shards "$s" --save-state --out "$tmp/$opt.s$s.fsgd" > /dev/null
        tr --codec none --optimizer "$opt" --shards "$s" --epochs 1 --init "$tmp/$opt.s$s.fsgd" --save-state \
            --out "$tmp/$opt.i$s.fsgd" > /dev/null
    done
    cmp "$tmp/$opt.s1.fsgd" "$tmp/$opt.s4.fsgd" || fail "$opt --save-state: S = 4's file differs from S = 1's"
    cmp "$tmp/$opt.i1.fsgd" "$tmp/$opt.i4.fsgd" || fail "$opt --init: S = 4's file differs from S = 1's"
done

# refusals: non-zero exit, the strategy (or option) named with the reason
refuse() { # EXPECTED ARGS...
    local want=$1 rc=0
    shift
    tr "$@" > "$tmp/out.txt" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || fail "$* was not refused"
    grep -q -- "$want" "$tmp/out.txt" || fail "$*: no '$want' in: $(cat "$tmp/out.txt")"
}
refuse "strategy gradiveq cannot run on 2 shards" --codec gradiveq --shards 2
refuse "strategy mqgrad cannot run on 4 shards" --codec mqgrad --shards 4
refuse "strategy gtopk: k=3 entries cannot be split over 4 shards" --codec gtopk:k=3 --shards 4
refuse "not streamed from a cache (--cache)" --codec none --shards 2 --cache "$tmp/rows.cache"
echo "shards: refusals ok"
