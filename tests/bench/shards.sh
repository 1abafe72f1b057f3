#!/usr/bin/env bash
# What sharding the aggregator costs (issue 25), measured by fsgd train
# --shards S on fsgd gen CTR-shaped rows (Zipf-popular low indices, 40
# nonzeros a row): SH_ROWS training rows (default 1e6), 2^SH_BITS keys
# (default 24), one epoch, 2 threads.
#   busy_mean/busy_max: the busiest shard's keys over the mean keys a step
#     (interleaved keys, k to shard k mod S), mean and max over the steps;
#   range_mean/range_max: the same for S contiguous key ranges on the same
#     steps' keys, which interleaving replaces;
#   bits_per_key: the uplink messages' bytes (all S parts) x 8 over the
#     entries sent, and its ratio to S = 1's (bits_vs_s1).
#   SH_CODECS   codecs (default "none fastsgd"); SH_SHARDS (default "1 2 4 8")
#   SH_ORDER    "gen" (fsgd gen's indices, which scatter the popular
#               features over the key space) and/or "freq" (the same rows
#               with features renumbered by training frequency, the most
#               frequent first: a frequency-ordered vocabulary, as CTR
#               pipelines build them); default "gen freq"
# Lines:
#   bench shards order=O codec=C shards=S busy_mean=.. busy_max=.. range_mean=..
#     range_max=.. bits_per_key=.. bits_vs_s1=.. test_auc=.. train_s=..
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
ROWS=${SH_ROWS:-1000000}
TEST_ROWS=${SH_TEST_ROWS:-50000}
BITS=${SH_BITS:-24}
CODECS=${SH_CODECS:-none fastsgd}
SHARDS=${SH_SHARDS:-1 2 4 8}
ORDERS=${SH_ORDER:-gen freq}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

"$FSGD" gen --rows $((ROWS + TEST_ROWS)) --dim $((1 << BITS)) --nnz 40 --seed 1 --quiet --out "$tmp/all.svm"
head -n "$ROWS" "$tmp/all.svm" >"$tmp/train.svm"
tail -n "$TEST_ROWS" "$tmp/all.svm" >"$tmp/test.svm"
rm -f "$tmp/all.svm"
# features renumbered by their count in the training rows, most frequent as 1
# (ties by index; test-only features after them)
freq_order() {
    python3 - "$tmp/train.svm" "$tmp/test.svm" "$tmp/train.freq.svm" "$tmp/test.freq.svm" <<'PY'
import collections, sys
tr, te, tro, teo = sys.argv[1:5]
count = collections.Counter()
with open(tr) as f:
    for line in f:
        count.update(int(t.split(":", 1)[0]) for t in line.split()[1:])
rank = {k: i + 1 for i, (k, _) in enumerate(sorted(count.items(), key=lambda kv: (-kv[1], kv[0])))}
def remap(src, dst):
    with open(src) as f, open(dst, "w") as o:
        for line in f:
            parts = line.split()
            feats = []
            for t in parts[1:]:
                k, v = t.split(":", 1)
                k = int(k)
                if k not in rank:
                    rank[k] = len(rank) + 1
                feats.append((rank[k], v))
            feats.sort()
            o.write(parts[0] + "".join(" %d:%s" % kv for kv in feats) + "\n")
remap(tr, tro)
remap(te, teo)
PY
}
for order in $ORDERS; do
    suffix="" dim=(--dim $((1 << BITS)))
    if [ "$order" = freq ]; then
        freq_order
        suffix=.freq dim=() # the vocabulary's size: its largest index
    fi
    for codec in $CODECS; do
        for s in $SHARDS; do
            "$FSGD" train --data "$tmp/train$suffix.svm" --test "$tmp/test$suffix.svm" "${dim[@]}" --threads 2 --epochs 1 \
                --codec "$codec" --shards "$s" --quiet --metrics-json "$tmp/$order.$codec.$s.json" >/dev/null
            python3 - "$tmp" "$order" "$codec" "$s" <<'PY'
import json, sys
t, order, codec, s = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
j = json.load(open(f"{t}/{order}.{codec}.{s}.json"))
bits = lambda m: m["wire_bytes"] * 8 / (m["raw_bytes"] / 8)
try:
    ref = bits(json.load(open(f"{t}/{order}.{codec}.1.json")))
except FileNotFoundError:
    ref = float("nan")
f = lambda v: "nan" if v is None else "%.4f" % v
print("bench shards order=%s codec=%s shards=%d busy_mean=%s busy_max=%s range_mean=%s range_max=%s bits_per_key=%.3f "
      "bits_vs_s1=%.4f test_auc=%.5f train_s=%.1f" % (order, codec, s, f(j["shard_busy_mean"]), f(j["shard_busy_max"]),
      f(j["shard_range_busy_mean"]), f(j["shard_range_busy_max"]), bits(j), bits(j) / ref, j["test"]["auc"],
      j["train_seconds"]))
PY
        done
    done
done
