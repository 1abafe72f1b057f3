#!/usr/bin/env bash
# Crosses of Criteo/TSV columns by number or name: -q C1*C2 (Criteo's
# names of the first two categorical columns, 15*16) and --interactions
# 15*16*17 fold into the spec the
# model records (format version 4; given twice, once), fsgd predict scores
# with no flag as train's test did, fsgd run (embedded cluster) sends the raw
# lines and its workers cross them (AUC within 0.003 of fsgd train), export
# refuses the crossed model; a cross naming a label or unknown column
# number, or VW letters, is exit 2 with the term named; a name no column
# has (Criteo's, or a CSV header's) is exit 3 with the name. A CSV with a
# header crosses by the header's names; predict needs no flag.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FSGD" gen --format criteo --rows 24000 --seed 5 --quiet --out "$tmp/all.tsv"
head -n 20000 "$tmp/all.tsv" > "$tmp/train.tsv"
tail -n 4000 "$tmp/all.tsv" > "$tmp/test.tsv"
# C1*C2 is 15*16 by Criteo's names (I1..I13, C1..C26): taken once with -q 15*16
opts=(--format criteo --bits 18 -q C1*C2 --interactions 15*16*17 -q 15*16 --epochs 3 --lr 0.01 --batch 256 --codec none)
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
for bad in "C1*C27:no column named 'C27' among Criteo's names I1..I13, C1..C26" "I3*clicks:no column named 'clicks'"; do
    rc=0; "$FSGD" train --data "$tmp/train.tsv" --format criteo --interactions "${bad%%:*}" --quiet --out "$tmp/no.fsgd" \
        2> "$tmp/e.txt" || rc=$?
    [ $rc -eq 3 ] && grep -qF "interactions: '${bad%%:*}': ${bad#*:}" "$tmp/e.txt" && [ ! -e "$tmp/no.fsgd" ] ||
        fail "--interactions ${bad%%:*}: $rc $(cat "$tmp/e.txt")"
done
# a CSV's header names its columns (a file of 4 columns from the Criteo rows: label, I1, C1, C2)
{ echo "clicked,age,site,device"; cut -f 1,2,15,16 "$tmp/train.tsv" | tr '\t' ,; } > "$tmp/h.csv"
csv=(--format 'csv:label,num,cat*2:header=1' --bits 16 --epochs 1 --quiet --threads 1)
"$FSGD" train --data "$tmp/h.csv" "${csv[@]}" -q 'site*device' --cubic 'age*C1*device' --out "$tmp/h.fsgd" > /dev/null
"$FSGD" model info "$tmp/h.fsgd" | grep -q '^input: csv:label,num,cat\*2:header=1:bits=16:seed=0:interactions=3\*4,2\*3\*4$' ||
    fail "csv names: $("$FSGD" model info "$tmp/h.fsgd" | grep input)"
"$FSGD" train --data "$tmp/h.csv" "${csv[@]}" -q '3*4' --interactions '2*3*4' --out "$tmp/n.fsgd" > /dev/null
cmp -s "$tmp/h.fsgd" "$tmp/n.fsgd" || fail "csv: crosses by name and by number trained different models"
"$FSGD" predict --model "$tmp/h.fsgd" --data "$tmp/h.csv" --quiet --out "$tmp/hp.txt"
[ "$(wc -l < "$tmp/hp.txt")" -eq 20000 ] || fail "csv predict: $(wc -l < "$tmp/hp.txt") scores"
rc=0; "$FSGD" train --data "$tmp/h.csv" "${csv[@]}" -q 'site*devise' --out "$tmp/no.fsgd" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] && grep -qF "interactions: 'site*devise': no column named 'devise' in the header of $tmp/h.csv (clicked,age,site,device)" "$tmp/e.txt" ||
    fail "csv unknown name: $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" predict --model "$tmp/h.fsgd" --data "$tmp/h.csv" --weights --quiet > /dev/null 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -qF "criteo/tsv/csv rows carry no weight" "$tmp/e.txt" || fail "predict --weights csv: $rc"
echo "PASS criteo_crosses: by number and by name (Criteo's, a CSV header's); unknown names exit 3"
