#!/usr/bin/env bash
# fsgd against Vowpal Wabbit 9.11 (build/venv, scripts/install-peers.sh) on
# the same VW text files in one run, linear and with feature crosses:
#   a9a        one namespace (a), LIBSVM indices as feature names; -q aa
#   planted    8 fielded categorical namespaces whose labels depend on the
#              planted crosses (a,b) and (c,d) (tests/bench/lib/planted_crosses.py,
#              50k train / 10k test rows); -q ab -q cd
#   criteo     fsgd gen --format criteo (50k / 10k rows) as VW text, as
#              Criteo's Kaggle VW users wrote it: the 13 integer columns as
#              log-squared buckets in namespace I, categorical column k in
#              namespace k (a..z); -q ab -q ac -q bc
# VW: --loss_function logistic --passes 5 -c -k (its holdout stops the
# passes), -b 18 (a9a, planted) or 20 (criteo), -l 0.1 on a9a (the rate the
# issue measured there); then -t -i MODEL -p PRED. fsgd: fsgd train --format
# vw --bits B with its defaults (l2, lr, epochs auto: early stopping; lr auto
# scaled by the rows' share of features among features and crosses); then
# fsgd predict. Each program reads and parses the files itself; the VW
# processes start Python and import vowpalwabbit (the package has no vw
# binary: tests/bench/lib/peers_vw.py, ~0.1 s and ~30 MB of each figure).
# One AUC/logloss code for both (tests/bench/lib/vw_compare_metrics.py).
# seconds = train + predict process wall time; rss_mb = the larger peak RSS.
# One run each (noisy on a loaded machine); the whole script takes about a
# minute. Lines:
#   bench vw_compare set=S cross=C fsgd_auc= fsgd_logloss= fsgd_s= fsgd_rss_mb=
#     vw_auc= vw_logloss= vw_s= vw_rss_mb= auc_minus_vw= fsgd_over_vw_s=
#   bench vw_compare planted cross_gain_fsgd= cross_gain_vw= (crossed AUC - linear AUC)
# Exits 1 when, on the planted set, fsgd's crossed model does not beat its
# linear one by 0.05 AUC (the crosses are the point of the set); 77 without VW.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FSGD=${FSGD:-bin/fsgd}
BUILD=${BUILD:-build}
VENV=${VENV:-$BUILD/venv}
DATA=${FSGD_DATA:-$("$here/../../scripts/unpack-data.sh" "$BUILD/datasets")}
PYS=/usr/bin/python3
if ! [ -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import vowpalwabbit' 2>/dev/null; then
    echo "skip: no vowpalwabbit in $VENV (scripts/install-peers.sh)"; exit 77
fi
"$PYS" -c 'import sklearn, numpy' 2>/dev/null || { echo "skip: no scikit-learn/numpy for $PYS"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# measure NAME cmd...: M_S (wall s) and M_KB (peak RSS KiB) of cmd
measure() {
    local name=$1; shift
    /usr/bin/time -f "%e %M" -o "$tmp/$name.time" "$@" > "$tmp/$name.log" 2>&1 ||
        { echo "bench vw_compare: $name failed:"; tail -5 "$tmp/$name.log"; exit 1; }
    read -r M_S M_KB < "$tmp/$name.time"
}

# calc EXPR [FORMAT]: the value of an arithmetic expression (default %.2f)
calc() { awk "BEGIN { printf \"${2:-%.2f}\", $1 }"; }

# run SET CROSS BITS 'FSGD ARGS' 'VW ARGS': both programs, one line
run() {
    local set=$1 cross=$2 bits=$3 fargs=$4 vargs=$5 d=$tmp/$1
    # shellcheck disable=SC2086
    measure f_train "$FSGD" train --data "$d/train.vw" --test "$d/test.vw" --format vw --bits "$bits" $cross $fargs \
        --quiet --out "$d/f.fsgd"
    local fs=$M_S fk=$M_KB
    measure f_pred "$FSGD" predict --model "$d/f.fsgd" --data "$d/test.vw" --quiet --out "$d/f.pred"
    fs=$(calc "$fs + $M_S"); [ "$M_KB" -gt "$fk" ] && fk=$M_KB
    rm -f "$d/train.vw.cache"
    measure v_train "$VENV/bin/python" "$here/lib/peers_vw.py" \
        "-d $d/train.vw --loss_function logistic -b $bits --passes 5 -c -k $cross $vargs -f $d/v.model"
    local vs=$M_S vk=$M_KB
    measure v_pred "$VENV/bin/python" "$here/lib/peers_vw.py" "-d $d/test.vw -t -i $d/v.model -p $d/v.pred"
    vs=$(calc "$vs + $M_S"); [ "$M_KB" -gt "$vk" ] && vk=$M_KB
    read -r fa fl < <("$PYS" "$here/lib/vw_compare_metrics.py" "$d/test.vw" "$d/f.pred")
    read -r va vl < <("$PYS" "$here/lib/vw_compare_metrics.py" "$d/test.vw" "$d/v.pred")
    local c=${cross:-none}
    echo "bench vw_compare set=$set cross=${c// /} fsgd_auc=$fa fsgd_logloss=$fl fsgd_s=$fs fsgd_rss_mb=$((fk / 1024))" \
        "vw_auc=$va vw_logloss=$vl vw_s=$vs vw_rss_mb=$((vk / 1024))" \
        "auc_minus_vw=$(calc "$fa - $va" %.4f) fsgd_over_vw_s=$(calc "$fs / $vs" %.3f)" \
        "fsgd_args='${fargs:-defaults}' vw_args='$vargs'"
    LAST_F=$fa LAST_V=$va
}

# a9a, one namespace
mkdir -p "$tmp/a9a"
tovw='{ printf "%s |a", ($1 > 0 ? "1" : "-1"); for (i = 2; i <= NF; i++) { split($i, p, ":"); printf " f%s", p[1] } print "" }'
awk "$tovw" "$DATA/a9a" > "$tmp/a9a/train.vw"
awk "$tovw" "$DATA/a9a.t" > "$tmp/a9a/test.vw"
run a9a "" 18 "" "-l 0.1"
run a9a "-q aa" 18 "" "-l 0.1"

# planted pairwise crosses
mkdir -p "$tmp/planted"
"$PYS" "$here/lib/planted_crosses.py" 60000 5 "$tmp/planted/all.vw"
head -n 50000 "$tmp/planted/all.vw" > "$tmp/planted/train.vw"
tail -n 10000 "$tmp/planted/all.vw" > "$tmp/planted/test.vw"
run planted "" 18 "" ""
lin_f=$LAST_F lin_v=$LAST_V
run planted "-q ab -q cd" 18 "" ""
gain_f=$(calc "$LAST_F - $lin_f" %.4f) gain_v=$(calc "$LAST_V - $lin_v" %.4f)
echo "bench vw_compare planted cross_gain_fsgd=$gain_f cross_gain_vw=$gain_v"

# Criteo-shaped, a namespace a column
mkdir -p "$tmp/criteo"
"$FSGD" gen --format criteo --rows 60000 --seed 9 --quiet --out "$tmp/criteo/all.tsv"
awk 'BEGIN { FS = "\t"; split("abcdefghijklmnopqrstuvwxyz", L, "") }
    { printf "%s |I", ($1 > 0 ? "1" : "-1")
      for (k = 2; k <= 14; k++) if ($k != "") { v = $k + 0; printf " i%d_%d", k - 1, (v > 2 ? int(log(v) ^ 2) : v) }
      for (k = 15; k <= 40; k++) { printf " |%s", L[k - 14]; if ($k != "") printf " %s", $k }
      print "" }' "$tmp/criteo/all.tsv" > "$tmp/criteo/all.vw"
head -n 50000 "$tmp/criteo/all.vw" > "$tmp/criteo/train.vw"
tail -n 10000 "$tmp/criteo/all.vw" > "$tmp/criteo/test.vw"
run criteo "" 20 "" ""
run criteo "-q ab -q ac -q bc" 20 "" ""

if [ "$(calc "$gain_f < 0.05" %d)" = 1 ]; then
    echo "bench vw_compare: FAIL: on the planted set fsgd's crosses gained $gain_f AUC (< 0.05)"
    exit 1
fi
