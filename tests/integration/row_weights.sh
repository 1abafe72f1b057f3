#!/usr/bin/env bash
# Row and class weights: a VW row's importance weight and --class-weight
# POS,NEG scale its loss and gradient (carried in the label, fsgd/rowlabel.h):
# importance 2 on every positive row trains the same model, byte for byte, as
# --class-weight 2,1; rows of importance 0 change nothing (the same model as
# without them); a heavier positive class raises the mean predicted
# probability. Any two label values train as the classes (the larger
# positive): labels {1, 2} give the model of {-1, +1}; three values are an
# error (exit 3); a bad --class-weight is exit 2, and so are weights given to
# a regression model. LIBSVM rows carry a weight as label:weight with
# --row-weights (label:2 on positives = --class-weight 2,1). fsgd run applies
# LIBSVM row weights, VW importance and class weights (AUC within 0.003 of
# fsgd train's on a9a).
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$FSGD" gen --rows 5000 --dim 300 --nnz 8 --seed 11 --quiet --out "$tmp/d.svm"
tovw='{ printf "%s%s |a", $1, W; for (i = 2; i <= NF; i++) { split($i, p, ":"); printf " f%s", p[1] } print "" }'
awk "$tovw" "$tmp/d.svm" > "$tmp/plain.vw"
awk -v W=" 2" '$1 == "+1" { W = " 2" } $1 != "+1" { W = "" }'"$tovw" "$tmp/d.svm" > "$tmp/imp.vw"
grep -q '^+1 2 |a' "$tmp/imp.vw" && grep -q '^-1 |a' "$tmp/imp.vw" || fail "imp.vw: $(head -2 "$tmp/imp.vw")"
opts=(--format vw --epochs 2 --seed 3 --test-fraction 0 --threads 1 --quiet)
"$FSGD" train --data "$tmp/imp.vw" "${opts[@]}" --out "$tmp/imp.fsgd" > /dev/null
"$FSGD" train --data "$tmp/plain.vw" "${opts[@]}" --class-weight 2,1 --out "$tmp/cw.fsgd" > /dev/null
"$FSGD" train --data "$tmp/plain.vw" "${opts[@]}" --out "$tmp/plain.fsgd" > /dev/null
cmp -s "$tmp/imp.fsgd" "$tmp/cw.fsgd" || fail "importance 2 on positives != --class-weight 2,1"
! cmp -s "$tmp/imp.fsgd" "$tmp/plain.fsgd" || fail "the weights changed nothing"
# rows of importance 0 (with flipped labels) are left out
{ cat "$tmp/plain.vw"; awk 'NR <= 500 { $1 = ($1 == "+1" ? "-1 0" : "+1 0"); print }' "$tmp/plain.vw"; } > "$tmp/zero.vw"
"$FSGD" train --data "$tmp/zero.vw" "${opts[@]}" --out "$tmp/zero.fsgd" > /dev/null
cmp -s "$tmp/zero.fsgd" "$tmp/plain.fsgd" || fail "importance-0 rows changed the model"
# a heavier positive class: a higher mean probability
"$FSGD" train --data "$tmp/d.svm" --epochs 2 --quiet --test-fraction 0 --out "$tmp/n.fsgd" > /dev/null
"$FSGD" train --data "$tmp/d.svm" --epochs 2 --quiet --test-fraction 0 --class-weight 5,1 --out "$tmp/p.fsgd" > /dev/null
"$FSGD" predict --model "$tmp/n.fsgd" --data "$tmp/d.svm" --proba --quiet --out "$tmp/n.txt"
"$FSGD" predict --model "$tmp/p.fsgd" --data "$tmp/d.svm" --proba --quiet --out "$tmp/p.txt"
paste "$tmp/n.txt" "$tmp/p.txt" | awk '{ a += $1; b += $2 } END { if (!(b > a + 0.05 * NR)) { print a / NR, b / NR; exit 1 } }' ||
    fail "--class-weight 5,1 did not raise the mean probability"
# LIBSVM label:weight (--row-weights): weight 2 on every positive row = --class-weight 2,1,
# on one thread and on the threaded loader; strict errors name file:line:col (exit 3)
awk '$1 == "+1" { $1 = "+1:2" } { print }' "$tmp/d.svm" > "$tmp/w.svm"
lopts=(--epochs 2 --seed 3 --test-fraction 0 --quiet)
for t in 1 2; do
    "$FSGD" train --data "$tmp/w.svm" "${lopts[@]}" --threads $t --row-weights --out "$tmp/lw.fsgd" > /dev/null
    "$FSGD" train --data "$tmp/d.svm" "${lopts[@]}" --threads $t --class-weight 2,1 --out "$tmp/lc.fsgd" > /dev/null
    cmp -s "$tmp/lw.fsgd" "$tmp/lc.fsgd" || fail "label:2 on positives != --class-weight 2,1 (threads $t)"
done
rc=0; "$FSGD" train --data "$tmp/w.svm" "${lopts[@]}" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] && grep -q "w.svm:1:1: expected a label .*label:weight needs --row-weights), got '+1:2'" "$tmp/e.txt" ||
    fail "label:weight without --row-weights: $rc $(cat "$tmp/e.txt")"
sed '2s/^\([-+]1\)\(:2\)\{0,1\} /\1:-0.5 /' "$tmp/w.svm" > "$tmp/wbad.svm"
rc=0; "$FSGD" train --data "$tmp/wbad.svm" "${lopts[@]}" --row-weights --out "$tmp/no.fsgd" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] && grep -q "wbad.svm:2:4: expected a row weight (a finite number >= 0) after 'label:', got '-0.5'" "$tmp/e.txt" &&
    [ ! -e "$tmp/no.fsgd" ] || fail "a negative weight: $rc $(cat "$tmp/e.txt")"
"$FSGD" predict --model "$tmp/lw.fsgd" --data "$tmp/w.svm" --row-weights --out "$tmp/pw.txt" 2> /dev/null
"$FSGD" predict --model "$tmp/lw.fsgd" --data "$tmp/d.svm" --out "$tmp/pd.txt" 2> /dev/null
cmp -s "$tmp/pw.txt" "$tmp/pd.txt" || fail "predict --row-weights scored other rows"
rc=0; "$FSGD" train --data "$tmp/plain.vw" --format vw --row-weights --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "row_weights: label:weight is read from libsvm rows" "$tmp/e.txt" || fail "vw + --row-weights: $rc"
# any two labels
sed 's/^-1/1/; t; s/^+1/2/' "$tmp/d.svm" > "$tmp/12.svm"
sed 's/^+1/1/' "$tmp/d.svm" > "$tmp/pm.svm"
"$FSGD" train --data "$tmp/12.svm" --epochs 2 --seed 3 --test-fraction 0 --out "$tmp/12.fsgd" > /dev/null 2> "$tmp/e.txt"
grep -q "labels {1, 2}: 2 is the positive class (+1), 1 the negative (-1)" "$tmp/e.txt" || fail "$(cat "$tmp/e.txt")"
"$FSGD" train --data "$tmp/pm.svm" --epochs 2 --seed 3 --test-fraction 0 --quiet --out "$tmp/pm.fsgd" > /dev/null
cmp -s "$tmp/12.fsgd" "$tmp/pm.fsgd" || fail "labels {1, 2} trained another model than {-1, 1}"
"$FSGD" predict --model "$tmp/12.fsgd" --data "$tmp/12.svm" --out "$tmp/12.txt" 2> "$tmp/e.txt"
grep -q "auc 0\.[6-9]" "$tmp/e.txt" || fail "predict on {1, 2}: $(cat "$tmp/e.txt")"
sed '1s/^[0-9]*/3/' "$tmp/12.svm" > "$tmp/123.svm"
rc=0; "$FSGD" train --data "$tmp/123.svm" --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] && grep -q "labels {1, 2, 3}" "$tmp/e.txt" || fail "three labels: $rc $(cat "$tmp/e.txt")"
for bad in "2" "1,0" "a,b" "1,2,3"; do
    rc=0; "$FSGD" train --data "$tmp/d.svm" --class-weight "$bad" --quiet 2> "$tmp/e.txt" || rc=$?
    [ $rc -eq 2 ] && grep -q "class_weight: '$bad' is not POS,NEG" "$tmp/e.txt" || fail "--class-weight $bad: $rc"
done
rc=0; "$FSGD" train --data "$tmp/d.svm" --model linear --class-weight 2,1 --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "are for classification models" "$tmp/e.txt" || fail "linear + weights: $rc"
# fsgd run weighs a classification job's rows only: VW importance with --model linear
# (labels are values) is refused when read (exit 2), class weights before anything starts
rc=0; "$FSGD" run --data "$tmp/imp.vw" --format vw --model linear --workers 1 --epochs 1 --quiet > /dev/null 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "imp.vw: rows with importance weights .*fsgd run weighs rows of classification models" "$tmp/e.txt" ||
    fail "run linear weighted rows: $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" run --data "$tmp/d.svm" --model linear --class-weight 2,1 --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "class_weight: row and class weights are for classification models" "$tmp/e.txt" ||
    fail "run linear --class-weight: $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" run --data "$tmp/d.svm" --class-weight 1,0 --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "class_weight: '1,0' is not POS,NEG" "$tmp/e.txt" || fail "run --class-weight 1,0: $rc"
# fsgd run applies row and class weights (they ride in the labels on NAME.data, the workers'
# gradients scale by them): a9a with weight 20 on positives and 8000 label-flipped copies of
# weight 0, as LIBSVM label:weight and as VW importance 4 with --class-weight 5,1: test AUC
# within 0.003 of fsgd train's with the same weights (the flipped rows would cost AUC if
# kept), and the mean probability moved as train's was (near the weighted train model's
# 0.59, far above an unweighted model's 0.24-0.33, whose runs vary)
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir); needs_data a9a a9a.t
{ awk '$1 == "+1" { $1 = "+1:20" } { print }' "$DATA/a9a"
  awk 'NR <= 8000 { $1 = ($1 == "+1" ? "-1:0" : "+1:0"); print }' "$DATA/a9a"; } > "$tmp/a9w.svm"
# the same rows as VW text: label[ importance] |a f<index> ...
svm2vw='{ split($1, l, ":"); w = l[2] == "" ? "" : l[2] == 20 ? " 4" : " " l[2]
          printf "%s%s |a", l[1], w; for (i = 2; i <= NF; i++) { split($i, p, ":"); printf " f%s", p[1] } print "" }'
awk "$svm2vw" "$tmp/a9w.svm" > "$tmp/a9w.vw"
awk "$svm2vw" "$DATA/a9a.t" > "$tmp/a9t.vw"
grep -q '^+1 4 |a' "$tmp/a9w.vw" && grep -q '^-1 0 |a' "$tmp/a9w.vw" || fail "a9w.vw: $(head -1 "$tmp/a9w.vw")"
ro=(--epochs 3 --seed 3 --batch 256 --codec none)
"$FSGD" train --data "$DATA/a9a" --test "$DATA/a9a.t" "${ro[@]}" --quiet --out "$tmp/tu.fsgd" > /dev/null
mean_p() { "$FSGD" predict --model "$1" --data "$2" --proba --quiet | awk '{ s += $1 } END { print s / NR }'; }
pu=$(mean_p "$tmp/tu.fsgd" "$DATA/a9a.t")
# weigh_run NAME DATA TEST ARGS...: fsgd train and fsgd run with the same weights, compared
weigh_run() {
    local name=$1 data=$2 test=$3; shift 3
    "$FSGD" train --data "$data" --test "$test" "${ro[@]}" "$@" --quiet --out "$tmp/t$name.fsgd" \
        --metrics-json "$tmp/t$name.json" > /dev/null
    "$FSGD" run --data "$data" --test "$test" "${ro[@]}" "$@" --workers 2 --out "$tmp/r$name.fsgd" \
        --metrics-json "$tmp/r$name.json" > "$tmp/run.log" 2>&1 || fail "run $name: $(tail -5 "$tmp/run.log")"
    /usr/bin/python3 - "$name" "$tmp/t$name.json" "$tmp/r$name.json" "$pu" "$(mean_p "$tmp/t$name.fsgd" "$test")" \
        "$(mean_p "$tmp/r$name.fsgd" "$test")" <<'PY' || fail "run with $name"
import json, sys
name = sys.argv[1]
t, r = (json.load(open(p))["test"]["auc"] for p in sys.argv[2:4])
pu, pt, pr = map(float, sys.argv[4:7])
assert abs(t - r) < 0.003, f"run auc {r:.5f}, train {t:.5f}"
assert pr > pu + 0.2 and abs(pr - pt) < 0.08, f"mean p: run weighted {pr:.3f}, train weighted {pt:.3f}, unweighted {pu:.3f}"
print(f"run {name}: auc {r:.5f} (train {t:.5f}); mean p {pr:.3f} (train {pt:.3f}, unweighted {pu:.3f})")
PY
}
weigh_run row_weights "$tmp/a9w.svm" "$DATA/a9a.t" --row-weights
weigh_run vw_importance_class_weight "$tmp/a9w.vw" "$tmp/a9t.vw" --format vw --class-weight 5,1
rc=0; "$FSGD" run --data "$tmp/w.svm" --row-weights --model linear --quiet 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "row_weights: row and class weights are for classification models" "$tmp/e.txt" || fail "run linear --row-weights: $rc"
echo "row weights: LIBSVM label:weight and VW importance with class weights (train and run), importance = class weight, zero rows left out, two labels mapped"
