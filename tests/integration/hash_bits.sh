#!/usr/bin/env bash
# --bits B (VW's -b, the job key hash_bits) bounds a LIBSVM job: indices up to
# 10^8 (the README's fsgd gen --dim 100000000) hash into 2^B weights, so fsgd
# train holds a 2^16-weight model instead of a 10^8 one; the model records
# libsvm:bits=B (format version 4), so fsgd predict hashes the same way with
# no flag and scores as train's test did; fsgd run does the same on the
# embedded cluster; export to LIBLINEAR is refused (its columns are hashes).
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FSGD" gen --rows 24000 --dim 100000000 --nnz 20 --seed 4 --quiet --out "$tmp/all.svm"
head -n 20000 "$tmp/all.svm" > "$tmp/train.svm"
tail -n 4000 "$tmp/all.svm" > "$tmp/test.svm"
"$FSGD" train --data "$tmp/train.svm" --test "$tmp/test.svm" --bits 16 --epochs 3 --quiet --seed 1 \
    --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json" > "$tmp/train.txt"
"$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/test.svm" --out "$tmp/p.txt" 2> "$tmp/pred.txt"
/usr/bin/python3 - "$tmp/m.json" "$tmp/pred.txt" "$tmp/m.fsgd" <<'PY'
import json, re, struct, sys
m = json.load(open(sys.argv[1]))
assert m["dim"] == 2**16, m["dim"]
# a 10^8-weight model needs >= 400 MB for its weights alone
assert m["peak_rss_mb"] < 300, m["peak_rss_mb"]
assert m["test"]["auc"] > 0.6, m["test"]
auc = float(re.search(r"auc ([0-9.]+)", open(sys.argv[2]).read()).group(1))
assert abs(auc - m["test"]["auc"]) < 1e-6, (auc, m["test"]["auc"])
b = open(sys.argv[3], "rb").read()
assert struct.unpack("<H", b[8:10])[0] == 4 and b"libsvm:bits=16" in b, b[:12]
PY
# the job key and its alias
"$FSGD" train --data "$tmp/train.svm" --set hash_bits=12 --epochs 1 --quiet --metrics-json "$tmp/k.json" > /dev/null
grep -q '"dim": 4096' "$tmp/k.json" || fail "hash_bits=12: $(grep -o '"dim": [0-9]*' "$tmp/k.json")"
rc=0; "$FSGD" train --data "$tmp/train.svm" --bits 16 --dim 1000 --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "a hashed format has 2^16 = 65536 columns" "$tmp/e.txt" || fail "bits+dim: $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" export --model "$tmp/m.fsgd" --format liblinear --out "$tmp/x.txt" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "hashed LIBSVM indices" "$tmp/e.txt" && [ ! -e "$tmp/x.txt" ] || fail "export: $rc $(cat "$tmp/e.txt")"
# fsgd run: the workers hash the rows the same way
"$FSGD" run --data "$tmp/train.svm" --test "$tmp/test.svm" --bits 16 --workers 2 --epochs 1 --quiet \
    --out "$tmp/r.fsgd" > /dev/null 2>&1 || fail "run --bits failed"
"$FSGD" predict --model "$tmp/r.fsgd" --data "$tmp/test.svm" --out "$tmp/r.txt" 2> "$tmp/rp.txt"
grep -q "auc 0\.[6-9]" "$tmp/rp.txt" || fail "run model: $(cat "$tmp/rp.txt")"
"$FSGD" model info "$tmp/r.fsgd" | grep -q "^input: libsvm:bits=16$" || fail "run model input"
echo "hash bits: dim 2^16 from 10^8 indices; predict, run, export checked"
