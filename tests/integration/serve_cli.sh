#!/usr/bin/env bash
# fsgd serve end to end on a free loopback port: every endpoint and error
# class; scores equal fsgd predict's bit for bit (LIBSVM, JSON, Criteo TSV
# and CSV through the model's hashing and crosses, hashed LIBSVM, VW text with its
# tags, margins and probabilities); a model file
# replaced by rename under a loop of requests with 0 failures and each
# answer's scores those of the version it names; truncated, forged, garbage
# and mismatched replacements refused while the old version keeps serving;
# --max-conns and --timeout; SIGTERM answers the request in flight, exits 0
# and leaves no process; a model's metrics JSON on /model and --min-auc
# refusing versions below it.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
here=$(cd "$(dirname "$0")" && pwd)
command -v curl >/dev/null || { echo "skipped: curl not installed"; exit 77; }
PY=/usr/bin/python3
[ -x $PY ] || { echo "skipped: python3 not installed"; exit 77; }
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
# a script stopped by a signal still runs its EXIT trap (and stops what it started)
trap 'exit 130' INT
trap 'exit 143' TERM
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/serve*.log; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
    exit 1
}

# start_server LOG ARGS...: fsgd serve on a free port; sets pid and port.
start_server() {
    local log=$1
    shift
    # the log exists before the loop reads it (sed on a missing file exits 2: set -e)
    : > "$log"
    "$FSGD" serve --port 0 "$@" 2> "$log" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 300); do
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log" 2>/dev/null)
        [ -n "$port" ] && return 0
        kill -0 "$pid" 2>/dev/null || fail "fsgd serve $* exited at start: $(cat "$log")"
        sleep 0.05
    done
    fail "fsgd serve $* did not say it was listening within 15 s"
}

# stop_server: SIGTERM, exit 0, no process left.
stop_server() {
    kill -TERM "$pid"
    local rc=0
    wait "$pid" || rc=$?
    pids=() # reaped: its pid is no longer ours to kill
    [ "$rc" -eq 0 ] || fail "fsgd serve exited $rc on SIGTERM"
    ! kill -0 "$pid" 2>/dev/null || fail "fsgd serve still running after SIGTERM"
}

# Two models of one shape (different weights), one of another dimension.
"$FSGD" gen --rows 3000 --dim 2000 --nnz 12 --real --seed 7 > "$tmp/d.svm"
head -n 200 "$tmp/d.svm" > "$tmp/rows.svm"
"$FSGD" train --data "$tmp/d.svm" --dim 2000 --epochs 1 --seed 1 --quiet --out "$tmp/a.model" >/dev/null
"$FSGD" train --data "$tmp/d.svm" --dim 2000 --epochs 3 --seed 2 --quiet --out "$tmp/b.model" >/dev/null
"$FSGD" train --data "$tmp/d.svm" --dim 3000 --epochs 1 --quiet --out "$tmp/wide.model" >/dev/null
cmp -s "$tmp/a.model" "$tmp/b.model" && fail "a.model and b.model are the same"
# A hashed (Criteo TSV) model.
"$FSGD" gen --format criteo --rows 2000 --seed 5 --quiet --out "$tmp/c.tsv"
head -n 50 "$tmp/c.tsv" > "$tmp/rows.tsv"
"$FSGD" train --data "$tmp/c.tsv" --format criteo --hash-bits 14 --epochs 1 --quiet --out "$tmp/ctr.model" >/dev/null
# A linear (squared loss) model: margins.
"$FSGD" train --data "$tmp/d.svm" --model linear --epochs 1 --quiet --out "$tmp/lin.model" >/dev/null

for m in a b; do
    "$FSGD" predict --model "$tmp/$m.model" --data "$tmp/rows.svm" --proba --quiet > "$tmp/$m.proba"
done
"$FSGD" predict --model "$tmp/a.model" --data "$tmp/rows.svm" --quiet > "$tmp/a.margin"
"$FSGD" predict --model "$tmp/ctr.model" --data "$tmp/rows.tsv" --proba --quiet > "$tmp/ctr.proba"
"$FSGD" predict --model "$tmp/lin.model" --data "$tmp/rows.svm" --quiet > "$tmp/lin.margin"

cp "$tmp/a.model" "$tmp/live.model"
start_server "$tmp/serve.log" --model "$tmp/live.model" --model "ctr=$tmp/ctr.model" --model "lin=$tmp/lin.model" \
    --threads 2 --poll-ms 50 --max-body 100000
url=http://127.0.0.1:$port

# post PATH FILE [CURL ARGS]: the body of the answer; status in $tmp/status.
post() {
    local path=$1 file=$2
    shift 2
    # A 413 may close the connection while curl still sends: its status counts.
    curl -sS -o "$tmp/body" -w '%{http_code}' -D "$tmp/headers" --data-binary @"$file" "$@" "$url$path" \
        > "$tmp/status" 2> "$tmp/curl.err" || true
    cat "$tmp/body"
}
status() { cat "$tmp/status"; }

# 1. Scores: fsgd predict's, bit for bit (the same %.17g text).
post /score "$tmp/rows.svm" > "$tmp/s.txt"
[ "$(status)" = 200 ] || fail "POST /score: $(status) $(cat "$tmp/s.txt")"
cmp -s "$tmp/s.txt" "$tmp/a.proba" || fail "LIBSVM scores differ from fsgd predict --proba: $(diff "$tmp/s.txt" "$tmp/a.proba" | head -4)"
grep -qi '^X-Fsgd-Model-Version: 1' "$tmp/headers" || fail "no version header: $(cat "$tmp/headers")"
grep -qi '^X-Fsgd-Model: default' "$tmp/headers" || fail "no model header: $(cat "$tmp/headers")"
post "/score/default?output=margin" "$tmp/rows.svm" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/a.margin" || fail "margins differ from fsgd predict's"
post /score/lin "$tmp/rows.svm" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/lin.margin" || fail "linear model: scores differ from fsgd predict's margins"
post /score/ctr "$tmp/rows.tsv" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/ctr.proba" || fail "Criteo TSV scores differ from fsgd predict's: $(diff "$tmp/s.txt" "$tmp/ctr.proba" | head -4)"
# One row a request: the same scores.
head -n 1 "$tmp/rows.svm" > "$tmp/one.svm"
[ "$(post /score "$tmp/one.svm")" = "$(head -n 1 "$tmp/a.proba")" ] || fail "one-row request: $(cat "$tmp/body")"
# JSON rows: the same scores as the LIBSVM lines they spell.
$PY - "$tmp/rows.svm" "$tmp/rows.json" "$tmp/rows.tsv" "$tmp/rows_tsv.json" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    t = line.split()
    rows.append({"indices": [int(f.split(":")[0]) for f in t[1:]], "values": [float(f.split(":")[1]) for f in t[1:]]})
json.dump({"rows": rows}, open(sys.argv[2], "w"))
# Criteo rows as fields, without the label.
json.dump({"rows": [{"fields": l.rstrip("\n").split("\t")[1:]} for l in open(sys.argv[3])]}, open(sys.argv[4], "w"))
PY
for pair in "/score:rows.json:a.proba" "/score/ctr:rows_tsv.json:ctr.proba"; do
    IFS=: read -r path body want <<< "$pair"
    post "$path" "$tmp/$body" -H 'Content-Type: application/json' > "$tmp/s.json"
    [ "$(status)" = 200 ] || fail "JSON $path: $(status) $(cat "$tmp/s.json")"
    $PY - "$tmp/s.json" "$tmp/$want" <<'PY' || fail "JSON $path: scores differ from fsgd predict's"
import json, sys
got = json.load(open(sys.argv[1]))
want = [float(x) for x in open(sys.argv[2])]
assert got["version"] == 1 and got["scores"] == want, (got["scores"][:3], want[:3])
PY
done

# 2. GET endpoints.
[ "$(curl -sS "$url/healthz")" = ok ] || fail "/healthz"
curl -sS "$url/model" > "$tmp/model.json"
$PY - "$tmp/model.json" <<'PY' || fail "/model: $(cat "$tmp/model.json")"
import json, sys
m = {x["name"]: x for x in json.load(open(sys.argv[1]))["models"]}
assert set(m) == {"default", "ctr", "lin"}, m.keys()
d = m["default"]
assert d["version"] == 1 and d["dim"] == 2000 and d["loss"] == "logistic" and d["hashing"] == "", d
assert m["ctr"]["hashing"].startswith("tsv:label,num*13,cat*26") and m["ctr"]["dim"] == 2**14, m["ctr"]
assert m["lin"]["loss"] == "linear" and m["lin"]["scores"] == "margin", m["lin"]
# when it was loaded (Unix time) and its age; the step of a model without optimizer state
import time
assert time.time() - 3600 < d["loaded_at"] <= time.time() and 0 <= d["age_seconds"] < 3600, d
assert d["step"] == 0 and d["nnz"] > 0 and d["source"].startswith("file "), d
PY
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$url/model/nope")" = 404 ] || fail "/model/nope is not 404"
# The Python call docs/serve.md shows, run as written (its URL made this server's).
printf '1 3:1 17:1\n' > "$tmp/doc.svm"
"$FSGD" predict --model "$tmp/a.model" --data "$tmp/doc.svm" --proba --quiet > "$tmp/doc.proba"
sed -n '/^```python$/,/^```$/p' "$here/../../docs/serve.md" | sed '1d;$d' | sed "s|http://localhost:8080|$url|" > "$tmp/doc.py"
grep -q "requests.post" "$tmp/doc.py" || fail "docs/serve.md has no Python requests call"
if $PY -c 'import requests' 2>/dev/null; then
    $PY "$tmp/doc.py" > "$tmp/doc.out" || fail "the Python call of docs/serve.md: $(cat "$tmp/doc.out")"
    [ "$(cat "$tmp/doc.out")" = "1 [$($PY -c 'import sys; print(repr(float(open(sys.argv[1]).read())))' "$tmp/doc.proba")]" ] ||
        fail "the Python call of docs/serve.md printed '$(cat "$tmp/doc.out")', fsgd predict says $(cat "$tmp/doc.proba")"
else # the same request, so that the counts below hold
    echo "the Python call of docs/serve.md not run: python3-requests not installed"
    post /score <(echo '{"rows": [{"indices": [3, 17]}]}') -H 'Content-Type: application/json' > /dev/null
fi

# 3. Errors: each class answered, named, counted; the server keeps going.
printf '1 1:0.5 2:1\n1 3:x 5:1\n' > "$tmp/bad.svm"
post /score "$tmp/bad.svm" > "$tmp/e.txt"
[ "$(status)" = 400 ] && grep -q "body:2:5: .*'x'" "$tmp/e.txt" || fail "malformed row: $(status) $(cat "$tmp/e.txt")"
printf '1 5:1 3:1\n' > "$tmp/bad2.svm"
post /score "$tmp/bad2.svm" > "$tmp/e.txt"
[ "$(status)" = 400 ] && grep -q "body:1:" "$tmp/e.txt" || fail "unsorted row: $(status) $(cat "$tmp/e.txt")"
printf '1\t2\tabc%s\n' "$(printf '\t%.0s' $(seq 1 37))" > "$tmp/bad.tsv"
post /score/ctr "$tmp/bad.tsv" > "$tmp/e.txt"
[ "$(status)" = 400 ] && grep -q "body:1:.*column 3 (num)" "$tmp/e.txt" || fail "bad TSV: $(status) $(cat "$tmp/e.txt")"
echo '{"rows":[{"indices":[1,2]},{"indices":[0]}]}' > "$tmp/bad.json"
post /score "$tmp/bad.json" -H 'Content-Type: application/json' > "$tmp/e.txt"
[ "$(status)" = 400 ] && grep -q "rows\[1\].indices\[0\]" "$tmp/e.txt" || fail "bad JSON row: $(status) $(cat "$tmp/e.txt")"
echo '{"rows": [' > "$tmp/bad2.json"
post /score "$tmp/bad2.json" -H 'Content-Type: application/json' > "$tmp/e.txt"
[ "$(status)" = 400 ] && grep -q "not JSON" "$tmp/e.txt" || fail "broken JSON: $(status) $(cat "$tmp/e.txt")"
: > "$tmp/empty"
post /score "$tmp/empty" > "$tmp/e.txt"
[ "$(status)" = 400 ] && grep -q "no rows" "$tmp/e.txt" || fail "empty body: $(status) $(cat "$tmp/e.txt")"
head -c 150000 /dev/zero | tr '\0' 'a' > "$tmp/big"
post /score "$tmp/big" > "$tmp/e.txt"
[ "$(status)" = 413 ] || fail "body over --max-body: $(status) $(cat "$tmp/e.txt")"
post /score "$tmp/big" -H 'Transfer-Encoding: chunked' > "$tmp/e.txt"
[ "$(status)" = 413 ] || fail "chunked body over --max-body: $(status) $(cat "$tmp/e.txt")"
post /score/nope "$tmp/rows.svm" > "$tmp/e.txt"
[ "$(status)" = 404 ] && grep -q "ctr" "$tmp/e.txt" || fail "unknown model: $(status) $(cat "$tmp/e.txt")"
post /nowhere "$tmp/rows.svm" > /dev/null
[ "$(status)" = 404 ] || fail "unknown path: $(status)"
[ "$(curl -sS -o /dev/null -w '%{http_code}' "$url/score")" = 405 ] || fail "GET /score is not 405"
code=$(curl -sS -o /dev/null -w '%{http_code}' -F "x=@$tmp/rows.svm" "$url/score")
[ "$code" = 415 ] || fail "multipart body: $code"
post "/score?output=odds" "$tmp/rows.svm" > /dev/null
[ "$(status)" = 400 ] || fail "output=odds: $(status)"
post "/score/lin?output=proba" "$tmp/rows.svm" > /dev/null
[ "$(status)" = 400 ] || fail "output=proba of a linear model: $(status)"
post /score "$tmp/rows.svm" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/a.proba" || fail "scores changed after the errors"

# 4. /metrics: valid Prometheus text with what happened so far.
curl -sS "$url/metrics" > "$tmp/metrics.txt"
$PY "$here/lib/promcheck.py" check "$tmp/metrics.txt" --prefix fsgd_serve_ > "$tmp/metrics.json" || fail "/metrics is not valid exposition"
$PY - "$tmp/metrics.txt" <<'PY' || fail "/metrics counts: $(grep -v '^#' "$tmp/metrics.txt")"
import re, sys
v = {}
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        k, x = line.rsplit(" ", 1)
        v[k] = float(x)
assert v['fsgd_serve_errors_total{kind="bad_request"}'] == 8, v
assert v['fsgd_serve_errors_total{kind="too_large"}'] == 2, v
assert v['fsgd_serve_errors_total{kind="not_found"}'] == 3, v
assert v['fsgd_serve_errors_total{kind="method_not_allowed"}'] == 1, v
assert v['fsgd_serve_errors_total{kind="unsupported_media"}'] == 1, v
assert v['fsgd_serve_requests_total{model="default"}'] == 6, v
assert v['fsgd_serve_rows_total{model="default"}'] == 802, v
assert v['fsgd_serve_request_seconds_count{model="default"}'] == 6, v
assert v['fsgd_serve_model_version{model="default"}'] == 1, v
assert v['fsgd_serve_model_age_seconds{model="ctr"}'] >= 0, v
PY

# A chunked body that goes on far past the limit: the connection is closed
# (counted as too_large), and the server answers the next request.
head -c 2000000 /dev/zero | tr '\0' 'a' > "$tmp/huge"
post /score "$tmp/huge" -H 'Transfer-Encoding: chunked' > /dev/null
# (curl says 000, or 100 after "100 Continue", when the connection closes unanswered)
case $(status) in 000 | 100 | 413) ;; *) fail "endless chunked body: $(status)" ;; esac
post /score "$tmp/rows.svm" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/a.proba" || fail "no answer after an endless chunked body"
curl -sS "$url/metrics" > "$tmp/metrics.txt"
grep -q '^fsgd_serve_errors_total{kind="too_large"} 3$' "$tmp/metrics.txt" || fail "endless chunked body not counted"

# 5. Reload by rename under a loop of requests; bad versions refused.
"$FSGD" predict --model "$tmp/b.model" --data "$tmp/rows.svm" --proba --quiet > "$tmp/b.proba"
head -c 3000 "$tmp/b.model" > "$tmp/truncated.model"
cp "$tmp/b.model" "$tmp/forged.model"
printf '\x55' | dd of="$tmp/forged.model" bs=1 seek=200 conv=notrunc status=none # a weight byte: CRC
head -c 4096 /dev/urandom > "$tmp/garbage.model"
$PY "$here/lib/serve_check.py" reload "$url" "$tmp/live.model" "$tmp/rows.svm" \
    "$tmp/a.model:$tmp/a.proba" "$tmp/b.model:$tmp/b.proba" \
    "$tmp/truncated.model" "$tmp/forged.model" "$tmp/garbage.model" "$tmp/wide.model" "$tmp/ctr.model" ||
    fail "reload under load"
grep -q "new version refused: .*truncated" "$tmp/serve.log" || fail "truncated version not logged"
grep -q "new version refused: .*dimension 3000, the model serving has 2000" "$tmp/serve.log" || fail "wide version not logged"
grep -q "new version refused: .*loss\|new version refused: .*dimension 16384" "$tmp/serve.log" || fail "ctr version not logged"
curl -sS "$url/metrics" > "$tmp/metrics.txt"
grep -q '^fsgd_serve_reloads_refused_total{model="default"} 5$' "$tmp/metrics.txt" || fail "refusals not counted"
curl -sS "$url/metrics" > "$tmp/metrics.txt"
grep -q '^fsgd_serve_reloads_total{model="default"} 8$' "$tmp/metrics.txt" || fail "reloads not counted"

# 6. SIGTERM: the request in flight is answered, exit 0, no process left.
$PY "$here/lib/serve_check.py" drain 127.0.0.1 "$port" "$pid" "$tmp/rows.svm" || fail "drain"
rc=0
wait "$pid" || rc=$?
pids=()
[ "$rc" -eq 0 ] || fail "fsgd serve exited $rc on SIGTERM"
! kill -0 "$pid" 2>/dev/null || fail "fsgd serve still running after SIGTERM"
grep -q "stopped" "$tmp/serve.log" || fail "no 'stopped' line"

# 7. Connection limit and idle timeout.
start_server "$tmp/serve2.log" --model "$tmp/a.model" --max-conns 2 --timeout 2 --threads 1
$PY "$here/lib/serve_check.py" limits 127.0.0.1 "$port" || fail "limits"
stop_server

# 8. Bad command lines and a bad model: clear errors, documented exit codes.
rc=0; "$FSGD" serve --model "$tmp/garbage.model" --port 0 2> "$tmp/e.txt" || rc=$?
[ "$rc" -eq 3 ] && grep -q "garbage.model" "$tmp/e.txt" || fail "corrupt model at start: rc $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" serve --model "a=$tmp/a.model" --model "a=$tmp/b.model" --port 0 2> "$tmp/e.txt" || rc=$?
[ "$rc" -eq 2 ] && grep -q "two models named 'a'" "$tmp/e.txt" || fail "duplicate name: rc $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" serve --model "$tmp/a.model" --port 70000 2> "$tmp/e.txt" || rc=$?
[ "$rc" -eq 2 ] || fail "--port 70000: rc $rc"
rc=0; "$FSGD" serve 2> "$tmp/e.txt" || rc=$?
[ "$rc" -eq 2 ] || fail "no --model: rc $rc"

# 9. The metrics JSON written with a model: its rows trained and held-out
# metrics on /model; --min-auc refuses a version below it (or without one),
# at start (exit 3) and live (the version serving stays).
"$FSGD" train --data "$tmp/d.svm" --test "$tmp/rows.svm" --dim 2000 --epochs 1 --seed 1 --quiet \
    --out "$tmp/m.model" --metrics-json "$tmp/m.json" >/dev/null
rc=0; "$FSGD" serve --model "$tmp/m.model" --metrics-json "$tmp/m.json" --min-auc 0.999999 --port 0 2> "$tmp/e.txt" || rc=$?
[ "$rc" -eq 3 ] && grep -q "held-out AUC 0\.[0-9]* (200 test rows) below --min-auc 0.999999" "$tmp/e.txt" ||
    fail "--min-auc above the model's AUC at start: rc $rc $(cat "$tmp/e.txt")"
rc=0; "$FSGD" serve --model "$tmp/m.model" --min-auc 0.5 --port 0 2> "$tmp/e.txt" || rc=$?
[ "$rc" -eq 3 ] && grep -q "no held-out AUC" "$tmp/e.txt" || fail "--min-auc without metrics: rc $rc $(cat "$tmp/e.txt")"
cp "$tmp/m.model" "$tmp/live2.model"
cp "$tmp/m.json" "$tmp/live2.json" # after the model: no older than it
start_server "$tmp/serve3.log" --model "$tmp/live2.model" --metrics-json "$tmp/live2.json" --min-auc 0.5 --poll-ms 20
url=http://127.0.0.1:$port
# metrics NAME: a JSON of fsgd train's shape for the 2000-column logistic model, with this test AUC
metrics() {
    $PY -c 'import json, sys; json.dump({"model": "logistic", "dim": 2000, "train_rows": 3000,
        "test": {"n": 200, "auc": float(sys.argv[2]), "logloss": 0.5}}, open(sys.argv[1] + ".tmp", "w"))' "$tmp/$1" "$2"
    mv "$tmp/$1.tmp" "$tmp/$1"
}
# wait_model PYTHON-CONDITION on d, the model's /model object (10 s at most)
wait_model() {
    $PY - "$url" "$1" <<'PY' || fail "/model never had $1: $(curl -sS "$url/model")"
import json, sys, time, urllib.request
for _ in range(500):
    d = json.load(urllib.request.urlopen(sys.argv[1] + "/model"))["models"][0]
    if eval(sys.argv[2]):
        sys.exit(0)
    time.sleep(0.02)
sys.exit(1)
PY
}
want_auc=$($PY -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))["test"]["auc"]))' "$tmp/m.json")
wait_model "d['version'] == 1 and d['rows_trained'] == 3000 and d['metrics']['test_rows'] == 200 and d['metrics']['test_auc'] == $want_auc and d['metrics_note'] is None"
# b.model with metrics below the bound: refused; version 1 serves on
cp "$tmp/b.model" "$tmp/next.model" && mv "$tmp/next.model" "$tmp/live2.model"
metrics live2.json 0.45
wait_model "d['version'] == 1 and 'below --min-auc 0.5' in (d['last_refusal'] or '')"
[ "$(post "/score?output=margin" "$tmp/rows.svm" | head -n 1)" = "$("$FSGD" predict --model "$tmp/m.model" --data "$tmp/one.svm" --quiet)" ] ||
    fail "the version below --min-auc scored"
# its metrics rewritten above the bound: version 2 is b.model
metrics live2.json 0.75
wait_model "d['version'] == 2 and d['metrics']['test_auc'] == 0.75 and d['rows_trained'] == 3000"
post /score "$tmp/rows.svm" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/b.proba" || fail "version 2 does not score as b.model"
# another model's metrics (another dimension): no metrics, a note, refused under --min-auc
cp "$tmp/a.model" "$tmp/next.model" && mv "$tmp/next.model" "$tmp/live2.model"
$PY -c 'import json, sys; json.dump({"model": "logistic", "dim": 7, "train_rows": 1, "test": {"n": 9, "auc": 0.9}}, open(sys.argv[1], "w"))' "$tmp/live2.json.tmp"
mv "$tmp/live2.json.tmp" "$tmp/live2.json"
wait_model "d['version'] == 2 and 'dim 7, the model has 2000' in (d['last_refusal'] or '')"
stop_server

# 10. The other model kinds score as fsgd predict does, byte for byte: VW
# text (the model's bits and crosses; tags after the scores, as predict
# writes them), LIBSVM with hashed indices (--hash-bits), Criteo with
# column crosses, CSV through a column spec; and as JSON rows.
$PY - "$tmp/d.svm" "$tmp/d.vw" <<'PY'
import sys
with open(sys.argv[2], "w") as out:
    for i, line in enumerate(open(sys.argv[1])):
        t = line.split()
        a = " ".join("f%s:%s" % tuple(f.split(":")) for f in t[1:] if int(f.split(":")[0]) % 2)
        b = " ".join("g%s:%s" % tuple(f.split(":")) for f in t[1:] if not int(f.split(":")[0]) % 2)
        head = t[0] + (" 2" if i % 7 == 0 else "") + (" 'r%d" % i if i % 3 else "")
        out.write("%s |a %s |b %s\n" % (head, a, b))
PY
head -n 100 "$tmp/d.vw" > "$tmp/rows.vw"
"$FSGD" train --data "$tmp/d.vw" --format vw --hash-bits 16 --interactions ab --epochs 1 --quiet --out "$tmp/vw.model" >/dev/null
"$FSGD" train --data "$tmp/d.svm" --hash-bits 6 --epochs 1 --quiet --out "$tmp/hl.model" >/dev/null
"$FSGD" train --data "$tmp/c.tsv" --format criteo --hash-bits 14 --interactions 15*16 --epochs 1 --quiet \
    --out "$tmp/ctrx.model" >/dev/null
# CSV through a column spec (the Criteo rows with commas), hashed into 2^12
tr '\t' ',' < "$tmp/c.tsv" > "$tmp/c.csv"
head -n 50 "$tmp/c.csv" > "$tmp/rows.csv"
"$FSGD" train --data "$tmp/c.csv" --format "csv:label,num*13,cat*26" --hash-bits 12 --epochs 1 --quiet \
    --out "$tmp/csv.model" >/dev/null
"$FSGD" predict --model "$tmp/csv.model" --data "$tmp/rows.csv" --proba --quiet > "$tmp/csv.proba"
"$FSGD" predict --model "$tmp/vw.model" --data "$tmp/rows.vw" --proba --quiet > "$tmp/vw.proba"
"$FSGD" predict --model "$tmp/hl.model" --data "$tmp/rows.svm" --proba --quiet > "$tmp/hl.proba"
"$FSGD" predict --model "$tmp/ctrx.model" --data "$tmp/rows.tsv" --quiet > "$tmp/ctrx.margin"
grep -q " r1$" "$tmp/vw.proba" || fail "fsgd predict wrote no VW tags: $(head -n 3 "$tmp/vw.proba")"
start_server "$tmp/serve4.log" --model "vw=$tmp/vw.model" --model "hl=$tmp/hl.model" --model "ctrx=$tmp/ctrx.model" \
    --model "csv=$tmp/csv.model"
url=http://127.0.0.1:$port
post /score/vw "$tmp/rows.vw" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/vw.proba" || fail "VW scores differ from fsgd predict's: $(status) $(diff "$tmp/s.txt" "$tmp/vw.proba" | head -4)"
post /score/hl "$tmp/rows.svm" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/hl.proba" || fail "hashed LIBSVM scores differ from fsgd predict's: $(status) $(diff "$tmp/s.txt" "$tmp/hl.proba" | head -4)"
post /score/csv "$tmp/rows.csv" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/csv.proba" || fail "CSV scores differ from fsgd predict's: $(status) $(diff "$tmp/s.txt" "$tmp/csv.proba" | head -4)"
post "/score/ctrx?output=margin" "$tmp/rows.tsv" > "$tmp/s.txt"
cmp -s "$tmp/s.txt" "$tmp/ctrx.margin" || fail "crossed Criteo scores differ from fsgd predict's: $(status) $(diff "$tmp/s.txt" "$tmp/ctrx.margin" | head -4)"
$PY - "$tmp/rows.vw" "$tmp/rows_vw.json" <<'PY'
import json, sys
json.dump({"rows": [{"line": l.rstrip("\n")} for l in open(sys.argv[1])]}, open(sys.argv[2], "w"))
PY
for pair in "/score/vw:rows_vw.json:vw.proba" "/score/hl:rows.json:hl.proba"; do
    IFS=: read -r path body want <<< "$pair"
    post "$path" "$tmp/$body" -H 'Content-Type: application/json' > "$tmp/s.json"
    [ "$(status)" = 200 ] || fail "JSON $path: $(status) $(cat "$tmp/s.json")"
    $PY - "$tmp/s.json" "$tmp/$want" <<'PY' || fail "JSON $path: scores differ from fsgd predict's"
import json, sys
got = json.load(open(sys.argv[1]))
want = [float(x.split()[0]) for x in open(sys.argv[2])]
assert got["scores"] == want, (got["scores"][:3], want[:3])
PY
done
printf '1 |a f1:1\n1 |a f:1e999\n' > "$tmp/bad.vw"
post /score/vw "$tmp/bad.vw" > "$tmp/e.txt"
[ "$(status)" = 400 ] && grep -q "body:2:8: expected a feature value" "$tmp/e.txt" || fail "bad VW row: $(status) $(cat "$tmp/e.txt")"
curl -sS "$url/model/vw" | grep -q '"hashing": "vw:bits=16' || fail "/model/vw: $(curl -sS "$url/model/vw")"
stop_server

echo "ok: fsgd serve endpoints, errors, scores equal to fsgd predict's (LIBSVM, hashed LIBSVM, Criteo, CSV, crosses, VW), live reload, limits, SIGTERM, metrics and --min-auc"
