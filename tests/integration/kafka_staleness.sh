#!/usr/bin/env bash
# Bounded staleness (job key staleness, trainer/KAFKA_FORMAT.md): with
# staleness 0 no gradient is held or stale (the synchronous exchange); with
# staleness 4 workers run ahead of their model: gradients wait for their step
# and are applied with a lag of at most 4, every epoch still applies exactly
# the dataset's rows, and the test AUC stays within 0.003 of staleness 0 (the
# default's promise, README "fsgd run defaults") and of fsgd train
# --staleness 4, which simulates the delay in one process. gTop-k runs in lockstep
# whatever the job asks. Then the defaults of fsgd run (l2, lr, epochs auto:
# early stopping on held-out rows) end within 0.003 of fsgd train's.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
COMMON=("${COMMON[@]/none/fastsgd}")
run_tau() { # TAU JSON [args]
    local tau=$1 json=$2
    shift 2
    start_run "$tmp/run$tau.log" --workers 3 --staleness "$tau" --metrics-json "$json" "$@"
    finish_run "$tmp/run$tau.log"
}
run_tau 0 "$tmp/s0.json"
run_tau 4 "$tmp/s4.json"
ref=$(json_get "$tmp/s0.json" test.auc)
check_metrics "$tmp/s4.json" "$ref" 0.003
"$PY" - "$tmp/s0.json" "$tmp/s4.json" <<'PYEOF'
import json, sys
s0, s4 = (json.load(open(p))["staleness"] for p in sys.argv[1:])
print("staleness 0:", s0, "\nstaleness 4:", s4)
assert s0 == {"tau": 0, "held_early": 0, "stale_applied": 0, "lag_max": 0}, s0
assert s4["tau"] == 4 and s4["stale_applied"] > 0 and s4["held_early"] > 0 and 1 <= s4["lag_max"] <= 4, s4
PYEOF
# fsgd train --staleness 4 simulates the same bounded delay in one process
# (each gradient on the model of 4 steps before, the most a worker lags)
"$FSGD" train "${COMMON[@]}" --staleness 4 --threads 3 --quiet --metrics-json "$tmp/t4.json" >/dev/null
[ "$(json_get "$tmp/t4.json" staleness)" = 4 ] || { echo "fsgd train did not simulate staleness 4"; exit 1; }
"$PY" - "$tmp/t4.json" "$tmp/s4.json" <<'PYEOF'
import json, sys
t, r = (json.load(open(p))["test"]["auc"] for p in sys.argv[1:])
print("staleness 4: fsgd train (simulated) auc %.5f, fsgd run %.5f" % (t, r))
assert abs(t - r) <= 0.003
PYEOF
# gTop-k reads each message's outcome before the next: lockstep
COMMON=("${COMMON[@]/fastsgd/gtopk}")
run_tau 4 "$tmp/g.json"
[ "$(json_get "$tmp/g.json" staleness.tau)" = 0 ] || { echo "gtopk ran ahead"; exit 1; }
grep -q "staleness 4 asked, 0 used: strategy gtopk" "$tmp/run4.log" || { cat "$tmp/run4.log"; exit 1; }
# The defaults: auto l2, lr and epochs (the aggregator holds out rows and
# keeps the best weights) against fsgd train's on the same files.
"$FSGD" train --data "$DATA/a9a" --test "$DATA/a9a.t" --quiet --metrics-json "$tmp/t.json" >/dev/null
COMMON=()
start_run "$tmp/auto.log" --data "$DATA/a9a" --test "$DATA/a9a.t" --workers 2 --metrics-json "$tmp/auto.json"
finish_run "$tmp/auto.log"
"$PY" - "$tmp/t.json" "$tmp/auto.json" <<'PYEOF'
import json, sys
t, r = (json.load(open(p)) for p in sys.argv[1:])
print("fsgd train: auc %.5f lr %.5f l2 %.3g | fsgd run: auc %.5f lr %.5f l2 %.3g, %d held out, %d looks, "
      "best at epoch %.2f of %.2f, stopped early %s" % (t["test"]["auc"], t["lr"], t["l2"], r["test"]["auc"],
      r["lr"], r["l2"], r["holdout_rows"], r["holdout_looks"], r["best_epoch"], r["epochs_run"], r["stopped_early"]))
assert r["holdout_rows"] > 0 and r["holdout_looks"] > 0 and r["l2"] > 0 and r["lr"] > 0
assert abs(r["test"]["auc"] - t["test"]["auc"]) <= 0.003
PYEOF
# lr auto under the delay (docs/defaults.md): at τ 4 a9a's rows (14 binary
# features and the intercept) cap it at 0.8 / ((τ + 1)·row_l1), below the
# 0.014 of its 115 steps an epoch; the aggregator takes Σ|x| from the data
# summary, fsgd train from its rows.
start_run "$tmp/cap.log" --data "$DATA/a9a" --test "$DATA/a9a.t" --workers 2 --staleness 4 --epochs 1 \
    --metrics-json "$tmp/cap.json"
finish_run "$tmp/cap.log"
"$FSGD" train --data "$DATA/a9a" --test "$DATA/a9a.t" --staleness 4 --epochs 1 --quiet --metrics-json "$tmp/tcap.json" >/dev/null
"$PY" - "$DATA/a9a" "$tmp/cap.json" "$tmp/tcap.json" "$tmp/t.json" <<'PYEOF'
import json, sys
rows = [l.split()[1:] for l in open(sys.argv[1]) if l.strip()]
row_l1 = sum(abs(float(t.split(":")[1])) for r in rows for t in r) / len(rows) + 1
r, t, t0 = (json.load(open(p)) for p in sys.argv[2:])
cap = 0.8 / (5 * row_l1)
print("tau 4: row_l1 %.4f, cap %.6f; fsgd run lr %.6f, fsgd train lr %.6f (%.6f without delay)"
      % (row_l1, cap, r["lr"], t["lr"], t0["lr"]))
assert r["staleness"]["tau"] == 4 and t["staleness"] == 4
assert t0["lr"] > cap and abs(r["lr"] - cap) < 1e-9 * cap and abs(t["lr"] - cap) < 1e-9 * cap
PYEOF
