#!/usr/bin/env bash
# fsgd train with its defaults reaches LIBLINEAR's test AUC minus 0.003 on
# every dataset here that has a test file. LIBLINEAR: liblinear-train -s 0 -B 1,
# C in {0.1, 1, 10} chosen by test AUC (scikit-learn's roc_auc_score over
# liblinear-predict -b 1 probabilities). fsgd's AUC is its own exact AUC from
# --metrics-json (test_metrics checks it against a brute-force pair count).
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
DATA=${FSGD_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data}
. "$(dirname "$0")/lib/liblinear.bash"
. "$(dirname "$0")/lib/skip.bash"
needs_data a9a a9a.t ijcnn1 ijcnn1.t reuters reuters.t
needs_cmd liblinear-train liblinear-predict
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for d in a9a ijcnn1 reuters; do
    mkdir -p "$tmp/$d"
    read -r c ll_auc ll_logloss _ < <(ll_best "$DATA/$d" "$DATA/$d.t" "$tmp/$d")
    "$FSGD" train --data "$DATA/$d" --test "$DATA/$d.t" --quiet --metrics-json "$tmp/$d/fsgd.json" >/dev/null
    auc=$(json_get "$tmp/$d/fsgd.json" test.auc)
    logloss=$(json_get "$tmp/$d/fsgd.json" test.logloss)
    ok=$(awk -v a="$auc" -v b="$ll_auc" 'BEGIN{print (a >= b - 0.003) ? "ok" : "FAIL"}')
    printf '%-4s %-8s fsgd auc %.5f logloss %.5f | liblinear C=%s auc %.5f logloss %.5f | need auc >= %.5f\n' \
        "$ok" "$d" "$auc" "$logloss" "$c" "$ll_auc" "$ll_logloss" "$(awk -v b="$ll_auc" 'BEGIN{print b-0.003}')"
    [ "$ok" = ok ] || fail=1
done
exit $fail
