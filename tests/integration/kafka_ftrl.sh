#!/usr/bin/env bash
# fsgd run --optimizer ftrl: the aggregator holds FTRL-Proximal's z and n
# (issue 29) and ends within 0.002 test AUC of fsgd train with the same
# settings, L1 included; the model's nonzero weights are as sparse as fsgd
# train's.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
COMMON=(--data "$DATA/a9a" --test "$DATA/a9a.t" --batch 256 --epochs 3 --codec none
    --optimizer ftrl --alpha 0.2 --l1 2e-4 --l2 0)
"$FSGD" train "${COMMON[@]}" --quiet --threads 3 --metrics-json "$tmp/ref.json" --out "$tmp/ref.fsgd" >/dev/null
ref=$(json_get "$tmp/ref.json" test.auc)
start_run "$tmp/run.log" --workers 3 --out "$tmp/m.fsgd" --metrics-json "$tmp/m.json"
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.002
"$PY" - "$tmp/ref.fsgd" "$tmp/m.fsgd" <<'PYEOF'
import struct, sys
nnz = [struct.unpack_from("<Q", open(p, "rb").read(), 24)[0] for p in sys.argv[1:]]
print("nonzero weights: fsgd train %d, fsgd run %d (of 123)" % tuple(nnz))
assert 0 < nnz[1] < 123 and abs(nnz[0] - nnz[1]) <= 10, nnz
PYEOF
echo ok
