#!/usr/bin/env bash
# fsgd train with its defaults (no options but the files: l2, lr and epochs
# auto) reaches LIBLINEAR's default test AUC minus 0.003 on every shipped set:
# a9a, w8a (every 5th row as test, as tests/bench/peers_compare.sh splits it),
# ijcnn1, reuters, and two sets from fsgd gen: CTR-shaped data (100k rows,
# 2^20 features) and a small rare-positive one shaped like a CTR sample (27k
# training rows, ~1% positives, 133k features; its 100k test rows hold ~1000
# positives, so the AUC compared is not itself noise). LIBLINEAR's default: liblinear-train -s 0 -B 1 (C = 1);
# its best C in {0.1, 1, 10} is printed beside it, not asserted. LIBLINEAR's
# AUC is scikit-learn's roc_auc_score over liblinear-predict -b 1
# probabilities; fsgd's is its own exact AUC from --metrics-json (test_metrics
# checks it against a brute-force pair count).
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/liblinear.bash"
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
needs_data a9a a9a.t w8a ijcnn1 ijcnn1.t reuters reuters.t
needs_cmd liblinear-train liblinear-predict
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -v tr="$tmp/w8a.train" -v te="$tmp/w8a.test" '/[^[:space:]]/ { print > (++n % 5 ? tr : te) }' "$DATA/w8a"
# gen_split NAME TRAIN_ROWS TEST_ROWS GEN_OPTIONS...: one generated file cut
# into NAME.train (the first rows) and NAME.test
gen_split() {
    local name=$1 ntr=$2 nte=$3
    shift 3
    "$FSGD" gen --rows $((ntr + nte)) --quiet --out "$tmp/$name.all" "$@"
    head -n "$ntr" "$tmp/$name.all" >"$tmp/$name.train"
    tail -n "$nte" "$tmp/$name.all" >"$tmp/$name.test"
}
gen_split ctr 100000 50000 --dim 1048576 --nnz 30 --seed 3
gen_split rare 27000 100000 --dim 133000 --nnz 20 --bias -5.3 --seed 7
fail=0
for d in a9a w8a ijcnn1 reuters ctr rare; do
    train=$DATA/$d test=$DATA/$d.t
    case $d in w8a | ctr | rare) train=$tmp/$d.train test=$tmp/$d.test ;; esac
    mkdir -p "$tmp/$d"
    read -r best_c best_auc _ _ < <(ll_best "$train" "$test" "$tmp/$d")
    read -r _ ll_auc ll_logloss _ < <(grep '^1 ' "$tmp/$d/ll_all")
    "$FSGD" train --data "$train" --test "$test" --quiet --metrics-json "$tmp/$d/fsgd.json" >/dev/null
    auc=$(json_get "$tmp/$d/fsgd.json" test.auc)
    logloss=$(json_get "$tmp/$d/fsgd.json" test.logloss)
    epochs=$(json_get "$tmp/$d/fsgd.json" epochs_run)
    ok=$(awk -v a="$auc" -v b="$ll_auc" 'BEGIN{print (a >= b - 0.003) ? "ok" : "FAIL"}')
    printf '%-4s %-8s fsgd auc %.5f logloss %.5f (%.2f epochs) | liblinear C=1 auc %.5f logloss %.5f | best C=%s auc %.5f | need auc >= %.5f\n' \
        "$ok" "$d" "$auc" "$logloss" "$epochs" "$ll_auc" "$ll_logloss" "$best_c" "$best_auc" \
        "$(awk -v b="$ll_auc" 'BEGIN{print b-0.003}')"
    [ "$ok" = ok ] || fail=1
done
exit $fail
