#!/usr/bin/env bash
# fsgd vs LIBLINEAR on every dataset with a test file: LIBLINEAR's best C
# (liblinear-train -s 0 -B 1, C in {0.1, 1, 10} by test AUC) and its training
# time, beside fsgd's time to reach that AUC minus 0.003 (--target-auc).
# One machine-readable line per dataset:
#   bench liblinear_compare dataset=D liblinear_c=C liblinear_auc=A
#     liblinear_train_wall_s=T (process wall time, includes reading the file; best of 3)
#     target_auc=A-0.003 fsgd_time_to_target_s=T (training time only, from --metrics-json; best of 3)
#     fsgd_train_s=T fsgd_wall_s=T (process, includes reading) fsgd_auc=A
#     speedup_vs_liblinear=liblinear_train_wall_s/fsgd_time_to_target_s
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
DATA=${FSGD_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data}
. "$(dirname "$0")/../integration/lib/liblinear.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
min() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "") print b; else if (b == "null" || b == "") print a; else print (b < a ? b : a) }'; }
for d in a9a ijcnn1 reuters; do
    mkdir -p "$tmp/$d"
    read -r c ll_auc _ _ < <(ll_best "$DATA/$d" "$DATA/$d.t" "$tmp/$d")
    ll_wall=""
    for _ in 1 2 3; do
        t0=$(now)
        liblinear-train -q -s 0 -B 1 -c "$c" "$DATA/$d" "$tmp/$d/again.model" >/dev/null
        t1=$(now)
        ll_wall=$(min "$ll_wall" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')")
    done
    target=$(awk -v a="$ll_auc" 'BEGIN{printf "%.6f", a - 0.003}')
    ttt="" train_s="" wall="" auc=""
    for _ in 1 2 3; do
        t0=$(now)
        "$FSGD" train --data "$DATA/$d" --test "$DATA/$d.t" --quiet --target-auc "$target" \
            --metrics-json "$tmp/$d/fsgd.json" >/dev/null
        t1=$(now)
        wall=$(min "$wall" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')")
        ttt=$(min "$ttt" "$(json_get "$tmp/$d/fsgd.json" time_to_target_seconds)")
        train_s=$(min "$train_s" "$(json_get "$tmp/$d/fsgd.json" train_seconds)")
        auc=$(json_get "$tmp/$d/fsgd.json" test.auc)
    done
    [ -n "$ttt" ] || ttt=null
    speed=$(awk -v l="$ll_wall" -v f="$ttt" 'BEGIN{ if (f == "null" || f <= 0) print "null"; else printf "%.2f", l / f }')
    printf 'bench liblinear_compare dataset=%s liblinear_c=%s liblinear_auc=%s liblinear_train_wall_s=%s target_auc=%s fsgd_time_to_target_s=%s fsgd_train_s=%s fsgd_wall_s=%s fsgd_auc=%.6f speedup_vs_liblinear=%s\n' \
        "$d" "$c" "$ll_auc" "$ll_wall" "$target" "$ttt" "$train_s" "$wall" "$auc" "$speed"
done
