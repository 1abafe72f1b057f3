#!/usr/bin/env bash
# fsgd train end to end through the CLI: a real dataset trains to a useful
# model with the defaults, writes its model and metrics JSON, and bad input
# stops with an error that names the place.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
D=$DATA
needs_data a9a a9a.t ijcnn1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Defaults on a9a: a model file, a metrics JSON with the agreed fields, a sane AUC.
"$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --model logistic --epochs 3 --quiet \
    --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json" > "$tmp/out.txt"
[ -s "$tmp/m.fsgd" ] || fail "no model file"
/usr/bin/python3 - "$tmp/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["test"]["auc"] > 0.895, m["test"]
assert 0 < m["test"]["logloss"] < 0.36, m["test"]
assert m["train_seconds"] > 0 and m["steps"] > 0
assert m["raw_bytes"] > 0 and m["wire_bytes"] > 0
PY
grep -q '^test  auc' "$tmp/out.txt" || fail "no test summary"

# The YAML job with an override.
mkdir -p "$tmp/job"
sed -e "s#data/sets/#$(pwd)/data/sets/#" -e "s#out/#$tmp/job/#" jobs/a9a.yaml > "$tmp/a9a.yaml"
"$FSGD" train "$tmp/a9a.yaml" --set epochs=1 --set codec=none --quiet > "$tmp/job.txt"
[ -s "$tmp/job/a9a.model" ] || fail "job did not write its model"

# Regression and SVM train too.
"$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --model svm --epochs 2 --quiet | grep -q '^test  auc'
"$FSGD" train --data "$D/ijcnn1" --model linear --epochs 2 --quiet | grep -q '^test  rmse'

# Every lossy codec in the training loop stays within 0.005 test AUC of the
# uncompressed run, and actually compresses (issue 3).
auc_of() { /usr/bin/python3 -c "import json,sys;m=json.load(open(sys.argv[1]));print(m['test']['auc'], m['compression_ratio'])" "$1"; }
"$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --epochs 3 --codec none --quiet --metrics-json "$tmp/none.json" >/dev/null
read -r auc_none ratio_none < <(auc_of "$tmp/none.json")
for c in fastsgd "fastsgd:levels=optimal" "fastsgd:ef=1" logquant "topk:ratio=0.2"; do
    "$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --epochs 3 --codec "$c" --quiet --metrics-json "$tmp/c.json" >/dev/null
    read -r auc ratio < <(auc_of "$tmp/c.json")
    /usr/bin/python3 -c "import sys; a,n,r=map(float,sys.argv[1:]); sys.exit(0 if abs(a-n)<=0.005 and r>1.2 else 1)" \
        "$auc" "$auc_none" "$ratio" || fail "codec $c: auc $auc vs none $auc_none, ratio $ratio"
    echo "codec $c: test auc $auc (none $auc_none), compression ${ratio}x"
done

# Bad input names the place and exits non-zero.
printf '+1 1:1 2:1\n-1 3:1 2:0.5\n-1 1:1\n' > "$tmp/bad.svm"
if "$FSGD" train --data "$tmp/bad.svm" --quiet 2> "$tmp/err.txt"; then fail "accepted bad rows"; fi
grep -q "bad.svm:2:" "$tmp/err.txt" || fail "error does not name line 2: $(cat "$tmp/err.txt")"
"$FSGD" train --data "$tmp/bad.svm" --skip-bad --test-fraction 0 --epochs 1 --quiet 2> "$tmp/skip.txt" > /dev/null
grep -q "skipped 1 malformed rows" "$tmp/skip.txt" || fail "skip-bad did not report: $(cat "$tmp/skip.txt")"
if "$FSGD" train --data "$D/a9a" --epochz 3 2> "$tmp/err2.txt"; then fail "accepted unknown flag"; fi
grep -q "unknown option '--epochz'" "$tmp/err2.txt" || fail "unknown flag not named"
if "$FSGD" train --data "$tmp/nope.svm" 2> "$tmp/err3.txt"; then fail "accepted missing file"; fi
grep -q "nope.svm" "$tmp/err3.txt" || fail "missing file not named"
if "$FSGD" train --data "$D/a9a" --codec "fastsgd:b=0.5" 2> "$tmp/err4.txt"; then fail "accepted bad codec"; fi
grep -q "b" "$tmp/err4.txt" || fail "bad codec parameter not named"
# Labels that do not fit the model stop before training, naming the file and
# the labels (issue 12, finding 6: {1, 2, 3} used to train "silently" with
# train auc nan and exit 0; a single class gave AUC nan and exit 0). Any two
# values are the two classes, the larger positive, said (issue 39: LIBLINEAR
# takes any two values).
printf '1 1:1\n2 2:1\n1 1:0.5 2:1\n2 1:0.1\n' > "$tmp/l12.svm"
rc=0; "$FSGD" train --data "$tmp/l12.svm" --quiet 2> "$tmp/err5.txt" > /dev/null || rc=$?
[ $rc -eq 0 ] || fail "labels {1, 2}: exit $rc, expected 0: $(cat "$tmp/err5.txt")"
grep -q "l12.svm: labels {1, 2}: 2 is the positive class (+1), 1 the negative (-1)" "$tmp/err5.txt" ||
    fail "labels {1, 2} not said: $(cat "$tmp/err5.txt")"
printf '1 1:1\n2 2:1\n3 1:0.5 2:1\n2 1:0.1\n' > "$tmp/l123.svm"
rc=0; "$FSGD" train --data "$tmp/l123.svm" --quiet 2> "$tmp/err5.txt" || rc=$?
[ $rc -eq 3 ] || fail "labels {1, 2, 3}: exit $rc, expected 3 (bad input data)"
grep -q "l123.svm: labels {1, 2, 3}: a logistic model needs two classes labelled {0, 1} or {-1, 1}" "$tmp/err5.txt" ||
    fail "labels {1, 2, 3} not named: $(cat "$tmp/err5.txt")"
printf '+1 1:1\n+1 2:1\n+1 1:0.5\n' > "$tmp/one.svm"
rc=0; "$FSGD" train --data "$D/a9a" --test "$tmp/one.svm" --model svm --quiet 2> "$tmp/err6.txt" || rc=$?
[ $rc -eq 3 ] || fail "single-class test file: exit $rc, expected 3"
grep -q "one.svm: every row has label 1: a svm model needs both classes" "$tmp/err6.txt" ||
    fail "single class not named: $(cat "$tmp/err6.txt")"
# the same labels are fine for regression
"$FSGD" train --data "$tmp/l12.svm" --model linear --test-fraction 0 --epochs 1 --quiet > /dev/null

# Exit statuses are documented in --help, with distinct numbers
"$FSGD" --help > "$tmp/help.txt"
for n in 2 3 4 70 74 130 143; do
    grep -qE "^ +$n  " "$tmp/help.txt" || fail "exit status $n not in fsgd --help"
done
"$FSGD" train --help | grep -q "exit status:" || fail "fsgd train --help has no exit statuses"
rc=0; "$FSGD" train --data "$D/a9a" --epochz 3 2>/dev/null || rc=$?
[ $rc -eq 2 ] || fail "unknown flag: exit $rc, expected 2"
rc=0; "$FSGD" train --data "$tmp/nope.svm" 2>/dev/null || rc=$?
[ $rc -eq 74 ] || fail "missing data file: exit $rc, expected 74"
# The defaults: l2, lr and epochs auto, each explained in --help; a default run
# holds rows out, stops early and says so in its metrics; --epochs N trains
# exactly N epochs on every row.
"$FSGD" train --help > "$tmp/thelp.txt"
for k in '--l2 .*(default auto)' '--lr .*(default auto)' '--epochs .*(default auto)'; do
    grep -q -- "$k" "$tmp/thelp.txt" || fail "fsgd train --help lacks '$k'"
done
"$FSGD" train --help all > "$tmp/thelp.txt"
for k in '--l2 .*(default auto)' '--lr .*(default auto)' '--epochs .*(default auto)' 'Defaults of fsgd train' \
    'l2 auto' 'epochs auto' 'lr auto'; do
    grep -q -- "$k" "$tmp/thelp.txt" || fail "fsgd train --help all lacks '$k'"
done
"$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --quiet --metrics-json "$tmp/auto.json" > "$tmp/auto.txt"
grep -q '^early stopping: 3256 holdout rows' "$tmp/auto.txt" || fail "no early-stopping line: $(cat "$tmp/auto.txt")"
"$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --quiet --epochs 2 --l2 0 --lr 0.01 --metrics-json "$tmp/two.json" >/dev/null
/usr/bin/python3 - "$tmp/auto.json" "$tmp/two.json" <<'PY'
import json, sys
a, t = (json.load(open(p)) for p in sys.argv[1:3])
assert a["holdout_rows"] == 3256 and a["lr_auto"] and a["l2_auto"], a
assert abs(a["l2"] - 1 / (32561 - 3256)) < 1e-12, a["l2"]
assert a["stopped_early"] and 0 < a["best_epoch"] < a["epochs_run"] <= 50, a
assert a["test"]["auc"] > 0.899, a["test"]
assert 1 < a["peak_rss_mb"] < 4096 and a["process_seconds"] > 0, a
assert t["holdout_rows"] == 0 and t["epochs_run"] == 2 and not t["stopped_early"], t
assert t["l2"] == 0 and t["lr"] == 0.01 and not t["lr_auto"], t
PY
rc=0; "$FSGD" train --data "$D/a9a" --holdout 0 2>"$tmp/h0.txt" || rc=$?
[ $rc -eq 2 ] && grep -q holdout "$tmp/h0.txt" || fail "epochs auto with holdout 0: exit $rc, $(cat "$tmp/h0.txt")"
# --cache: the first pass writes a binary row cache and every epoch streams
# from it; the same defaults give the same quality as the in-memory path.
"$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --quiet --cache "$tmp/a9a.cache" --out "$tmp/c.fsgd" \
    --metrics-json "$tmp/cache.json" > /dev/null
[ -s "$tmp/a9a.cache" ] || fail "no cache file"
"$FSGD" predict --model "$tmp/c.fsgd" --data "$D/a9a.t" --out "$tmp/c.pred" 2> "$tmp/c.txt"
/usr/bin/python3 - "$tmp/cache.json" "$tmp/auto.json" <<'PY'
import json, sys
c, a = (json.load(open(p)) for p in sys.argv[1:3])
assert c["streamed_from_cache"] and not a["streamed_from_cache"], (c, a)
assert abs(c["test"]["auc"] - a["test"]["auc"]) < 0.002, (c["test"], a["test"])
assert 3000 < c["holdout_rows"] < 3600 and c["stopped_early"] and c["peak_rss_mb"] > 0, c
PY
grep -q "auc 0.90" "$tmp/c.txt" || fail "cached model predicts: $(cat "$tmp/c.txt")"

# A second run with the same --cache reuses it without reading the text: the
# holdout and test split come back from the cache's own sections, so the
# model is byte for byte the first run's. The proof that no text is read
# (where strace is installed): the data file is never opened.
cp "$D/a9a" "$tmp/r.svm"
ct() { "$FSGD" train --data "$tmp/r.svm" --cache "$tmp/r.cache" --threads 1 --seed 5 --quiet "$@"; }
ct --out "$tmp/r1.fsgd" --metrics-json "$tmp/r1.json" > /dev/null 2> "$tmp/r1.txt"
grep -q "reusing" "$tmp/r1.txt" && fail "first run reused: $(cat "$tmp/r1.txt")"
trace=()
command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null &&
    trace=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -e trace=open,openat -o "$tmp/r2.strace")
"${trace[@]}" "$FSGD" train --data "$tmp/r.svm" --cache "$tmp/r.cache" --threads 1 --seed 5 --quiet \
    --out "$tmp/r2.fsgd" --metrics-json "$tmp/r2.json" > /dev/null 2> "$tmp/r2.txt" ||
    fail "reuse failed: $(cat "$tmp/r2.txt")"
if [ ${#trace[@]} -gt 0 ]; then
    grep -q "r\.cache" "$tmp/r2.strace" || fail "strace saw no open of the cache"
    grep -q "r\.svm\"" "$tmp/r2.strace" && fail "the reusing run opened the text: $(grep r.svm "$tmp/r2.strace")"
else
    echo "note: no strace here: the reuse run is not proven to leave the text unread"
fi
grep -q "^fsgd: reusing cache $tmp/r.cache (written from $tmp/r.svm, unchanged)" "$tmp/r2.txt" ||
    fail "no reuse line: $(cat "$tmp/r2.txt")"
cmp -s "$tmp/r1.fsgd" "$tmp/r2.fsgd" || fail "the reused cache trained another model"
/usr/bin/python3 - "$tmp/r1.json" "$tmp/r2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert not a["cache_reused"] and b["cache_reused"], (a, b)
for k in ("holdout_rows", "train_rows", "steps", "test"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["test"]["n"] > 6000, a["test"]
PY
# An edit in place of the same size with its mtime put back (issue 27) is
# seen by the change time: the cache is rewritten from the edited rows, and
# the model is not the stale one.
touch -r "$tmp/r.svm" "$tmp/r.ref"
sed -e 's/^-1 /+9 /' -e 's/^+1 /-1 /' -e 's/^+9 /+1 /' "$D/a9a" > "$tmp/r.flip"
[ "$(stat -c %s "$tmp/r.flip")" = "$(stat -c %s "$tmp/r.svm")" ] || fail "the flipped labels changed the size"
cat "$tmp/r.flip" > "$tmp/r.svm" && touch -r "$tmp/r.ref" "$tmp/r.svm"
ct --out "$tmp/r2b.fsgd" > /dev/null 2> "$tmp/r2b.txt" || fail "edited source: $(cat "$tmp/r2b.txt")"
grep -q "^fsgd: cache $tmp/r.cache was written from $tmp/r.svm (ctime differs): rewriting" "$tmp/r2b.txt" ||
    fail "an edit in place with size and mtime kept reused the cache: $(cat "$tmp/r2b.txt")"
cmp -s "$tmp/r1.fsgd" "$tmp/r2b.fsgd" && fail "the edited data trained the stale model"
# A changed source (the same bytes, a new mtime) is read again, with a line.
cp "$D/a9a" "$tmp/r.svm"
ct --out "$tmp/r3.fsgd" > /dev/null 2> "$tmp/r3.txt"
grep -q "^fsgd: cache $tmp/r.cache was written from $tmp/r.svm (mtime, ctime differ): rewriting" "$tmp/r3.txt" ||
    fail "changed source: $(cat "$tmp/r3.txt")"
cmp -s "$tmp/r1.fsgd" "$tmp/r3.fsgd" || fail "rewritten cache trained another model"
# What decides the set-aside rows is part of the cache's key.
ct --seed 6 > /dev/null 2> "$tmp/r4.txt"
grep -q "(seed differs): rewriting" "$tmp/r4.txt" || fail "changed seed: $(cat "$tmp/r4.txt")"
ct --seed 6 --holdout 0.2 --test-fraction 0.1 > /dev/null 2> "$tmp/r5.txt"
grep -q "(test_fraction, holdout differ): rewriting" "$tmp/r5.txt" || fail "changed split: $(cat "$tmp/r5.txt")"
ct --out "$tmp/r6.fsgd" > /dev/null 2> /dev/null
cmp -s "$tmp/r1.fsgd" "$tmp/r6.fsgd" || fail "back to seed 5: another model"
# A corrupt train section is an error naming the cache and the fault.
/usr/bin/python3 - "$tmp/r.cache" <<'PY'
import os, sys
f = open(sys.argv[1], "r+b"); n = os.path.getsize(sys.argv[1])
f.seek(n // 2); b = f.read(1); f.seek(n // 2); f.write(bytes([b[0] ^ 0x20])); f.close()
PY
rc=0; ct > /dev/null 2> "$tmp/r7.txt" || rc=$?
[ $rc -ne 0 ] && grep -q "$tmp/r.cache: corrupt row cache: .* in train row" "$tmp/r7.txt" ||
    fail "corrupt cache: exit $rc, $(cat "$tmp/r7.txt")"
# A cut cache (an interrupted copy) is rewritten, with a line saying why.
truncate -s -1000 "$tmp/r.cache"
ct --out "$tmp/r8.fsgd" > /dev/null 2> "$tmp/r8.txt" || fail "cut cache: $(cat "$tmp/r8.txt")"
grep -q "^fsgd: $tmp/r.cache: row cache is .* bytes, its header says .* (cut short): rewriting" "$tmp/r8.txt" ||
    fail "cut cache: $(cat "$tmp/r8.txt")"
cmp -s "$tmp/r1.fsgd" "$tmp/r8.fsgd" || fail "after a cut cache: another model"
# A file that is not a row cache is never overwritten.
cp "$D/a9a.t" "$tmp/notcache"
rc=0; "$FSGD" train --data "$tmp/r.svm" --cache "$tmp/notcache" --quiet > /dev/null 2> "$tmp/r9.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "is not an fsgd row cache; not overwriting it" "$tmp/r9.txt" ||
    fail "not a cache: exit $rc, $(cat "$tmp/r9.txt")"
cmp -s "$D/a9a.t" "$tmp/notcache" || fail "a non-cache file was overwritten"
# --threads applies to streaming as to the in-memory path (steps of 4096
# a9a rows have ~61k nonzeros: 2 threads): each step's rows are cut into a
# slice a thread. 2 threads give the 1-thread model up to the order of the
# float sums (margins within 1e-5), and the in-memory path's quality.
st() { "$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --epochs 3 --batch 4096 --seed 2 --quiet "$@" > /dev/null; }
st --cache "$tmp/t.cache" --threads 1 --out "$tmp/t1.fsgd" --metrics-json "$tmp/t1.json" 2> /dev/null
st --cache "$tmp/t.cache" --threads 2 --out "$tmp/t2.fsgd" --metrics-json "$tmp/t2.json" 2> /dev/null
st --threads 2 --metrics-json "$tmp/tm.json"
"$FSGD" predict --model "$tmp/t1.fsgd" --data "$D/a9a.t" --out "$tmp/t1.pred" 2> /dev/null
"$FSGD" predict --model "$tmp/t2.fsgd" --data "$D/a9a.t" --out "$tmp/t2.pred" 2> /dev/null
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
t1, t2, tm = (json.load(open(f"{d}/{n}.json")) for n in ("t1", "t2", "tm"))
assert t1["threads"] == 1 and t2["threads"] == 2 and tm["threads"] == 2, (t1["threads"], t2["threads"], tm["threads"])
assert t2["streamed_from_cache"] and t2["steps"] == t1["steps"], t2
m1, m2 = ([float(l.split()[0]) for l in open(f"{d}/{n}.pred")] for n in ("t1", "t2"))
diff = max(abs(a - b) for a, b in zip(m1, m2))
assert len(m1) == 16281 and diff < 1e-5, diff
assert abs(t2["test"]["auc"] - t1["test"]["auc"]) < 1e-5, (t1["test"], t2["test"])
assert abs(t2["test"]["auc"] - tm["test"]["auc"]) < 0.002, (t2["test"], tm["test"])
PY
echo ok
