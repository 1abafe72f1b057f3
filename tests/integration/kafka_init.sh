#!/usr/bin/env bash
# fsgd run --init MODEL: the aggregator starts from a saved model (its
# weights, and with --save-state its Adam state) instead of zeros. With a
# learning rate too small to move it, one epoch ends where the model started
# (test logloss of the model file, not the 0.693 of zeros); a model of
# another loss or dimension is refused before any step, naming what differs.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
"$FSGD" train --data "$DATA/a9a" --test "$DATA/a9a.t" --epochs 2 --lr 0.01 --save-state --quiet \
    --out "$tmp/warm.fsgd" --metrics-json "$tmp/train.json" >/dev/null
ref=$(json_get "$tmp/train.json" test.logloss)
echo "fsgd train --save-state: test logloss $ref"
tiny=(--epochs 1 --lr 1e-9 --workers 2)
start_run "$tmp/warm.log" "${tiny[@]}" --init "$tmp/warm.fsgd" --metrics-json "$tmp/warm.json"
finish_run "$tmp/warm.log"
grep "aggregator: starting from $tmp/warm.fsgd: .* with its optimizer state" "$tmp/warm.log"
start_run "$tmp/cold.log" "${tiny[@]}" --metrics-json "$tmp/cold.json"
finish_run "$tmp/cold.log"
"$PY" - "$tmp/warm.json" "$tmp/cold.json" "$ref" <<'PYEOF'
import json, sys
w, c, ref = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
lw, lc = w["test"]["logloss"], c["test"]["logloss"]
print("one epoch at lr 1e-9: from the model %.5f (its own %.5f), from zeros %.5f; init_state %s" %
      (lw, ref, lc, w.get("init_state")))
sys.exit(0 if abs(lw - ref) < 0.002 and lc > 0.69 and w.get("init_state") is True else 1)
PYEOF
# refused: another loss; another dimension
rc=0
start_run "$tmp/svm.log" "${tiny[@]}" --init "$tmp/warm.fsgd" --model svm
wait "$RUN_PID" || rc=$?
RUN_PID=
grep "init model is logistic, this job trains svm" "$tmp/svm.log" || { cat "$tmp/svm.log"; exit 1; }
[ $rc -eq 2 ] || { echo "exit $rc, not 2"; exit 1; }
rc=0
start_run "$tmp/dim.log" "${tiny[@]}" --init "$tmp/warm.fsgd" --dim 200
wait "$RUN_PID" || rc=$?
RUN_PID=
grep "init model has dim 123, this job 200" "$tmp/dim.log" || { cat "$tmp/dim.log"; exit 1; }
[ $rc -eq 2 ] || { echo "exit $rc, not 2"; exit 1; }
