# Shared by tests/integration/auc_vs_liblinear.sh and tests/bench/liblinear_compare.sh
# (sourced, not run: run_tests.sh only runs tests/integration/*.sh).
#
# ll_best TRAIN TEST DIR: trains LIBLINEAR's L2-regularized logistic regression
# (liblinear-train -s 0 -B 1) with C in {0.1, 1, 10}, scores TEST with
# liblinear-predict -b 1, and prints "C AUC LOGLOSS WALL_SECONDS" of the C with
# the best test AUC. AUC and logloss come from scikit-learn (an implementation
# independent of fsgd's), with the probability of label +1 taken from the
# column that liblinear-predict's "labels" header names.

PY=${PY:-/usr/bin/python3}

now() { date +%s.%N; }

# ll_auc TEST PRED -> "AUC LOGLOSS"
ll_auc() {
    "$PY" - "$1" "$2" <<'PYEOF'
import sys
from sklearn.metrics import roc_auc_score, log_loss
test, pred = sys.argv[1], sys.argv[2]
y = []
with open(test) as f:
    for line in f:
        line = line.split('#', 1)[0].strip()
        if line:
            y.append(1 if float(line.split()[0]) > 0 else 0)
with open(pred) as f:
    header = f.readline().split()
    assert header[0] == 'labels', header
    col = header[1:].index('1') + 1  # column of P(label 1)
    p = [float(l.split()[col]) for l in f if l.strip()]
assert len(p) == len(y), (len(p), len(y))
print('%.6f %.6f' % (roc_auc_score(y, p), log_loss(y, p)))
PYEOF
}

ll_best() {
    local train=$1 test=$2 dir=$3 best="" c t0 t1 res
    for c in 0.1 1 10; do
        t0=$(now)
        liblinear-train -q -s 0 -B 1 -c "$c" "$train" "$dir/ll_$c.model" >/dev/null
        t1=$(now)
        liblinear-predict -b 1 "$test" "$dir/ll_$c.model" "$dir/ll_$c.pred" >/dev/null
        res=$(ll_auc "$test" "$dir/ll_$c.pred")
        echo "$c $res $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')" >>"$dir/ll_all"
    done
    # highest AUC; on a tie the smaller C (listed first)
    sort -s -k2,2gr "$dir/ll_all" | head -1
}

# json_get FILE a.b.c -> value ("null" when absent or null)
json_get() {
    "$PY" -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v.get(k) if isinstance(v, dict) else None
print("null" if v is None else v)' "$1" "$2"
}
