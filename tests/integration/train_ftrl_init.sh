#!/usr/bin/env bash
# fsgd train --optimizer ftrl and --init through the CLI (issue 29): FTRL
# reaches Adam's test AUC on a9a; L1 makes the model sparse, the summary and
# metrics JSON count its nonzero weights and the model file stores only
# those; options the chosen optimizer would ignore are errors naming them;
# --init continues a saved model (with its optimizer state after
# --save-state) and refuses one that does not fit.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
D=$DATA
needs_data a9a a9a.t
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
py() { /usr/bin/python3 "$@"; }
tr() { "$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --threads 1 --quiet "$@"; }

# FTRL with its defaults against Adam with its defaults.
tr --metrics-json "$tmp/adam.json" --out "$tmp/adam.fsgd" > /dev/null
tr --optimizer ftrl --metrics-json "$tmp/ftrl.json" --out "$tmp/ftrl.fsgd" > "$tmp/ftrl.txt"
grep -q "ftrl alpha .* (auto)" "$tmp/ftrl.txt" || fail "summary does not name ftrl: $(head -1 "$tmp/ftrl.txt")"
# L1 (objective mean loss + l1·|w|₁): fewer nonzero weights, a smaller file.
tr --optimizer ftrl --l1 3e-4 --metrics-json "$tmp/l1.json" --out "$tmp/l1.fsgd" > "$tmp/l1.txt"
grep -q "^weights: [0-9]* nonzero of [0-9]* touched" "$tmp/l1.txt" || fail "no weights line: $(cat "$tmp/l1.txt")"
py - "$tmp" <<'PY'
import json, os, struct, sys
t = sys.argv[1]
a, f, l = (json.load(open(f"{t}/{n}.json")) for n in ("adam", "ftrl", "l1"))
assert a["optimizer"] == "adam" and f["optimizer"] == "ftrl", (a["optimizer"], f["optimizer"])
assert f["alpha_auto"] is True and 0.01 <= f["alpha"] <= 0.5, f
assert abs(f["test"]["auc"] - a["test"]["auc"]) < 0.003, (f["test"]["auc"], a["test"]["auc"])
assert l["weights_nonzero"] < 0.8 * f["weights_nonzero"], (l["weights_nonzero"], f["weights_nonzero"])
assert l["test"]["auc"] > a["test"]["auc"] - 0.01, (l["test"]["auc"], a["test"]["auc"])
for n, m in (("ftrl", f), ("l1", l)):
    b = open(f"{t}/{n}.fsgd", "rb").read()
    nnz = struct.unpack_from("<Q", b, 24)[0]  # MODEL_FORMAT.md: nnz at byte 24
    assert nnz == m["weights_nonzero"], (n, nnz, m["weights_nonzero"])
    assert len(b) == 48 + 8 * nnz, (n, len(b), nnz)  # only the nonzero weights are stored
print("ftrl: test auc %.5f (adam %.5f), alpha %.3g; l1 3e-4: %d of %d weights nonzero (%d without), auc %.5f"
      % (f["test"]["auc"], a["test"]["auc"], f["alpha"], l["weights_nonzero"], l["weights_touched"],
         f["weights_nonzero"], l["test"]["auc"]))
PY

# Options the optimizer would ignore, and what fsgd run does not take.
expect_err() { # WHAT PATTERN cmd...
    local what=$1 pat=$2
    shift 2
    if "$@" > /dev/null 2> "$tmp/err.txt"; then fail "$what: accepted"; fi
    grep -q -- "$pat" "$tmp/err.txt" || fail "$what: error does not say '$pat': $(cat "$tmp/err.txt")"
}
expect_err "l1 with adam" "needs optimizer ftrl" tr --l1 1e-6
expect_err "alpha with adam" "alpha is FTRL's" tr --alpha 0.1
expect_err "VW's name with adam" "beta is FTRL's" tr --ftrl_beta 0.5
expect_err "lr with ftrl" "lr is Adam's" tr --optimizer ftrl --lr 0.01
expect_err "unknown optimizer" "expected adam or ftrl" tr --optimizer sgd
expect_err "ftrl with efsign" "optimizer ftrl" tr --optimizer ftrl --codec efsign
# (fsgd run --init: tests/integration/kafka_init.sh; --save-state is fsgd train's only)
expect_err "fsgd run with save-state" "save_state is for fsgd train" "$FSGD" run --data "$D/a9a" --save-state --epochs 1

# --init: a rate too small to move anything gives the model back; a real
# continuation trains on from it.
tr --init "$tmp/adam.fsgd" --lr 1e-9 --epochs 1 --out "$tmp/same.fsgd" --metrics-json "$tmp/same.json" > /dev/null
tr --optimizer ftrl --init "$tmp/l1.fsgd" --alpha 1e-9 --epochs 1 --l1 3e-4 --out "$tmp/same_l1.fsgd" > /dev/null
py - "$tmp" <<'PY'
import json, struct, sys
t = sys.argv[1]
def weights(p):
    b = open(p, "rb").read()
    nnz = struct.unpack_from("<Q", b, 24)[0]
    return {struct.unpack_from("<I", b, 44 + 8 * i)[0]: struct.unpack_from("<f", b, 48 + 8 * i)[0] for i in range(nnz)}
for a, b in (("adam", "same"), ("l1", "same_l1")):
    # (a weight L1 held at 0 may wake up by ~alpha: its z, anywhere in
    # [-λ1, λ1], is not in the model file, so the warm start puts it at 0)
    wa, wb = weights(f"{t}/{a}.fsgd"), weights(f"{t}/{b}.fsgd")
    worst = max(abs(wa.get(k, 0) - wb.get(k, 0)) for k in wa.keys() | wb.keys())
    assert worst < 1e-5 and len(wa) >= 0.9 * len(wb), (a, worst, len(wa), len(wb))
m = json.load(open(f"{t}/same.json"))
assert m["init"].endswith("adam.fsgd"), m["init"]
PY
# --save-state: the optimizer's state goes into the model file (version 3)
# and --init resumes it when the optimizer matches, else takes the weights.
tr --optimizer ftrl --l1 3e-4 --save-state --out "$tmp/st.fsgd" > /dev/null
py -c 'import struct,sys; b=open(sys.argv[1],"rb").read(); assert struct.unpack_from("<H",b,8)[0]==3 and b[11]&4, b[8:12]' "$tmp/st.fsgd"
"$FSGD" predict --model "$tmp/st.fsgd" --data "$D/a9a.t" --out "$tmp/p.txt" --quiet
trv() { "$FSGD" train --data "$D/a9a" --test "$D/a9a.t" --threads 1 "$@"; } # not quiet: says what it resumed
trv --optimizer ftrl --l1 3e-4 --init "$tmp/st.fsgd" --epochs 1 --metrics-json "$tmp/r.json" 2> "$tmp/r.err" > /dev/null
grep -q "and its ftrl state ([0-9]* keys" "$tmp/r.err" || fail "resume not said: $(cat "$tmp/r.err")"
py -c 'import json,sys; assert json.load(open(sys.argv[1]))["init_state"] is True' "$tmp/r.json"
trv --init "$tmp/st.fsgd" --epochs 1 --metrics-json "$tmp/w.json" 2> "$tmp/w.err" > /dev/null
grep -q "weights only: its state is ftrl's, this run trains adam" "$tmp/w.err" || fail "mismatch not said: $(cat "$tmp/w.err")"
py -c 'import json,sys; assert json.load(open(sys.argv[1]))["init_state"] is False' "$tmp/w.json"
# fsgd model info says what the file holds; export says how sparse it is
"$FSGD" model info "$tmp/st.fsgd" > "$tmp/info.txt"
grep -q "^format version: 3$" "$tmp/info.txt" || fail "model info: $(cat "$tmp/info.txt")"
grep -q "^optimizer state: ftrl, [0-9]* keys, step 0$" "$tmp/info.txt" || fail "model info: $(cat "$tmp/info.txt")"
nz=$(py -c 'import json,sys; print(json.load(open(sys.argv[1]))["weights_nonzero"])' "$tmp/l1.json")
"$FSGD" model info "$tmp/l1.fsgd" | grep -q "^nonzero weights: $nz " || fail "model info nonzero count"
"$FSGD" model info "$tmp/l1.fsgd" | grep -q "^optimizer state: none$" || fail "model info: state of l1.fsgd"
"$FSGD" export --model "$tmp/l1.fsgd" --format liblinear --out "$tmp/l1.txt" | grep -q "$nz nonzero weights" ||
    fail "export does not count the nonzero weights"
expect_err "save-state with a lossy codec" "save_state keeps the optimizer's state only" tr --save-state --codec fastsgd

# model, intercept, dim and input format must match
expect_err "init svm" "this job trains svm" tr --init "$tmp/adam.fsgd" --model svm
expect_err "init no intercept" "intercept" tr --init "$tmp/adam.fsgd" --no-bias
expect_err "init dim" "has dim 123, this job 500" tr --init "$tmp/adam.fsgd" --dim 500
expect_err "init format" "trained on input libsvm" "$FSGD" train --data "$D/a9a" --format criteo --init "$tmp/adam.fsgd"
expect_err "init missing" "nope.fsgd" tr --init "$tmp/nope.fsgd"
expect_err "init with cache" "init does not combine with cache" tr --init "$tmp/adam.fsgd" --cache "$tmp/c.cache"
echo ok
