#!/usr/bin/env bash
# --format vw end to end: fsgd train reads VW text (labels, importance, tags,
# namespaces), -q/--cubic/--ignore fold into the spec the model records
# (format version 4), fsgd predict needs no flag and writes each row's tag
# beside its score (--weights: its weight too, tests/golden/predict); bad rows stop train with file:line:col (exit 3, no model);
# export refuses the hashed model. When the project's venv has VW 9.11, the
# columns fsgd's model touches are exactly the union of the indices VW
# prints with --audit for the same file, -b and -q.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
BUILD=${BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# rows of fsgd gen as VW text: namespace a (the first 5 indices), b (the rest), a tag on each test row
"$FSGD" gen --rows 6000 --dim 500 --nnz 10 --seed 7 --quiet --out "$tmp/all.svm"
awk 'NR <= 5000 { printf "%s |a", $1 } NR > 5000 { printf "%s id%d|a", $1, NR - 5000 }
    { for (i = 2; i <= NF; i++) { split($i, p, ":"); if (i == 7) printf " |b"; printf " f%s", p[1] } print "" }' \
    "$tmp/all.svm" > "$tmp/all.vw"
head -n 5000 "$tmp/all.vw" > "$tmp/train.vw"
tail -n 1000 "$tmp/all.vw" > "$tmp/test.vw"
"$FSGD" train --data "$tmp/train.vw" --test "$tmp/test.vw" --format vw --bits 16 -q ab --quiet --epochs 3 \
    --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json" > /dev/null
"$FSGD" model info "$tmp/m.fsgd" | grep -q '^input: vw:bits=16:seed=0:interactions=ab$' || fail "$("$FSGD" model info "$tmp/m.fsgd")"
"$FSGD" model info "$tmp/m.fsgd" | grep -q '^format version: 4$' || fail "not version 4"
"$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/test.vw" --out "$tmp/p.txt" 2> "$tmp/pred.txt"
[ "$(wc -l < "$tmp/p.txt")" -eq 1000 ] || fail "predict wrote $(wc -l < "$tmp/p.txt") lines"
awk 'NF != 2 || $2 != "id" NR { bad++ } END { exit bad > 0 }' "$tmp/p.txt" || fail "tags: $(head -3 "$tmp/p.txt")"
/usr/bin/python3 - "$tmp/m.json" "$tmp/pred.txt" <<'PY'
import json, re, sys
m = json.load(open(sys.argv[1]))
auc = float(re.search(r"auc ([0-9.]+)", open(sys.argv[2]).read()).group(1))
assert m["dim"] == 2**16 and m["test"]["auc"] > 0.65 and abs(auc - m["test"]["auc"]) < 1e-6, (m["test"], auc)
# columns of features and crosses counted, as for hashed delimited columns
assert m["format"].startswith("vw:") and 1000 < m["hash_columns_used"] < 2**16, m["hash_columns_used"]
assert 0 <= m["hash_columns_collided"] < m["hash_columns_used"], m["hash_columns_collided"]
PY
# --ignore b: a model that never saw b
"$FSGD" train --data "$tmp/train.vw" --format vw --ignore b --quiet --epochs 1 --out "$tmp/i.fsgd" > /dev/null
"$FSGD" model info "$tmp/i.fsgd" | grep -q '^input: vw:bits=18:seed=0:ignore=b$' || fail "ignore not recorded"
# --cache streams VW rows through a row cache: lr auto scaled for the crosses
# as in memory (the share of features kept in the cache for its reuse); the
# cache is reused; importance weights are refused there (they are applied
# to rows in memory)
lr_of() { grep -o 'lr [0-9.e-]* (auto)' "$1"; }
"$FSGD" train --data "$tmp/train.vw" --test "$tmp/test.vw" --format vw --bits 16 -q ab --epochs 3 \
    --out "$tmp/mem.fsgd" > "$tmp/mem.txt" 2>&1
"$FSGD" train --data "$tmp/train.vw" --test "$tmp/test.vw" --format vw --bits 16 --epochs 3 \
    --out "$tmp/lin.fsgd" > "$tmp/lin.txt" 2>&1
# rows of 10 features and 25 crosses: lr auto is 10/35 of the linear model's
awk -v c="$(lr_of "$tmp/mem.txt" | cut -d' ' -f2)" -v l="$(lr_of "$tmp/lin.txt" | cut -d' ' -f2)" \
    'BEGIN { exit !(l > 0 && c / l > 0.25 && c / l < 0.33) }' ||
    fail "lr auto with crosses $(lr_of "$tmp/mem.txt"), without $(lr_of "$tmp/lin.txt")"
for pass in first reuse; do
    "$FSGD" train --data "$tmp/train.vw" --test "$tmp/test.vw" --format vw --bits 16 -q ab --epochs 3 \
        --cache "$tmp/c.cache" --out "$tmp/c.fsgd" > "$tmp/c_$pass.txt" 2>&1
    [ -n "$(lr_of "$tmp/mem.txt")" ] && [ "$(lr_of "$tmp/c_$pass.txt")" = "$(lr_of "$tmp/mem.txt")" ] ||
        fail "cache $pass: $(lr_of "$tmp/c_$pass.txt") against $(lr_of "$tmp/mem.txt") in memory"
    grep -qE 'test +auc 0\.(6[5-9]|[7-9])' "$tmp/c_$pass.txt" || fail "cache $pass: $(grep auc "$tmp/c_$pass.txt")"
done
grep -q "reusing cache" "$tmp/c_reuse.txt" || fail "cache not reused: $(cat "$tmp/c_reuse.txt")"
"$FSGD" model info "$tmp/c.fsgd" | grep -q '^input: vw:bits=16:seed=0:interactions=ab$' || fail "cache: input"
{ head -n 3 "$tmp/train.vw"; echo "1 2.5 |a f1"; } > "$tmp/w.vw"
rc=0; "$FSGD" train --data "$tmp/w.vw" --format vw --cache "$tmp/w.cache" --quiet --out "$tmp/w.fsgd" \
    2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "w.vw has importance weights" "$tmp/e.txt" || fail "cache with weights: $rc $(cat "$tmp/e.txt")"
# crosses of LIBSVM rows without fields are refused, saying what to give
rc=0; "$FSGD" train --data "$tmp/all.svm" -q ab --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "interactions: LIBSVM rows are crossed by fields: give --fields" "$tmp/e.txt" ||
    fail "q on libsvm: $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" export --model "$tmp/m.fsgd" --format liblinear --out "$tmp/x.txt" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "hashed feature crosses" "$tmp/e.txt" || fail "export: $rc $(cat "$tmp/e.txt")"
# bad rows: file:line:col, exit 3, nothing written
{ head -n 3 "$tmp/train.vw"; echo "1 heavy |a f1"; } > "$tmp/bad.vw"
rc=0; "$FSGD" train --data "$tmp/bad.vw" --format vw --quiet --out "$tmp/bad.fsgd" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] && grep -q "bad.vw:4:3: expected an importance weight (a finite number >= 0), got 'heavy'" "$tmp/e.txt" ||
    fail "bad weight: $rc $(cat "$tmp/e.txt")"
{ head -n 3 "$tmp/train.vw"; echo "1 |a f1:x2 f2:3q"; } > "$tmp/bad.vw"
rc=0; "$FSGD" train --data "$tmp/bad.vw" --format vw --quiet --out "$tmp/bad.fsgd" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] && grep -q "bad.vw:4:15: expected a feature value" "$tmp/e.txt" || fail "bad value: $rc $(cat "$tmp/e.txt")"
[ ! -e "$tmp/bad.fsgd" ] || fail "a model was written from a bad file"

# VW itself: the same indices (the union of VW's --audit over the rows)
py=$BUILD/venv/bin/python
if [ -x "$py" ] && "$py" -c 'import vowpalwabbit' 2>/dev/null; then
    head -n 300 "$tmp/train.vw" > "$tmp/small.vw"
    (cd "$tmp" && "$OLDPWD/$py" -m vowpalwabbit -d small.vw -b 16 -q ab --quiet --noconstant --audit > audit.txt) ||
        fail "vw did not run"
    "$FSGD" train --data "$tmp/small.vw" --format vw --bits 16 -q ab --epochs 1 --test-fraction 0 --no-bias \
        --quiet --out "$tmp/s.fsgd" --metrics-json "$tmp/s.json" > /dev/null
    /usr/bin/python3 - "$tmp/audit.txt" "$tmp/s.fsgd" "$tmp/s.json" <<'PY'
import json, struct, sys
vw = set()
for line in open(sys.argv[1]):
    if line.startswith("\t"):
        vw |= {int(f.rsplit(":", 3)[1]) for f in line.strip().split("\t")}
b = open(sys.argv[2], "rb").read()
nnz = struct.unpack("<Q", b[24:32])[0]
fs = {struct.unpack("<I", b[44 + 8 * i:48 + 8 * i])[0] for i in range(nnz)}
# every nonzero weight is on a column VW names, and fsgd touched as many
# columns as VW lists (a weight whose first gradients cancel stays 0)
touched = json.load(open(sys.argv[3]))["weights_touched"]
assert len(vw) > 1000, len(vw)
assert fs <= vw and touched == len(vw), (len(fs), touched, len(vw), sorted(fs - vw)[:10])
print("vw golden: %d columns, the same as VW 9.11's --audit" % len(vw))
PY
else
    echo "vw golden: skipped (no VW in $BUILD/venv)"
fi
# fsgd predict --weights: each row's weight (VW importance, LIBSVM label:weight)
# and tag after its score, as tests/golden/predict/*.expected hold them; the
# scores are those of predict without --weights
gold=$(cd "$(dirname "$0")/../golden/predict" && pwd)
"$FSGD" train --data "$gold/weights.vw" --format vw --epochs 1 --quiet --out "$tmp/w.fsgd" > /dev/null
"$FSGD" train --data "$gold/weights.svm" --row-weights --epochs 1 --quiet --out "$tmp/s.fsgd" > /dev/null
for k in vw:w svm:s; do
    "$FSGD" predict --model "$tmp/${k#*:}.fsgd" --data "$gold/weights.${k%%:*}" --weights --quiet --out "$tmp/pw.txt"
    "$FSGD" predict --model "$tmp/${k#*:}.fsgd" --data "$gold/weights.${k%%:*}" --row-weights --quiet --out "$tmp/p.txt"
    cut -d' ' -f2- "$tmp/pw.txt" | cmp -s - "$gold/weights.${k%%:*}.expected" ||
        fail "predict --weights ${k%%:*}: $(cat "$tmp/pw.txt")"
    cmp -s <(cut -d' ' -f1 "$tmp/pw.txt") <(cut -d' ' -f1 "$tmp/p.txt") || fail "predict --weights ${k%%:*}: other scores"
done
# LIBSVM weights past the 65536-row chunk of predict's reader stay with their rows
awk 'BEGIN { for (i = 1; i <= 70001; i++) printf "%s:%g %d:1\n", (i % 2 ? "+1" : "-1"), (i % 7) / 4, i % 50 + 1 }' > "$tmp/long.svm"
"$FSGD" predict --model "$tmp/s.fsgd" --data "$tmp/long.svm" --weights --quiet --out "$tmp/pl.txt"
cmp -s <(cut -d' ' -f2 "$tmp/pl.txt") <(awk '{ split($1, l, ":"); print l[2] }' "$tmp/long.svm") ||
    fail "predict --weights: 70001 LIBSVM rows' weights"
rc=0; "$FSGD" predict --model "$tmp/s.fsgd" --data "$gold/weights.svm" --quiet > /dev/null 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] || fail "predict without --row-weights or --weights read label:weight rows: $rc"
echo "vw input: train, predict with tags (and --weights), crosses recorded, errors named"
