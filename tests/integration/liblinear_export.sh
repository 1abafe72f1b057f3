#!/usr/bin/env bash
# Models trained by fsgd (logistic, svm, linear) exported with
# `fsgd export --format liblinear` give, under liblinear-predict on a9a.t,
# exactly the labels `fsgd predict` gives (margin > 0 -> +1); for logistic the
# -b 1 probabilities agree within 1e-6 (liblinear prints 6 digits), for linear
# the predicted values within 1e-9 relative. The accuracy liblinear-predict
# reports equals the one fsgd predict reports.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
. "$(dirname "$0")/lib/skip.bash"
DATA=$(data_dir)
needs_data a9a a9a.t
needs_cmd liblinear-predict
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
test_file=$DATA/a9a.t
fail=0
for kind in logistic svm linear; do
    m=$tmp/$kind
    "$FSGD" train --data "$DATA/a9a" --test "$test_file" --model "$kind" --epochs 3 --quiet --out "$m.fsgd" >/dev/null
    "$FSGD" export --model "$m.fsgd" --format liblinear --out "$m.txt"
    head -1 "$m.txt" | grep -q '^solver_type ' || { echo "FAIL $kind: export has no solver_type line"; fail=1; }
    "$FSGD" predict --model "$m.fsgd" --data "$test_file" --out "$m.margin" 2>"$m.metrics"
    if [ "$kind" = logistic ]; then
        "$FSGD" predict --model "$m.fsgd" --data "$test_file" --out "$m.proba" --proba 2>/dev/null
        liblinear-predict -b 1 "$test_file" "$m.txt" "$m.ll" >"$m.llout"
    else
        liblinear-predict "$test_file" "$m.txt" "$m.ll" >"$m.llout"
    fi
    # compare line by line; liblinear's -b 1 output starts with a "labels" header
    result=$(awk -v kind="$kind" -v probafile="$m.proba" '
        FILENAME == ARGV[1] { margin[++n] = $1; next }
        /^labels/ { for (i = 2; i <= NF; i++) if ($i == "1") pcol = i; next }
        {
            r++
            if (kind == "linear") {
                d = margin[r] - $1; if (d < 0) d = -d
                tol = 1e-9 * (1 + ($1 < 0 ? -$1 : $1))
                if (d > tol) bad++
                next
            }
            ours = margin[r] > 0 ? 1 : -1
            if (ours != $1) bad++
            pos += ours > 0
            if (kind == "logistic") {
                getline p < probafile
                d = p - $pcol; if (d < 0) d = -d
                if (d > worst) worst = d
            }
        }
        END { printf "%d %d %d %d %.3g\n", n, r, bad + 0, pos + 0, worst + 0 }' "$m.margin" "$m.ll")
    read -r n r bad pos worst <<<"$result"
    ok=ok
    [ "$n" -eq 16281 ] && [ "$r" -eq "$n" ] && [ "$bad" -eq 0 ] || ok=FAIL
    if [ "$kind" != linear ]; then
        # both labels predicted (the sign convention is really exercised)
        [ "$pos" -gt 0 ] && [ "$pos" -lt "$n" ] || ok=FAIL
        # the accuracy both tools report
        ll_acc=$(sed -nE 's/^Accuracy = [0-9.]+% \(([0-9]+)\/([0-9]+)\).*/\1 \2/p' "$m.llout")
        our_acc=$(sed -nE 's/.* accuracy ([0-9.]+)$/\1/p' "$m.metrics")
        same=$(awk -v a="$our_acc" -v ll="$ll_acc" 'BEGIN{split(ll, x, " "); d = a - x[1] / x[2]; print (d < 5e-7 && d > -5e-7) ? 1 : 0}')
        [ "$same" = 1 ] || ok=FAIL
        echo "$ok $kind: $r rows, $bad label differences, $pos predicted +1; accuracy fsgd $our_acc liblinear $ll_acc"
    else
        echo "$ok $kind: $r rows, $bad values differ by more than 1e-9 relative"
    fi
    if [ "$kind" = logistic ]; then
        awk -v w="$worst" 'BEGIN{exit !(w <= 1e-6)}' || ok=FAIL
        echo "$ok $kind: largest probability difference $worst"
    fi
    [ "$ok" = ok ] || fail=1
done
exit $fail
