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
# Fairness of parsing: every timed process reads the data from disk in the
# tool's own input format and parses it itself (fsgd and LIBLINEAR: LIBSVM;
# VW: its text format). The LIBSVM -> VW text conversion (awk) runs before, not
# timed, since it would be a second parse only VW pays; its time is printed as
# convert_s. The VW processes start Python and import vowpalwabbit (about 0.1 s
# and 30 MB) because the package has no vw binary (tests/bench/lib/peers_vw.py).
#
# wall_s = train + predict process wall seconds, rss_mb = the larger peak RSS of
# the two (/usr/bin/time, else Python's resource module). One AUC code for all
# three (tests/bench/lib/peers_auc.py, scikit-learn). Lines:
#   bench peers set=S tool=T wall_s=.. train_s=.. predict_s=.. rss_mb=.. test_auc=..
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
read -r -a FSGD_ARGS <<<"${PEERS_FSGD_ARGS:-}"

die() { echo "peers_compare: $*" >&2; exit 1; }
[ -x "$FSGD" ] || die "fsgd binary $FSGD not found (make)"
command -v liblinear-train >/dev/null && command -v liblinear-predict >/dev/null ||
    die "liblinear-train/liblinear-predict not found (apt-get install liblinear-tools)"
[ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import vowpalwabbit' 2>/dev/null ||
    die "Vowpal Wabbit venv $VENV missing or without vowpalwabbit (run scripts/install-peers.sh)"
"$PY" -c 'import sklearn' 2>/dev/null || die "$PY has no scikit-learn (apt-get install python3-sklearn)"
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

# tool SET TOOL TEST FORMAT PRED: measures $train_cmd and $predict_cmd (arrays)
# and prints the tool's line; leaves its wall seconds, AUC and peak RSS (MB) in
# W_<tool>, A_<tool>, R_<tool>.
tool() {
    local set=$1 t=$2 test=$3 fmt=$4 pred=$5 extra=${6:-} tw tr pw pr auc
    measure "$set.$t.train" "${train_cmd[@]}"
    tw=$M_WALL tr=$M_RSS
    measure "$set.$t.predict" "${predict_cmd[@]}"
    pw=$M_WALL pr=$M_RSS
    auc=$("$PY" "$here/lib/peers_auc.py" "$test" "$fmt" "$pred")
    printf -v "W_$t" '%s' "$(awk -v a="$tw" -v b="$pw" 'BEGIN{printf "%.2f", a + b}')"
    printf -v "A_$t" '%s' "$auc"
    printf -v "R_$t" '%s' "$(awk -v a="$tr" -v b="$pr" 'BEGIN{printf "%.1f", (a > b ? a : b) / 1024}')"
    local w=W_$t r=R_$t
    echo "bench peers set=$set tool=$t wall_s=${!w} train_s=$tw predict_s=$pw rss_mb=${!r}" \
        "test_auc=$auc$extra"
}

tovw() { # LIBSVM -> VW text, labels -1/1, one namespace; blank and comment lines dropped
    awk '{ sub(/#.*/, "") } NF { printf "%s |f", ($1 > 0 ? "1" : "-1");
           for (i = 2; i <= NF; i++) printf " %s", $i; printf "\n" }' "$1" >"$2"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.3f", a / b; else print "null" }'; }
rows() { grep -c '[^[:space:]]' "$1"; }

compare() { # SET TRAIN TEST
    local set=$1 train=$2 test=$3 d=$tmp/$1 t0 t1 conv
    mkdir -p "$d"
    train_cmd=("$FSGD" train --data "$train" --test "$test" --out "$d/fsgd.model" --quiet ${FSGD_ARGS[@]+"${FSGD_ARGS[@]}"})
    predict_cmd=("$FSGD" predict --model "$d/fsgd.model" --data "$test" --out "$d/fsgd.pred" --quiet)
    tool "$set" fsgd "$test" score "$d/fsgd.pred"

    train_cmd=(liblinear-train -q -s 0 -B 1 "$train" "$d/ll.model")
    predict_cmd=(liblinear-predict -b 1 "$test" "$d/ll.model" "$d/ll.pred")
    tool "$set" liblinear "$test" liblinear "$d/ll.pred"

    t0=$(date +%s.%N)
    tovw "$train" "$d/train.vw"
    tovw "$test" "$d/test.vw"
    t1=$(date +%s.%N)
    conv=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
    train_cmd=("$VENV/bin/python" "$here/lib/peers_vw.py" "-d $d/train.vw --loss_function logistic -f $d/vw.model $VW_ARGS")
    predict_cmd=("$VENV/bin/python" "$here/lib/peers_vw.py" "-d $d/test.vw -t -i $d/vw.model -p $d/vw.pred")
    tool "$set" vw "$test" score "$d/vw.pred" " convert_s=$conv"

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
compare ctr "$tmp/ctr.train" "$tmp/ctr.test"
