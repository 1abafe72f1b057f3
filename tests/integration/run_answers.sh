#!/usr/bin/env bash
# Small wrong answers of the distributed roles (issue 27, part 4), on the
# embedded cluster:
#  1. more than 64 epochs: "epochs" and per_epoch count every one of them;
#  2. no test set: the summary says so and the JSON has null, never 0.0; an
#     SVM run prints and records no logloss (its scores are margins);
#  3. a standalone worker stopped by SIGTERM exits 143;
#  4. --resume with another --model, or other data: refused, exit 2 (not 70),
#     the checkpoint kept;
# and a worker on brokers that never answer fails in bounded time (part 3);
# a missing --data or --test file is refused before anything starts.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
PY=/usr/bin/python3
tmp=$(mktemp -d)
BG=
cleanup() { [ -n "$BG" ] && kill "$BG" 2>/dev/null && wait "$BG" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$FSGD" gen --rows 300 --dim 20 --nnz 4 --seed 3 --quiet --out "$tmp/d.svm"
"$FSGD" gen --rows 100 --dim 20 --nnz 4 --seed 4 --quiet --out "$tmp/t.svm"
"$FSGD" gen --rows 200 --dim 20 --nnz 4 --seed 5 --quiet --out "$tmp/other.svm"
R=(run --data "$tmp/d.svm" --batch 300 --workers 1)
# bigger than one partition of the embedded cluster holds (5 MiB)
"$FSGD" gen --rows 100000 --dim 1000 --nnz 10 --seed 6 --quiet --out "$tmp/big.svm"

# 1 and 2: 70 epochs (one step each), no --test
"$FSGD" "${R[@]}" --epochs 70 --metrics-json "$tmp/m.json" >"$tmp/run1.txt" 2>&1 || fail "run: $(tail "$tmp/run1.txt")"
grep -q "^test: no test set (give --test FILE) | 70 epochs" "$tmp/run1.txt" || fail "summary: $(tail -3 "$tmp/run1.txt")"
grep -q "test auc 0.000" "$tmp/run1.txt" && fail "a made-up test AUC: $(grep 'test auc' "$tmp/run1.txt")"
$PY - "$tmp/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["epochs"] == 70 and len(m["per_epoch"]) == 70 and len(m["rows_per_epoch"]) == 70, (m["epochs"], len(m["per_epoch"]))
assert [e["epoch"] for e in m["per_epoch"]] == list(range(1, 71)), m["per_epoch"][-1]
t = m["test"]
assert t["n"] == 0 and t["auc"] is None and t["logloss"] is None and t["accuracy"] is None, t
assert all(e["test_auc"] is None for e in m["per_epoch"]), m["per_epoch"][0]
PY
# fsgd plot still reads a run without a test set
if command -v gnuplot >/dev/null; then
    "$FSGD" plot "$tmp/m.json" --out "$tmp/m.svg" >/dev/null 2>"$tmp/plot.txt" || fail "plot: $(cat "$tmp/plot.txt")"
fi

# 2: SVM with a test set: AUC and accuracy, no logloss
"$FSGD" "${R[@]}" --epochs 2 --model svm --test "$tmp/t.svm" --metrics-json "$tmp/s.json" >"$tmp/svm.txt" 2>&1 ||
    fail "svm run: $(tail "$tmp/svm.txt")"
grep -q "logloss" "$tmp/svm.txt" && fail "svm prints a logloss: $(grep logloss "$tmp/svm.txt")"
grep -q "^test auc 0\.[0-9]* accuracy 0\.[0-9]* | 2 epochs" "$tmp/svm.txt" || fail "svm summary: $(tail -3 "$tmp/svm.txt")"
$PY - "$tmp/s.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
t = m["test"]
assert t["n"] == 100 and 0 <= t["auc"] <= 1 and t["logloss"] is None, t
assert all(e["test_logloss"] is None and e["test_auc"] is not None for e in m["per_epoch"]), m["per_epoch"]
PY

# 3: a standalone worker stopped by SIGTERM exits 143
"$FSGD" run --broker-only --name w143 >"$tmp/broker.txt" 2>&1 &
BG=$!
for _ in $(seq 100); do grep -q '^brokers=' "$tmp/broker.txt" && break; sleep 0.1; done
brokers=$(sed -n 's/^brokers=//p' "$tmp/broker.txt")
[ -n "$brokers" ] || fail "no embedded cluster: $(cat "$tmp/broker.txt")"
"$FSGD" worker --brokers "$brokers" --name w143 --id 1 >"$tmp/worker.txt" 2>&1 &
wpid=$!
sleep 2
kill -TERM $wpid
rc=0
wait $wpid || rc=$?
[ $rc -eq 143 ] || fail "worker stopped by SIGTERM exited $rc, expected 143: $(cat "$tmp/worker.txt")"
kill $BG 2>/dev/null; wait $BG 2>/dev/null || true
BG=

# (issue 27, part 3) a worker pointed at brokers that do not answer says what
# it waits for at once and fails with exit 4 naming them, in bounded time
t0=$(date +%s)
rc=0
timeout 60 "$FSGD" worker --brokers 127.0.0.1:1 --name nobody --id 1 >"$tmp/unreach.txt" 2>&1 || rc=$?
t=$(($(date +%s) - t0))
[ $rc -eq 4 ] || fail "worker on a dead broker exited $rc after $t s: $(cat "$tmp/unreach.txt")"
grep -q "connecting to 127.0.0.1:1" "$tmp/unreach.txt" || fail "no line saying what it waits for"
grep -q "brokers 127.0.0.1:1: no connection within 15.0 s: .*Connection refused" "$tmp/unreach.txt" ||
    fail "$(cat "$tmp/unreach.txt")"
[ $t -le 30 ] || fail "the worker took $t s to give up"

# (part 3) what the embedded cluster cannot honour is refused up front
rc=0
"$FSGD" "${R[@]}" --epochs 1 --replication-factor 3 >"$tmp/rf.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "the embedded cluster keeps one replica" "$tmp/rf.txt" || fail "rf 3: $rc $(cat "$tmp/rf.txt")"
grep -q "embedded Kafka cluster at" "$tmp/rf.txt" && fail "started a cluster before refusing --replication-factor"
rc=0
"$FSGD" "${R[@]}" --epochs 1 --min-insync-replicas 2 >"$tmp/isr.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "the embedded cluster keeps one replica" "$tmp/isr.txt" || fail "min-insync 2: $rc $(cat "$tmp/isr.txt")"
rc=0
"$FSGD" "${R[@]}" --epochs 1 --partitions 1 --data "$tmp/big.svm" >"$tmp/parts.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "the embedded cluster keeps at most 5 MiB per partition" "$tmp/parts.txt" ||
    fail "a 6 MB file on 1 partition: $rc $(cat "$tmp/parts.txt")"
grep -q "embedded Kafka cluster at" "$tmp/isr.txt" "$tmp/parts.txt" && fail "started a cluster before refusing"
# an input that cannot be read is said before any cluster or process starts
for opt in --data --test; do
    rc=0
    "$FSGD" "${R[@]}" --epochs 1 "$opt" "$tmp/no-such.svm" >"$tmp/noin.txt" 2>&1 || rc=$?
    [ $rc -eq 74 ] && grep -q "run: $opt '$tmp/no-such.svm': No such file or directory" "$tmp/noin.txt" ||
        fail "missing $opt: $rc $(cat "$tmp/noin.txt")"
    grep -qE "embedded Kafka cluster at|worker 1 pid" "$tmp/noin.txt" && fail "started before refusing a missing $opt"
done

# 4: a checkpoint left by an interrupted run, then --resume with another
#    model or other data: exit 2 naming the mismatch, checkpoint kept
"$FSGD" "${R[@]}" --epochs 100000 --snapshot-every 1 --checkpoint "$tmp/c.ckpt" >"$tmp/long.txt" 2>&1 &
BG=$!
for _ in $(seq 300); do [ -s "$tmp/c.ckpt" ] && break; sleep 0.1; done
[ -s "$tmp/c.ckpt" ] || fail "no checkpoint in 30 s: $(tail "$tmp/long.txt")"
kill -TERM $BG
wait $BG 2>/dev/null || true
BG=
[ -s "$tmp/c.ckpt" ] || fail "the interrupted run removed its checkpoint"
sum=$(sha256sum <"$tmp/c.ckpt")
rc=0
"$FSGD" "${R[@]}" --epochs 3 --checkpoint "$tmp/c.ckpt" --resume --model svm >"$tmp/r1.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "--resume with another --model exited $rc, expected 2: $(tail -3 "$tmp/r1.txt")"
grep -q "was written by a logistic job.*this job is svm" "$tmp/r1.txt" || fail "$(tail -3 "$tmp/r1.txt")"
rc=0
"$FSGD" run --data "$tmp/other.svm" --batch 300 --workers 1 --epochs 3 --checkpoint "$tmp/c.ckpt" --resume \
    >"$tmp/r2.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "--resume with other data exited $rc, expected 2: $(tail -3 "$tmp/r2.txt")"
grep -q "is for other data" "$tmp/r2.txt" || fail "$(tail -3 "$tmp/r2.txt")"
[ "$(sha256sum <"$tmp/c.ckpt")" = "$sum" ] || fail "a refused --resume changed the checkpoint"
echo ok
