#!/usr/bin/env bash
# fsgd plot without a cluster, on small metrics files written here: bad
# JSON names file:line:column (exit 3); a file that is not a run's metrics
# says which field is missing; a missing gnuplot is said plainly (exit 2)
# and leaves no picture; options are checked; a run without a trace (older
# metrics files) still draws, from its epoch ends; --keep-script leaves a
# script that gnuplot reruns; an existing picture is replaced only whole.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
FSGD=$(cd "$(dirname "$FSGD")" && pwd)/$(basename "$FSGD")
. "$(dirname "$0")/lib/skip.bash"
IMG=(python3 "$(dirname "$0")/lib/imgcheck.py")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() { # STATUS PATTERN CMD...
    local want=$1 pat=$2 rc=0
    shift 2
    "$@" >"$tmp/out.txt" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || fail "$* exited $rc, expected $want: $(cat "$tmp/out.txt")"
    grep -q -- "$pat" "$tmp/out.txt" || fail "$*: no '$pat' in: $(cat "$tmp/out.txt")"
}
run_json() { # CODEC WITH_TRACE
    local trace=""
    [ "$2" = 1 ] && trace='"trace": {"points": 3, "seconds_from_step1": [0, 1.5, 3], "step": [1, 50, 100],
        "rows": [256, 12800, 25600], "loss": [0.69, 0.4, null], "bytes_up": [0, 50000, 100000],
        "bytes_down": [0, 40000, 80000]},'
    cat <<JSON
{"mode": "distributed", "job": "demo", "codec": "$1", "steps": 100, "empty_steps": 0,
 "per_epoch": [{"epoch": 1, "seconds": 2.0, "seconds_from_step1": 1.5, "train_loss": 0.41, "rows": 100,
                "test_auc": 0.88, "test_logloss": 0.35},
               {"epoch": 2, "seconds": 3.5, "seconds_from_step1": 3.0, "train_loss": 0.35, "rows": 100,
                "test_auc": -1, "test_logloss": -1}],
 "per_step_seconds": {"gradient": 0.001, "encode": 0.0002, "decode": 0.0001, "comm_wait": 0.005, "update": 0.0003},
 $trace
 "workers": {"live": 2, "dropped": 1}}
JSON
}
run_json none 1 >"$tmp/a.json"
run_json "fastsgd:b=1.1" 0 >"$tmp/b.json"
printf '{"codec": "none",\n  "per_epoch": [1, 2,]\n}\n' >"$tmp/bad.json"
echo '{"codec": "none"}' >"$tmp/partial.json"
echo '[1, 2]' >"$tmp/array.json"

expect 3 "bad.json:2:.*not valid JSON" "$FSGD" plot "$tmp/bad.json" --out "$tmp/x.png"
expect 3 '"per_epoch" is missing' "$FSGD" plot "$tmp/partial.json" --out "$tmp/x.png"
expect 3 "expected a JSON object" "$FSGD" plot "$tmp/array.json" --out "$tmp/x.png"
expect 74 "nope.json: No such file" "$FSGD" plot "$tmp/nope.json" --out "$tmp/x.png"
expect 2 "extension: .png or .svg" "$FSGD" plot "$tmp/a.json" --out "$tmp/x.jpg"
expect 2 "is required" "$FSGD" plot "$tmp/a.json"
expect 2 "no RUN.json" "$FSGD" plot --out "$tmp/x.png"
expect 2 "size expects WxH" "$FSGD" plot "$tmp/a.json" --out "$tmp/x.png" --size 640
expect 2 "unknown option" "$FSGD" plot "$tmp/a.json" --out "$tmp/x.png" --colour red
mkdir "$tmp/dir.png"
expect 2 "directory" "$FSGD" plot "$tmp/a.json" --out "$tmp/dir.png"
mkdir "$tmp/empty-path"
expect 2 "gnuplot is not installed" env PATH="$tmp/empty-path" "$FSGD" plot "$tmp/a.json" --out "$tmp/x.png"
[ ! -e "$tmp/x.png" ] || fail "a picture was left without gnuplot"
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary files left: $(ls "$tmp")"

needs_cmd gnuplot
"$FSGD" plot "$tmp/a.json" "$tmp/b.json" --out "$tmp/ab.svg" --size 640x480 --keep-script "$tmp/ks"
"${IMG[@]}" "$tmp/ab.svg" 640 480
grep -q "fastsgd:b=1.1, 3 workers" "$tmp/ab.svg" || fail "the run without a trace is not in the picture"
grep -q "none, 3 workers" "$tmp/ab.svg" || fail "the run with a trace is not in the picture"
(cd "$tmp/ks" && gnuplot plot.gp) || fail "the kept script does not run"
"${IMG[@]}" "$tmp/ks/plot.svg" 640 480
# the same run twice: told apart by file name
cp "$tmp/a.json" "$tmp/a2.json"
echo old >"$tmp/ab.png"
"$FSGD" plot "$tmp/a.json" "$tmp/a2.json" --out "$tmp/ab.png" --size 320x240
"${IMG[@]}" "$tmp/ab.png" 320 240
"$FSGD" plot "$tmp/a.json" "$tmp/a2.json" --out "$tmp/ab2.svg" --size 320x240
grep -q "none, 3 workers (a2.json)" "$tmp/ab2.svg" || fail "two runs with one label are not told apart"
echo "plot: errors and pictures as expected"
