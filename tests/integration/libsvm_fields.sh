#!/usr/bin/env bash
# Crosses of LIBSVM fields (--fields a:1-10,b:11-20 -q ab; issue 39): on rows
# whose labels are a planted table of (a, b) pairs, which no linear model of
# the one-hot features can learn, the crossed model beats the linear one by
# a wide margin; the model records the fields and crosses, so fsgd predict
# needs no flag and scores as fsgd train's test pass did; one thread and two
# train the same bytes, and so does a map file (--fields @FILE) of the same
# fields; an unknown field in a cross, crosses without
# --fields, overlapping ranges and --fields on VW input are exit 2; export
# to liblinear refuses the crossed model. fsgd run (embedded cluster, rows
# sent as text, crossed by the workers): AUC within 0.003 of fsgd train.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 4 one-hot fields of 10 values; the label is T[a][b] (random signs), 10% flipped
awk 'BEGIN { srand(7); for (i = 0; i < 10; i++) for (j = 0; j < 10; j++) T[i, j] = rand() < 0.5 ? 1 : -1
             for (r = 0; r < 6000; r++) { a = int(rand() * 10); b = int(rand() * 10); c = int(rand() * 10); d = int(rand() * 10)
                 y = T[a, b]; if (rand() < 0.1) y = -y
                 printf "%s %d:1 %d:1 %d:1 %d:1\n", (y > 0 ? "+1" : "-1"), a + 1, b + 11, c + 21, d + 31 } }' > "$tmp/pc.svm"
head -4000 "$tmp/pc.svm" > "$tmp/tr.svm"; tail -2000 "$tmp/pc.svm" > "$tmp/te.svm"
opts=(--data "$tmp/tr.svm" --test "$tmp/te.svm" --epochs 5 --seed 3 --quiet)
fields=a:1-10,b:11-20,c:21-30,d:31-40
test_auc() { awk '$1 == "test" && $2 == "auc" { print $3 }' "$1"; }
"$FSGD" train "${opts[@]}" --out "$tmp/lin.fsgd" > "$tmp/lin.txt"
"$FSGD" train "${opts[@]}" --fields $fields -q ab --threads 1 --out "$tmp/x.fsgd" > "$tmp/x.txt"
lin=$(test_auc "$tmp/lin.txt"); x=$(test_auc "$tmp/x.txt")
awk -v l="$lin" -v x="$x" 'BEGIN { exit !(x > l + 0.1 && x > 0.85) }' || fail "crossed AUC $x, linear $lin"
"$FSGD" model info "$tmp/x.fsgd" | grep -q "libsvm:bits=18:fields=a=1-10,b=11-20,c=21-30,d=31-40:interactions=ab" ||
    fail "model input: $("$FSGD" model info "$tmp/x.fsgd")"
"$FSGD" predict --model "$tmp/x.fsgd" --data "$tmp/te.svm" --out "$tmp/p.txt" 2> "$tmp/e.txt"
p=$(sed -n 's/.* auc \([0-9.]*\) .*/\1/p' "$tmp/e.txt")
awk -v p="$p" -v x="$x" 'BEGIN { d = p - x; exit !(d < 1e-4 && d > -1e-4) }' || fail "predict auc $p, train's test auc $x"
"$FSGD" train "${opts[@]}" --fields $fields -q ab --threads 2 --out "$tmp/x2.fsgd" > /dev/null
cmp -s "$tmp/x.fsgd" "$tmp/x2.fsgd" || fail "threads 1 and 2 trained other models"
# --fields @FILE, an index a line (a one-hot map): the same fields, the same model bytes
{ echo "# index field"; for i in $(seq 1 40); do echo "$i $(echo abcd | cut -c$(( (i - 1) / 10 + 1 )))"; done; } > "$tmp/map.txt"
"$FSGD" train "${opts[@]}" --fields "@$tmp/map.txt" -q ab --threads 1 --out "$tmp/xm.fsgd" > /dev/null
cmp -s "$tmp/x.fsgd" "$tmp/xm.fsgd" || fail "--fields @map.txt trained another model than --fields $fields"
printf '1 a\n2-3\n' > "$tmp/bad.map"
rc=0; "$FSGD" train --data "$tmp/tr.svm" --quiet --fields "@$tmp/bad.map" -q ab 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] && grep -q "bad.map:2:1: expected 'INDEX NAME'" "$tmp/e.txt" || fail "bad map: $rc $(cat "$tmp/e.txt")"
# fsgd run: the rows travel as text, the workers cross them: AUC within 0.003 of fsgd train's
ro=(--test "$tmp/te.svm" --epochs 5 --seed 3 --batch 256 --codec none --lr 0.01 --fields $fields -q ab)
"$FSGD" train --data "$tmp/tr.svm" "${ro[@]}" --quiet --metrics-json "$tmp/t.json" > /dev/null
"$FSGD" run --data "$tmp/tr.svm" "${ro[@]}" --workers 2 --out "$tmp/r.fsgd" --metrics-json "$tmp/r.json" > "$tmp/run.log" 2>&1 ||
    fail "run with fields: $(tail -5 "$tmp/run.log")"
/usr/bin/python3 - "$tmp/t.json" "$tmp/r.json" <<'PY' || fail "run with fields crossed otherwise"
import json, sys
t, r = (json.load(open(p))["test"]["auc"] for p in sys.argv[1:3])
assert r > 0.85 and abs(t - r) < 0.003, f"run auc {r:.5f}, train {t:.5f}"
PY
"$FSGD" model info "$tmp/r.fsgd" | grep -q "interactions=ab" || fail "the run's model lacks its crosses"
# :: crosses every pair: the planted one among them
"$FSGD" train "${opts[@]}" --fields $fields -q :: --out "$tmp/all.fsgd" > "$tmp/all.txt"
awk -v a="$(test_auc "$tmp/all.txt")" -v l="$lin" 'BEGIN { exit !(a > l + 0.05) }' || fail "-q :: AUC $(test_auc "$tmp/all.txt")"
expect2() { # WANT ARGS...: exit 2 with WANT on stderr
    local want=$1 rc=0; shift
    "$FSGD" train --data "$tmp/tr.svm" --quiet "$@" > /dev/null 2> "$tmp/e.txt" || rc=$?
    [ $rc -eq 2 ] && grep -qF "$want" "$tmp/e.txt" || fail "$*: exit $rc, $(cat "$tmp/e.txt")"
}
expect2 "interactions: 'ax': no field 'x' in fields a, b" --fields a:1-10,b:11-20 -q ax
expect2 "LIBSVM rows are crossed by fields: give --fields" -q ab
expect2 "fields: 'b:5-20' overlaps a:1-10" --fields a:1-10,b:5-20 -q ab
expect2 "fields: index ranges are for --format libsvm" --format vw --fields a:1-10
rc=0; "$FSGD" export --model "$tmp/x.fsgd" --format liblinear --out "$tmp/ll.txt" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 2 ] || fail "export of a crossed model: exit $rc"
# a bad row in predict's input: file:line:col, exit 3
sed '5s/ 3:1/ 3:x/; 5s/^\([-+]1 [0-9]*\):1/\1:x/' "$tmp/te.svm" > "$tmp/bad.svm"
rc=0; "$FSGD" predict --model "$tmp/x.fsgd" --data "$tmp/bad.svm" --out "$tmp/pb.txt" 2> "$tmp/e.txt" || rc=$?
[ $rc -eq 3 ] && grep -q "bad.svm:5:" "$tmp/e.txt" || fail "bad row in predict: $rc $(cat "$tmp/e.txt")"
echo "libsvm fields: crossed AUC $x vs linear $lin, predict $p with no flag, errors exit 2/3"
