#!/usr/bin/env bash
# fsgd train against LIBLINEAR, whole process against whole process, on the
# same files in the same run. Each tool reads and parses the file itself and
# runs with its defaults:
#   fsgd       fsgd train --data TRAIN --test TEST --quiet (l2, lr, epochs auto)
#   LIBLINEAR  liblinear-train -s 0 -B 1 (L2 logistic regression, C = 1), and
#              -s 6 -B 1 (L1 logistic regression) on the shipped sets; on the
#              generated CTR set -s 0 -B 1 -c 0.01, its best C there.
# fsgd scores TEST itself at the end; LIBLINEAR's wall time is the training
# process only (liblinear-predict is not counted), so that comparison leans
# towards LIBLINEAR; the train+predict figure counts both of its processes.
# Wall times are medians of BENCH_REPEATS (3) runs, fsgd and LIBLINEAR
# alternating, so that load from other processes hits both.
# Sets: a9a, w8a (every 5th row as test), ijcnn1, reuters; and, unless
# BENCH_CTR_ROWS=0, a generated CTR set (fsgd gen, BENCH_CTR_ROWS rows,
# default 1e6, dim 2^24, 40 nonzeros a row, every 10th row as test; one run
# each, LIBLINEAR takes ~30-60 s there).
#
# One line per set:
#   bench liblinear_compare set=S liblinear_auc=A (-s 0) liblinear_wall_s=T
#     liblinear_s6_auc=A liblinear_s6_wall_s=T (shipped sets only)
#     fsgd_auc=A fsgd_wall_s=T fsgd_epochs=E fsgd_rss_mb=M
#     fsgd_over_liblinear=fsgd_wall_s/liblinear_wall_s (whole process; < 1: fsgd is faster)
#     liblinear_train_predict_wall_s=T (liblinear-train then liblinear-predict on TEST,
#       both whole processes: the same work as one fsgd train --test, which scores TEST)
#     fsgd_over_liblinear_train_predict=fsgd_wall_s/liblinear_train_predict_wall_s
#     target_auc=liblinear_auc-0.003
#     fsgd_process_time_to_target_s=T (from the start of fsgd train, parsing included; a
#       separate run with --target-auc, which scores TEST at every epoch end)
#     fsgd_in_process_time_to_target_s=T (training loop only, no parsing or setup: the
#       old figure, for comparison with earlier runs; not comparable with liblinear_wall_s)
#     fsgd_reaches_target=yes|no (the default run's final AUC >= target)
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
DATA=${FSGD_DATA:-$("$(dirname "$0")/../../scripts/unpack-data.sh" "${BUILD:-build}/datasets")}
REPEATS=${BENCH_REPEATS:-3}
CTR_ROWS=${BENCH_CTR_ROWS:-1000000}
. "$(dirname "$0")/../integration/lib/liblinear.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.4f", b - a}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ll_run() { # TRAIN TEST MODEL ARGS... -> wall seconds of liblinear-train
    local train=$1 test=$2 model=$3 t0 t1
    shift 3
    t0=$(now)
    liblinear-train -q "$@" "$train" "$model" >/dev/null
    t1=$(now)
    secs "$t0" "$t1"
}
ll_predict() { # TEST MODEL PRED -> wall seconds of liblinear-predict -b 1
    local t0 t1
    t0=$(now)
    liblinear-predict -b 1 "$1" "$2" "$3" >/dev/null
    t1=$(now)
    secs "$t0" "$t1"
}
fsgd_run() { # TRAIN TEST JSON ARGS... -> wall seconds of fsgd train
    local train=$1 test=$2 json=$3 t0 t1
    shift 3
    t0=$(now)
    "$FSGD" train --data "$train" --test "$test" --quiet --metrics-json "$json" "$@" >/dev/null
    t1=$(now)
    secs "$t0" "$t1"
}

compare() { # SET TRAIN TEST REPEATS LIBLINEAR_ARGS...
    local set=$1 train=$2 test=$3 reps=$4 d=$tmp/$1 i ll_w=() llp_w=() f_w=() s6_w=() s6="" line tr pr
    shift 4
    mkdir -p "$d"
    for ((i = 0; i < reps; i++)); do
        tr=$(ll_run "$train" "$test" "$d/ll.model" "$@")
        pr=$(ll_predict "$test" "$d/ll.model" "$d/ll.pred")
        ll_w+=("$tr")
        llp_w+=("$(awk -v a="$tr" -v b="$pr" 'BEGIN{printf "%.4f", a + b}')")
        f_w+=("$(fsgd_run "$train" "$test" "$d/fsgd.json")")
        [ "$set" = ctr ] || s6_w+=("$(ll_run "$train" "$test" "$d/ll6.model" -s 6 -B 1)")
    done
    read -r ll_auc _ < <(ll_auc "$test" "$d/ll.pred")
    if [ "$set" != ctr ]; then
        liblinear-predict -b 1 "$test" "$d/ll6.model" "$d/ll6.pred" >/dev/null
        read -r s6_auc _ < <(ll_auc "$test" "$d/ll6.pred")
        s6=" liblinear_s6_auc=$s6_auc liblinear_s6_wall_s=$(median "${s6_w[@]}")"
    fi
    local llw llpw fw target
    llw=$(median "${ll_w[@]}")
    llpw=$(median "${llp_w[@]}")
    fw=$(median "${f_w[@]}")
    target=$(awk -v a="$ll_auc" 'BEGIN{printf "%.6f", a - 0.003}')
    local auc epochs rss
    auc=$(json_get "$d/fsgd.json" test.auc)
    epochs=$(json_get "$d/fsgd.json" epochs_run)
    rss=$(json_get "$d/fsgd.json" peak_rss_mb)
    fsgd_run "$train" "$test" "$d/target.json" --target-auc "$target" >/dev/null
    line="bench liblinear_compare set=$set liblinear_args=\"$*\" liblinear_auc=$ll_auc liblinear_wall_s=$llw$s6"
    line+=" fsgd_auc=$(awk -v a="$auc" 'BEGIN{printf "%.6f", a}') fsgd_wall_s=$fw fsgd_epochs=$epochs"
    line+=" fsgd_rss_mb=$(awk -v a="$rss" 'BEGIN{printf "%.0f", a}')"
    line+=" fsgd_over_liblinear=$(awk -v a="$fw" -v b="$llw" 'BEGIN{printf "%.3f", a / b}')"
    line+=" liblinear_train_predict_wall_s=$llpw"
    line+=" fsgd_over_liblinear_train_predict=$(awk -v a="$fw" -v b="$llpw" 'BEGIN{printf "%.3f", a / b}')"
    line+=" target_auc=$target"
    line+=" fsgd_process_time_to_target_s=$(json_get "$d/target.json" process_time_to_target_seconds)"
    line+=" fsgd_in_process_time_to_target_s=$(json_get "$d/target.json" time_to_target_seconds)"
    line+=" fsgd_reaches_target=$(awk -v a="$auc" -v t="$target" 'BEGIN{print (a >= t) ? "yes" : "no"}')"
    echo "$line"
    rm -rf "$d"
}

awk -v tr="$tmp/w8a.train" -v te="$tmp/w8a.test" '/[^[:space:]]/ { print > (++n % 5 ? tr : te) }' "$DATA/w8a"
compare a9a "$DATA/a9a" "$DATA/a9a.t" "$REPEATS" -s 0 -B 1
compare w8a "$tmp/w8a.train" "$tmp/w8a.test" "$REPEATS" -s 0 -B 1
compare ijcnn1 "$DATA/ijcnn1" "$DATA/ijcnn1.t" "$REPEATS" -s 0 -B 1
compare reuters "$DATA/reuters" "$DATA/reuters.t" "$REPEATS" -s 0 -B 1
if [ "$CTR_ROWS" -gt 0 ]; then
    "$FSGD" gen --rows "$CTR_ROWS" --dim 16777216 --nnz 40 --seed 1 --quiet --out "$tmp/ctr.svm"
    awk -v tr="$tmp/ctr.train" -v te="$tmp/ctr.test" '/[^[:space:]]/ { print > (++n % 10 ? tr : te) }' "$tmp/ctr.svm"
    rm -f "$tmp/ctr.svm"
    compare ctr "$tmp/ctr.train" "$tmp/ctr.test" 1 -s 0 -B 1 -c 0.01
fi
