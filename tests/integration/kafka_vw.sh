#!/usr/bin/env bash
# fsgd run with VW rows and crosses (-q aa) on the embedded cluster or a real
# broker: the rows travel as their text, one a message (NAME.data holds the
# file's bytes, not the crossed columns), the workers build the crosses, and
# the test AUC is within 0.003 of fsgd train with the same options; the model
# records the crosses, so fsgd predict scores the same with no flag.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
tovw='{ printf "%s |a", ($1 > 0 ? "1" : "-1"); for (i = 2; i <= NF; i++) { split($i, p, ":"); printf " f%s", p[1] } print "" }'
awk "$tovw" "$DATA/a9a" > "$tmp/train.vw"
awk "$tovw" "$DATA/a9a.t" > "$tmp/test.vw"
COMMON=(--data "$tmp/train.vw" --test "$tmp/test.vw" --format vw -q aa --batch 256 --epochs 3 --lr 0.002
    --codec none --job-key-file "$FSGD_JOB_KEY")
ref=$(reference_auc)
echo "fsgd train reference: test auc $ref"
start_run "$tmp/run.log" --workers 3 --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json"
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.003
mb=$(awk -v b="$(stat -c %s "$tmp/train.vw")" 'BEGIN { printf "%.1f", b / 1e6 }')
grep -q "produced 32561 rows ($mb MB)" "$tmp/run.log" || { grep produced "$tmp/run.log"; echo "NAME.data is not the text"; exit 1; }
"$FSGD" model info "$tmp/m.fsgd" | grep -q '^input: vw:bits=18:seed=0:interactions=aa$'
"$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/test.vw" --out "$tmp/p.txt" 2> "$tmp/pred.txt"
"$PY" - "$tmp/m.json" "$tmp/pred.txt" <<'PY'
import json, re, sys
m = json.load(open(sys.argv[1]))
auc = float(re.search(r"auc ([0-9.]+)", open(sys.argv[2]).read()).group(1))
assert abs(auc - m["test"]["auc"]) < 1e-4, (auc, m["test"]["auc"])
print("predict auc %.5f = the run's %.5f" % (auc, m["test"]["auc"]))
PY
