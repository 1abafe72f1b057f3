#!/usr/bin/env bash
# Raw CTR rows without conversion: fsgd gen --format criteo writes Criteo-shaped
# TSV; fsgd train --format criteo hashes it (collisions counted in the metrics),
# records the spec in the model (format version 2), and fsgd predict hashes the
# test file the same way from the model alone: its AUC is train's test AUC.
# fsgd export writes the hashed model for liblinear-predict. Malformed rows
# stop train and predict with file:line[:col] errors (exit 3), as LIBSVM does.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FSGD" gen --format criteo --rows 30000 --seed 5 --quiet --out "$tmp/all.tsv"
[ "$(wc -l < "$tmp/all.tsv")" -eq 30000 ] || fail "gen wrote $(wc -l < "$tmp/all.tsv") rows"
awk -F'\t' 'NF != 40 { bad++ } END { exit bad > 0 }' "$tmp/all.tsv" || fail "gen rows without 40 fields"
head -n 27000 "$tmp/all.tsv" > "$tmp/train.tsv"
tail -n 3000 "$tmp/all.tsv" > "$tmp/test.tsv"
"$FSGD" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --format criteo --hash-bits 18 --quiet \
    --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json" > "$tmp/train.txt"
"$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/test.tsv" --out "$tmp/p.txt" 2> "$tmp/pred.txt"
[ "$(wc -l < "$tmp/p.txt")" -eq 3000 ] || fail "predict wrote $(wc -l < "$tmp/p.txt") scores"
/usr/bin/python3 - "$tmp/m.json" "$tmp/pred.txt" "$tmp/m.fsgd" <<'PY'
import json, re, struct, sys
m = json.load(open(sys.argv[1]))
assert m["format"] == "criteo" and m["dim"] == 2**18, m
assert m["hash_columns_used"] > 1000 and 0 < m["hash_columns_collided"] < m["hash_columns_used"], m
assert m["test"]["auc"] > 0.7, m["test"]
pred = open(sys.argv[2]).read()
auc = float(re.search(r"auc ([0-9.]+)", pred).group(1))
assert abs(auc - m["test"]["auc"]) < 1e-6, (auc, m["test"]["auc"])
b = open(sys.argv[3], "rb").read()
assert b[:8] == b"FSGDMODL" and struct.unpack("<H", b[8:10])[0] == 2 and b[11] & 2, b[:12]
assert b"tsv:label,num*13,cat*26:header=0:bits=18:seed=0" in b
PY
"$FSGD" export --model "$tmp/m.fsgd" --format liblinear --out "$tmp/m.txt" >/dev/null
grep -q '^nr_feature 262144$' "$tmp/m.txt" || fail "export: $(head -5 "$tmp/m.txt")"

# Malformed rows: train and predict name the file, line and column.
{ head -n 3 "$tmp/test.tsv"; printf '1\t2\tabc%s\n' "$(printf '\t%.0s' $(seq 1 37))"; } > "$tmp/badnum.tsv"
rc=0; "$FSGD" train --data "$tmp/badnum.tsv" --format criteo --hash-bits 10 --epochs 1 --quiet 2> "$tmp/e1.txt" || rc=$?
[ $rc -eq 3 ] || fail "bad num field: exit $rc"
grep -q "badnum.tsv:4:5: column 3 (num): expected a number, got 'abc'" "$tmp/e1.txt" || fail "$(cat "$tmp/e1.txt")"
{ head -n 2 "$tmp/test.tsv"; head -n 1 "$tmp/test.tsv" | cut -f1-39; } > "$tmp/short.tsv"
rc=0; "$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/short.tsv" --out "$tmp/p2.txt" 2> "$tmp/e2.txt" || rc=$?
[ $rc -eq 3 ] || fail "short row: exit $rc"
grep -q "short.tsv:3: 39 fields, expected 40" "$tmp/e2.txt" || fail "$(cat "$tmp/e2.txt")"
[ ! -e "$tmp/p2.txt" ] || fail "predict left a partial output"
rc=0; "$FSGD" train --data "$tmp/train.tsv" --format 'tsv:label,kat' --quiet 2> "$tmp/e3.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "'kat' is not label, num, cat or skip" "$tmp/e3.txt" || fail "bad spec: exit $rc $(cat "$tmp/e3.txt")"

# A generic CSV with a header and a skipped id column trains too.
awk -F'\t' 'BEGIN { OFS = ","; print "id,click,a,b,c" } { print NR, $1, $15, $16, $17 }' "$tmp/train.tsv" > "$tmp/t.csv"
"$FSGD" train --data "$tmp/t.csv" --format 'csv:skip,label,cat*3:header=1' --hash-bits 16 --quiet \
    --test-fraction 0.1 | grep -q '^test  auc' || fail "csv spec did not train"
# The same rows streamed through --cache train to the same quality.
"$FSGD" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --format criteo --hash-bits 18 --quiet \
    --cache "$tmp/c.cache" --metrics-json "$tmp/c.json" > /dev/null
/usr/bin/python3 - "$tmp/c.json" "$tmp/m.json" <<'PY'
import json, sys
c, m = (json.load(open(p)) for p in sys.argv[1:3])
assert c["streamed_from_cache"] and abs(c["test"]["auc"] - m["test"]["auc"]) < 0.01, (c["test"], m["test"])
PY
# Run again: the cache is reused; other hash bits make it be rewritten.
"$FSGD" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --format criteo --hash-bits 18 --quiet \
    --cache "$tmp/c.cache" > /dev/null 2> "$tmp/c2.txt"
grep -q "^fsgd: reusing cache $tmp/c.cache" "$tmp/c2.txt" || fail "criteo cache not reused: $(cat "$tmp/c2.txt")"
"$FSGD" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" --format criteo --hash-bits 17 --quiet \
    --cache "$tmp/c.cache" > /dev/null 2> "$tmp/c3.txt"
grep -q "was written from $tmp/train.tsv (format differs): rewriting" "$tmp/c3.txt" ||
    fail "hash bits: $(cat "$tmp/c3.txt")"
echo ok
