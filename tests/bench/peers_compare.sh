#!/usr/bin/env bash
# fsgd against its peers, whole process against whole process, on the same
# files in the same run: LIBLINEAR (Debian's liblinear-tools) and Vowpal Wabbit
# (pinned in build/venv by scripts/install-peers.sh). Sets: a9a, w8a (every 5th
# row as test), ijcnn1, reuters, and a generated CTR set (fsgd gen,
# PEERS_CTR_ROWS rows, default 1e6, dim 2^24, 40 nonzeros a row; every 10th
# row as test).
#
# Each tool runs with its defaults, no tuning:
#   fsgd       fsgd train --data TRAIN --test TEST --out M; fsgd predict (margins).
#              --test only keeps train from splitting off 20% of TRAIN; with
#              --quiet fsgd scores it once, at the end, which it pays for.
#              Defaults: l2, lr and epochs auto (early stopping on 10% of TRAIN).
#   LIBLINEAR  liblinear-train -s 0 -B 1 (C=1); liblinear-predict -b 1.
#   VW         --loss_function logistic (one online pass, 2^18 hashed weights),
#              -f M; then -t -i M -p P. Labels -1/1. PEERS_VW_ARGS adds options.
#              On the CTR set (2^24 features) VW gets -b 24, the model size
#              fsgd trains there (2^18 would fold its keys 64 to a weight:
#              less memory, lower AUC); PEERS_VW_CTR_ARGS replaces that.
# Fairness of parsing: every timed process reads the data from disk in the
# tool's own input format and parses it itself (fsgd and LIBLINEAR: LIBSVM;
# VW: its text format). The LIBSVM -> VW text conversion (awk) runs before, not
# timed, since it would be a second parse only VW pays; its time is printed as
# convert_s. The VW processes start Python and import vowpalwabbit (about 0.1 s
# and 30 MB) because the package has no vw binary (tests/bench/lib/peers_vw.py).
#
# wall_s = train + predict process wall seconds, rss_mb = the larger peak RSS of
# the two (/usr/bin/time, else Python's resource module). fsgd and VW run
# PEERS_REPEATS times (default 3), alternating, the order swapped each round;
# wall_s is their median (every run's in walls_s), rss_mb the largest peak;
# LIBLINEAR runs once (its CTR run alone takes ~50 s). One AUC code for all
# three (tests/bench/lib/peers_auc.py, scikit-learn). Lines:
#   bench peers set=S tool=T wall_s=.. train_s=.. predict_s=.. rss_mb=.. test_auc=.. runs=N walls_s=..
#   bench peers set=S train_rows=.. test_rows=.. fsgd_over_liblinear=W_fsgd/W_ll
#     fsgd_over_vw=W_fsgd/W_vw auc_fsgd=.. auc_liblinear=.. auc_vw=..
#     rss_mb_fsgd=.. rss_mb_liblinear=.. rss_mb_vw=.. fsgd_rss_over_vw=R_fsgd/R_vw
# (ratios of wall_s and of peak RSS: below 1 means fsgd took less time or
# memory). PEERS_FSGD_ARGS adds options to fsgd train (e.g. --optimizer ftrl).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
FSGD=${FSGD:-bin/fsgd}
DATA=${FSGD_DATA:-$("$root/scripts/unpack-data.sh" "$root/${BUILD:-build}/datasets")}
VENV=${FSGD_VENV:-$root/build/venv}
PY=${PY:-/usr/bin/python3}
CTR_ROWS=${PEERS_CTR_ROWS:-1000000}
VW_ARGS=${PEERS_VW_ARGS:-}
VW_CTR_ARGS=${PEERS_VW_CTR_ARGS--b 24}
REPEATS=${PEERS_REPEATS:-3}
read -r -a FSGD_ARGS <<<"${PEERS_FSGD_ARGS:-}"

die() { echo "peers_compare: $*" >&2; exit 1; }
[ -x "$FSGD" ] || die "fsgd binary $FSGD not found (make)"
command -v liblinear-train >/dev/null && command -v liblinear-predict >/dev/null ||
    die "liblinear-train/liblinear-predict not found (apt-get install liblinear-tools)"
[ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import vowpalwabbit' 2>/dev/null ||
    die "Vowpal Wabbit venv $VENV missing or without vowpalwabbit (run scripts/install-peers.sh)"
"$PY" -c 'import sklearn' 2>/dev/null || die "$PY has no scikit-learn (apt-get install python3-sklearn)"
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || die "PEERS_REPEATS=$REPEATS: need a count >= 1"
[[ $CTR_ROWS =~ ^[0-9]+$ ]] && [ "$CTR_ROWS" -ge 100 ] || die "PEERS_CTR_ROWS=$CTR_ROWS: need a row count >= 100"
for f in a9a a9a.t w8a ijcnn1 ijcnn1.t reuters reuters.t; do
    [ -s "$DATA/$f" ] || die "dataset $DATA/$f missing (FSGD_DATA)"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# measure NAME cmd...: runs cmd, output to $tmp/NAME.log; sets M_WALL (s), M_RSS (KiB).
measure() {
    local name=$1
    shift
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%e %M' -o "$tmp/$name.time" "$@" >"$tmp/$name.log" 2>&1 ||
            { tail -5 "$tmp/$name.log" >&2; die "$name failed: $*"; }
    else
        "$PY" - "$tmp/$name.time" "$@" >"$tmp/$name.log" 2>&1 <<'PYEOF' ||
import resource, subprocess, sys, time
t0 = time.monotonic()
rc = subprocess.call(sys.argv[2:])
wall = time.monotonic() - t0
open(sys.argv[1], 'w').write('%.2f %d\n' % (wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc)
PYEOF
            { tail -5 "$tmp/$name.log" >&2; die "$name failed: $*"; }
    fi
    read -r M_WALL M_RSS <"$tmp/$name.time"
}

# tool SET TOOL TEST FORMAT PRED [EXTRA]: measures $train_cmd and
# $predict_cmd (arrays) once; leaves the run's wall seconds (train + predict)
# in RUN_W, train and predict seconds in RUN_TW, RUN_PW, the larger peak RSS
# (MB) in RUN_R and the AUC in RUN_A.
tool_once() {
    local test=$3 fmt=$4 pred=$5
    measure "$1.$2.train" "${train_cmd[@]}"
    RUN_TW=$M_WALL
    local tr=$M_RSS
    measure "$1.$2.predict" "${predict_cmd[@]}"
    RUN_PW=$M_WALL
    RUN_A=$("$PY" "$here/lib/peers_auc.py" "$test" "$fmt" "$pred")
    RUN_W=$(awk -v a="$RUN_TW" -v b="$RUN_PW" 'BEGIN{printf "%.2f", a + b}')
    RUN_R=$(awk -v a="$tr" -v b="$M_RSS" 'BEGIN{printf "%.1f", (a > b ? a : b) / 1024}')
}

# tool_line SET TOOL EXTRA WALLS... : the tool's line from its runs (median
# wall, every run's wall listed) and W_<tool>, A_<tool>, R_<tool> (median
# wall, the last run's AUC, the largest peak RSS seen).
tool_line() {
    local set=$1 t=$2 extra=$3
    shift 3
    printf -v "W_$t" '%s' "$(median "$@")"
    printf -v "A_$t" '%s' "$RUN_A"
    local w=W_$t r=R_$t
    echo "bench peers set=$set tool=$t wall_s=${!w} train_s=$RUN_TW predict_s=$RUN_PW rss_mb=${!r}" \
        "test_auc=$RUN_A runs=$#" "walls_s=$(IFS=,; echo "$*")$extra"
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
maxf() { awk -v a="$1" -v b="$2" 'BEGIN{ print (a > b ? a : b) }'; }

tovw() { # LIBSVM -> VW text, labels -1/1, one namespace; blank and comment lines dropped
    awk '{ sub(/#.*/, "") } NF { printf "%s |f", ($1 > 0 ? "1" : "-1");
           for (i = 2; i <= NF; i++) printf " %s", $i; printf "\n" }' "$1" >"$2"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.3f", a / b; else print "null" }'; }
rows() { grep -c '[^[:space:]]' "$1"; }

compare() { # SET TRAIN TEST [VW ARGS OF THIS SET]
    local set=$1 train=$2 test=$3 set_vw=${4:-} d=$tmp/$1 t0 t1 conv i
    mkdir -p "$d"
    local fsgd_train=("$FSGD" train --data "$train" --test "$test" --out "$d/fsgd.model" --quiet ${FSGD_ARGS[@]+"${FSGD_ARGS[@]}"})
    local fsgd_predict=("$FSGD" predict --model "$d/fsgd.model" --data "$test" --out "$d/fsgd.pred" --quiet)
    train_cmd=(liblinear-train -q -s 0 -B 1 "$train" "$d/ll.model")
    predict_cmd=(liblinear-predict -b 1 "$test" "$d/ll.model" "$d/ll.pred")
    tool_once "$set" liblinear "$test" liblinear "$d/ll.pred"
    R_liblinear=$RUN_R
    tool_line "$set" liblinear "" "$RUN_W"

    t0=$(date +%s.%N)
    tovw "$train" "$d/train.vw"
    tovw "$test" "$d/test.vw"
    t1=$(date +%s.%N)
    conv=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
    local vw_train=("$VENV/bin/python" "$here/lib/peers_vw.py" "-d $d/train.vw --loss_function logistic -f $d/vw.model $set_vw $VW_ARGS")
    local vw_predict=("$VENV/bin/python" "$here/lib/peers_vw.py" "-d $d/test.vw -t -i $d/vw.model -p $d/vw.pred")
    # fsgd and VW alternate, the first of a round swapped every round: a
    # process right after the other one's exit can pay for pages the other
    # just gave back (see README, "Where the wall time of fsgd train goes")
    local fw=() vw=() fa va
    R_fsgd=0 R_vw=0
    for ((i = 0; i < REPEATS; i++)); do
        for t in $( ((i % 2 == 0)) && echo "fsgd vw" || echo "vw fsgd"); do
            if [ "$t" = fsgd ]; then
                train_cmd=("${fsgd_train[@]}") predict_cmd=("${fsgd_predict[@]}")
                tool_once "$set" fsgd "$test" score "$d/fsgd.pred"
                fw+=("$RUN_W") fa=$RUN_A R_fsgd=$(maxf "$R_fsgd" "$RUN_R") fsgd_tw=$RUN_TW fsgd_pw=$RUN_PW
            else
                train_cmd=("${vw_train[@]}") predict_cmd=("${vw_predict[@]}")
                tool_once "$set" vw "$test" score "$d/vw.pred"
                vw+=("$RUN_W") va=$RUN_A R_vw=$(maxf "$R_vw" "$RUN_R") vw_tw=$RUN_TW vw_pw=$RUN_PW
            fi
        done
    done
    RUN_A=$fa RUN_TW=$fsgd_tw RUN_PW=$fsgd_pw
    tool_line "$set" fsgd "" "${fw[@]}"
    RUN_A=$va RUN_TW=$vw_tw RUN_PW=$vw_pw
    tool_line "$set" vw " convert_s=$conv" "${vw[@]}"

    echo "bench peers set=$set train_rows=$(rows "$train") test_rows=$(rows "$test")" \
        "fsgd_over_liblinear=$(ratio "$W_fsgd" "$W_liblinear") fsgd_over_vw=$(ratio "$W_fsgd" "$W_vw")" \
        "auc_fsgd=$A_fsgd auc_liblinear=$A_liblinear auc_vw=$A_vw" \
        "rss_mb_fsgd=$R_fsgd rss_mb_liblinear=$R_liblinear rss_mb_vw=$R_vw fsgd_rss_over_vw=$(ratio "$R_fsgd" "$R_vw")"
    rm -rf "$d"
}

# split_rows FILE K OUT_TRAIN OUT_TEST: every K-th row to test, the others to
# train. Deterministic, and unlike "the last rows" it keeps both classes: w8a
# is sorted by label (all its positives are in the first 5000 rows). Blank
# lines are dropped first (w8a ends with one).
split_rows() {
    awk -v k="$2" -v tr="$3" -v te="$4" '/[^[:space:]]/ { print > (++n % k ? tr : te) }' "$1"
}

compare a9a "$DATA/a9a" "$DATA/a9a.t"
split_rows "$DATA/w8a" 5 "$tmp/w8a.train" "$tmp/w8a.test"
compare w8a "$tmp/w8a.train" "$tmp/w8a.test"
rm -f "$tmp/w8a.train" "$tmp/w8a.test"
compare ijcnn1 "$DATA/ijcnn1" "$DATA/ijcnn1.t"
compare reuters "$DATA/reuters" "$DATA/reuters.t"
"$FSGD" gen --rows "$CTR_ROWS" --dim 16777216 --nnz 40 --seed 1 --quiet --out "$tmp/ctr.svm"
split_rows "$tmp/ctr.svm" 10 "$tmp/ctr.train" "$tmp/ctr.test"
rm -f "$tmp/ctr.svm"
compare ctr "$tmp/ctr.train" "$tmp/ctr.test" "$VW_CTR_ARGS"
