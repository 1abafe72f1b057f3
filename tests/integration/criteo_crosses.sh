#!/usr/bin/env bash
# Crosses of Criteo/TSV columns by number: -q 15*16 (the first two
# categorical columns) and --interactions 15*16*17 fold into the spec the
# model records (format version 4; given twice, once), fsgd predict scores
# with no flag as train's test did, fsgd run (embedded cluster) sends the raw
# lines and its workers cross them (AUC within 0.003 of fsgd train), export
# refuses the crossed model; a cross naming a label or unknown column, or VW
# letters, is exit 2 with the term named.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FSGD" gen --format criteo --rows 24000 --seed 5 --quiet --out "$tmp/all.tsv"
head -n 20000 "$tmp/all.tsv" > "$tmp/train.tsv"
tail -n 4000 "$tmp/all.tsv" > "$tmp/test.tsv"
opts=(--format criteo --bits 18 -q 15*16 --interactions 15*16*17 -q 15*16 --epochs 3 --lr 0.01 --batch 256 --codec none)
"$FSGD" train --data "$tmp/train.tsv" --test "$tmp/test.tsv" "${opts[@]}" --quiet --threads 3 \
    --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json" > /dev/null
"$FSGD" model info "$tmp/m.fsgd" > "$tmp/info.txt"
grep -q '^input: tsv:label,num\*13,cat\*26:header=0:bits=18:seed=0:interactions=15\*16,15\*16\*17$' "$tmp/info.txt" &&
    grep -q '^format version: 4$' "$tmp/info.txt" || fail "$(cat "$tmp/info.txt")"
"$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/test.tsv" --out "$tmp/p.txt" 2> "$tmp/pred.txt"
"$FSGD" run --data "$tmp/train.tsv" --test "$tmp/test.tsv" "${opts[@]}" --workers 3 --metrics-json "$tmp/r.json" \
    > "$tmp/run.log" 2>&1 || { tail "$tmp/run.log"; fail "run"; }
/usr/bin/python3 - "$tmp/m.json" "$tmp/pred.txt" "$tmp/r.json" <<'PY'
import json, re, sys
m, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[3]))
auc = float(re.search(r"auc ([0-9.]+)", open(sys.argv[2]).read()).group(1))
assert m["test"]["auc"] > 0.7 and abs(auc - m["test"]["auc"]) < 1e-6, (m["test"], auc)
assert abs(r["test"]["auc"] - m["test"]["auc"]) <= 0.003, (r["test"]["auc"], m["test"]["auc"])
print("criteo crosses: train auc %.5f, predict %.5f, run %.5f" % (m["test"]["auc"], auc, r["test"]["auc"]))
PY
grep -q "produced 20000 rows" "$tmp/run.log" || fail "$(grep produced "$tmp/run.log")"
rc=0; "$FSGD" export --model "$tmp/m.fsgd" --format liblinear --out "$tmp/x.txt" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "hashed feature crosses" "$tmp/e.txt" || fail "export: $rc"
for bad in "1*15:column 1 is the label" "15*41:'15*41' is not A*B or A*B*C" "ab:'ab' is not A*B"; do
    rc=0; "$FSGD" train --data "$tmp/train.tsv" --format criteo -q "${bad%%:*}" --quiet 2> "$tmp/e.txt" || rc=$?
    [ $rc -eq 2 ] && grep -qF "${bad#*:}" "$tmp/e.txt" || fail "-q ${bad%%:*}: $rc $(cat "$tmp/e.txt")"
done
