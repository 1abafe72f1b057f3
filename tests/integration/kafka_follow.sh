#!/usr/bin/env bash
# fsgd run --follow (continuous training): a producer writes generated rows
# into NAME.data while the job trains; three model versions are read from
# NAME.model while it runs (fsgd model assemble --partial and fsgd predict
# --brokers) and scored on held-out rows; the progressive AUC rises; the
# aggregator is killed with -9 half way and restarted by fsgd run from its
# checkpoint; SIGTERM ends the job with a final version, in which every
# partition's position is its end offset and its trained rows are exactly
# the rows it holds (kcat counts them): no row lost or trained twice. A
# version's log line stays short (150 characters at most). Row
# messages copied back into their own partitions (their tags travel with
# them: no key needed) are replays, read as no rows by every role (issue
# 42), before and after the aggregator's restart; on a real broker the
# resumed job also refuses the first run's rows and worker_leave events
# copied again, and takes the new producer's rows. produce --follow with a
# mistyped job name is refused. A follow job stopped by a row past --dim
# goes on with --resume --skip-bad.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
ROWS0=6000 CHUNK=6000 CHUNKS=6 TAIL=1200 TEST=6000 DIM=5000
total=$((ROWS0 + CHUNK * CHUNKS + TAIL))
# one chunk more for the resumed run (real broker)
"$FSGD" gen --rows $((total + CHUNK + TEST)) --dim $DIM --nnz 15 --seed 29 --quiet --out "$tmp/all.svm"
head -n $ROWS0 "$tmp/all.svm" >"$tmp/d0.svm"
tail -n $TEST "$tmp/all.svm" >"$tmp/test.svm"
for ((c = 0; c < CHUNKS; c++)); do
    sed -n "$((ROWS0 + c * CHUNK + 1)),$((ROWS0 + (c + 1) * CHUNK))p" "$tmp/all.svm" >"$tmp/chunk$c.svm"
done
sed -n "$((ROWS0 + CHUNKS * CHUNK + 1)),$((total))p" "$tmp/all.svm" >"$tmp/tail.svm"
sed -n "$((total + 1)),$((total + CHUNK))p" "$tmp/all.svm" >"$tmp/chunk$CHUNKS.svm"
name=$(job_name follow)
extra=()
[ "$KAFKA_MODE" = real ] && extra=(--brokers "$FSGD_BROKERS")
# the embedded pass follows with full replicas, the real broker's with
# working-set workers (issue 37): each mode once, at no extra time
FOLLOW_REPLICA=${FOLLOW_REPLICA:-$([ "$KAFKA_MODE" = real ] && echo working_set || echo full)}
job=(--follow --data "$tmp/d0.svm" --test "$tmp/test.svm" --dim $DIM --workers 2 --partitions 4 --name "$name"
    --checkpoint "$tmp/agg.ckpt" --version-seconds 1 --lr 0.01 --batch 256 --job-key-file "$FSGD_JOB_KEY"
    --metrics-json "$tmp/m.json" --metrics-port 0 ${extra[@]+"${extra[@]}"} --replica "$FOLLOW_REPLICA")
"$FSGD" run "${job[@]}" >"$tmp/run.log" 2>&1 &
RUN_PID=$!
wait_for "$tmp/run.log" "aggregator: version 1 " 90 || { echo "no version 1"; cat "$tmp/run.log"; exit 1; }
brokers=$(run_brokers "$tmp/run.log")
key=(--job-key-file "$FSGD_JOB_KEY")
# copies of rows the job has trained (fsgd run wrote them), put back at the
# ends of their partitions (their tags still verify), before the producer
# starts: it checks that nobody else writes while it does
kcat_replay "$name.data" 0 0
kcat_replay "$name.data" 1 1
# a mistyped job name: refused (exit 2), no topic made (it used to make new
# topics that no job reads; issue 42)
rc=0
"$FSGD" produce --follow --brokers "$brokers" --name "${name}x" "${key[@]}" "$tmp/chunk0.svm" >"$tmp/typo.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "has no topic ${name}x.data: check --name" "$tmp/typo.log" ||
    { cat "$tmp/typo.log"; echo "FAIL: produce --follow --name ${name}x: status $rc"; exit 1; }
if kcat -L -b "$brokers" | grep -q "topic \"${name}x\."; then echo "FAIL: produce --follow made ${name}x's topics"; exit 1; fi

# the producer: a chunk a second into the topic of the running job
(for ((c = 0; c < CHUNKS; c++)); do
    "$FSGD" produce --follow --brokers "$brokers" --name "$name" "${key[@]}" "$tmp/chunk$c.svm" >"$tmp/produce$c.log" 2>&1 ||
        { echo "produce $c failed"; cat "$tmp/produce$c.log"; exit 1; }
    sleep 1
done) &
PRODUCER=$!

versions() { grep -c "aggregator: version [0-9]* " "$tmp/run.log" || true; }
# read_version I: the newest model from the topic, once a version newer than
# the last one read is out; its step and its test AUC
read_version() {
    local seen=$(versions) i
    for ((i = 0; i < 300 && $(versions) <= seen; i++)); do sleep 0.1; done
    "$FSGD" model assemble --partial --brokers "$brokers" --name "$name" "${key[@]}" --out "$tmp/v$1.fsgd" \
        >"$tmp/v$1.out" 2>"$tmp/v$1.err" || { cat "$tmp/v$1.err"; exit 1; }
    step[$1]=$(sed -n 's/.*(step \([0-9]*\),.*/\1/p' "$tmp/v$1.out")
    "$FSGD" predict --model "$tmp/v$1.fsgd" --data "$tmp/test.svm" --out "$tmp/scores" 2>"$tmp/p$1.err"
    auc[$1]=$(sed -n 's/.*rows: auc \([0-9.]*\) .*/\1/p' "$tmp/p$1.err")
    echo "model read from $name.model: step ${step[$1]}, test auc ${auc[$1]}"
}
declare -a step auc
read_version 1
read_version 2
# kill -9 the aggregator once it has a checkpoint, while rows keep coming
for _ in $(seq 300); do [ -s "$tmp/agg.ckpt" ] && break; sleep 0.1; done
pid=$(sed -n 's/^fsgd: aggregator pid \([0-9]*\)$/\1/p' "$tmp/run.log" | tail -1)
kill -9 "$pid"
echo "killed the aggregator (pid $pid)"
wait_for "$tmp/run.log" "follow: resumed at version" 60 || { echo "no resume"; cat "$tmp/run.log"; exit 1; }
read_version 3
# /metrics of the (restarted) aggregator and its progress line carry the versions and progressive figures
port=$(sed -n 's|^fsgd: aggregator metrics at http://[^ ]*:\([0-9]*\)/metrics$|\1|p' "$tmp/run.log" | tail -1)
for _ in $(seq 50); do
    "$PY" - "$port" >"$tmp/prom" 2>/dev/null <<'PYEOF' && break
import re, sys, urllib.request
t = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
v = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(fsgd_model_version|fsgd_progressive_auc|fsgd_progressive_rows_total) (\S+)$", t, re.M)}
print(v)
sys.exit(0 if v.get("fsgd_model_version", 0) >= 1 and v.get("fsgd_progressive_auc", 0) > 0.6 and v.get("fsgd_progressive_rows_total", 0) > 0 else 1)
PYEOF
    sleep 0.2
done
echo "/metrics: $(cat "$tmp/prom")"
grep -q "fsgd_model_version" "$tmp/prom" || { echo "no follow series on /metrics (port $port)"; exit 1; }
grep -m1 "version [0-9]*  progressive auc [0-9.]* logloss" "$tmp/run.log" >/dev/null ||
    { echo "no progressive figures in the progress line"; exit 1; }
wait "$PRODUCER"
# a copy the restarted aggregator and the workers read alike, then the last
# rows after it (the window that takes them takes the copy too)
kcat_replay "$name.data" 2 0
"$FSGD" produce --follow --brokers "$brokers" --name "$name" "${key[@]}" "$tmp/tail.svm" >"$tmp/produce_tail.log" 2>&1 ||
    { cat "$tmp/produce_tail.log"; exit 1; }
# all rows trained: a version says so
wait_for "$tmp/run.log" "step [0-9]*): $total rows, " 120 ||
    { echo "never reached $total rows"; grep "version" "$tmp/run.log" | tail -5; exit 1; }
# fsgd predict straight from the topic scores the newest model
"$FSGD" predict --brokers "$brokers" --name "$name" "${key[@]}" --data "$tmp/test.svm" --out "$tmp/scores" \
    2>"$tmp/p_topic.err"
grep "fsgd predict: the model of job" "$tmp/p_topic.err"
topic_auc=$(sed -n 's/.*rows: auc \([0-9.]*\) .*/\1/p' "$tmp/p_topic.err")
# stop_and_check LOG ROWS: counts the messages per partition the broker holds,
# stops the job with SIGTERM, checks its final version against them
stop_and_check() {
    kcat -C -b "$brokers" -t "$name.data" -o beginning -e -q -f '%p\n' | sort -n | uniq -c |
        awk '{print $2 ":" $1}' >"$tmp/held"
    echo "rows per partition on $name.data: $(tr '\n' ' ' <"$tmp/held")"
    kill -TERM "$RUN_PID"
    local rc=0
    wait "$RUN_PID" || rc=$?
    RUN_PID=
    [ $rc -eq 143 ] || { echo "fsgd run ended with $rc, not 143 (SIGTERM)"; cat "$1"; exit 1; }
    grep "follow: stopped on request" "$1"
    # the final version's line, and the line after it with each partition's
    # position and rows (written on SIGTERM alone: a version's line is short)
    local last=$(grep "aggregator: version [0-9]* (step " "$1" | tail -1)
    local where=$(grep "aggregator: version [0-9]*: partition:position/rows " "$1" | tail -1)
    echo "last version: $last"
    echo "$where"
    "$PY" - "$tmp/held" "$last" "$2" "$where" <<'PYEOF'
import re, sys
held = dict(l.strip().split(":") for l in open(sys.argv[1]) if l.strip())
last, total, where = sys.argv[2], int(sys.argv[3]), sys.argv[4]
parts = dict((p, (int(pos), int(rows))) for p, pos, rows in
             re.findall(r"(\d+):(\d+)/(\d+)", where.split("partition:position/rows")[1]))
trained = int(re.search(r"\): (\d+) rows, ", last).group(1))
same = re.search(r"version (\d+) ", last).group(1) == re.search(r"version (\d+):", where).group(1)
ok = same and trained == total and sorted(parts) == sorted(held)
print("%s the final version trained %d rows of %d, partitions %s%s" % ("ok  " if ok else "FAIL", trained, total, sorted(parts), "" if same else " (of another version)"))
# a message holds a block of rows (fsgd/rowblock.h): every message trained
# once, and the rows of all of them
for p, (pos, rows) in sorted(parts.items()):
    good = pos == int(held[p])
    print("%s partition %s: position %d, rows trained %d, messages held %s" % ("ok  " if good else "FAIL", p, pos, rows, held[p]))
    ok &= good
rows_sum = sum(rows for pos, rows in parts.values())
print("%s rows trained over the partitions: %d of %d" % ("ok  " if rows_sum == total else "FAIL", rows_sum, total))
ok &= rows_sum == total
sys.exit(0 if ok else 1)
PYEOF
}
stop_and_check "$tmp/run.log" $total
# a version's line is short: version, step, rows, rate, progressive and test
# figures (issue 40: it was ~300 characters, naming every partition)
grep "aggregator: version [0-9]* (" "$tmp/run.log" | awk 'length > 150 { bad = $0 } END { exit (bad != "" ? 1 : (NR == 0 ? 2 : 0)) }' ||
    { echo "FAIL: no version line, or one over 150 characters: $(grep "aggregator: version [0-9]* (" "$tmp/run.log" | tail -1)"; exit 1; }
# working-set workers pulled their values; full replicas pulled none
values=$(json_get "$tmp/m.json" downlink.values_bytes_per_worker_step)
"$PY" -c 'import sys; v, r = float(sys.argv[1]), sys.argv[2]; sys.exit(0 if (v > 0) == (r == "working_set") else 1)' \
    "$values" "$FOLLOW_REPLICA" || { echo "FAIL: replica $FOLLOW_REPLICA, pulled values $values B a worker-step"; exit 1; }
echo "ok   replica $FOLLOW_REPLICA: pulled values $values B a worker-step"
grep -m1 "rejected a message on $name.data: replayed: partition [0-9] offset [0-9]*: a copy of a row message" \
    "$tmp/run.log" || { echo "FAIL: the replayed row messages were not named"; exit 1; }
grep "restarting from" "$tmp/run.log"
grep "follow: resumed at version" "$tmp/run.log"
first=$(grep "aggregator: version [0-9]* " "$tmp/run.log" | head -1)
last=$(grep "aggregator: version [0-9]* " "$tmp/run.log" | tail -1)
"$PY" - "$last" "$first" "$total" "$tmp/m.json" "${step[*]}" "${auc[*]}" "$topic_auc" <<'PYEOF'
import json, re, sys
last, first, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = json.load(open(sys.argv[4]))
steps = [int(s) for s in sys.argv[5].split()]
aucs = [float(a) for a in sys.argv[6].split()]
topic_auc = float(sys.argv[7])
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)
auc_of = lambda line: float(re.search(r"progressive logloss [0-9.]+ auc ([0-9.]+)", line).group(1))
# (how many rows version 1 has seen depends on the machine: a fast one trains
# the first 6000 before its first second is out)
check(auc_of(first) < 0.75 and auc_of(last) > auc_of(first) + 0.05,
      "progressive auc rose: %.4f -> %.4f" % (auc_of(first), auc_of(last)))
# the third read is of the restarted aggregator's generation, which went on
# from its checkpoint: its step may be below the second read's
check(len(steps) == 3 and steps[0] < steps[1] and steps[2] > 0, "three versions read from the topic, steps %s" % steps)
check(all(a > 0.6 for a in aucs) and topic_auc >= aucs[0] - 0.01,
      "their test aucs %s, fsgd predict --brokers at the end %.4f" % (aucs, topic_auc))
f = m.get("follow", {})
check(f.get("progressive_rows") == total and f.get("version", 0) >= 4, "metrics JSON follow: %s" % f)
sys.exit(0 if ok else 1)
PYEOF

# A follow job stopped by a signed row with a feature past --dim (exit 3)
# goes on with --resume --skip-bad: that message is read as no rows by the
# aggregator's scan at start as by its windows and the workers, and the rows
# after it are trained once (issue 42 item 16: the scan refused the topic).
# Its own cluster: the stopped job's topics must outlive the run.
dname=$(job_name fdim)
kafka_cluster "$dname" 2
head -n 1000 "$tmp/d0.svm" >"$tmp/dim0.svm"
head -n 1000 "$tmp/chunk0.svm" >"$tmp/dim1.svm"
echo "+1 3:1 $((DIM + 7)):1" >"$tmp/pastdim.svm"
djob=(--follow --brokers "$brokers" --name "$dname" --dim $DIM --workers 2 --checkpoint "$tmp/dim.ckpt"
    --version-seconds 1 --lr 0.01 --batch 256 "${key[@]}")
"$FSGD" run "${djob[@]}" --data "$tmp/dim0.svm" >"$tmp/dim_run1.log" 2>&1 &
RUN_PID=$!
wait_for "$tmp/dim_run1.log" "): 1000 rows, " 90 || { echo "no version of 1000 rows"; cat "$tmp/dim_run1.log"; exit 1; }
"$FSGD" produce --follow --brokers "$brokers" --name "$dname" "${key[@]}" "$tmp/pastdim.svm" >"$tmp/dim_p.log" 2>&1 ||
    { cat "$tmp/dim_p.log"; exit 1; }
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ $rc -eq 3 ] && grep -q "feature $((DIM + 7)) > dim $DIM of the model being trained" "$tmp/dim_run1.log" ||
    { cat "$tmp/dim_run1.log"; echo "FAIL: a row past --dim: status $rc, not 3"; exit 1; }
"$FSGD" produce --follow --brokers "$brokers" --name "$dname" "${key[@]}" "$tmp/dim1.svm" >"$tmp/dim_p.log" 2>&1 ||
    { cat "$tmp/dim_p.log"; exit 1; }
"$FSGD" run --resume --skip-bad --no-produce "${djob[@]}" >"$tmp/dim_run2.log" 2>&1 &
RUN_PID=$!
wait_for "$tmp/dim_run2.log" "): 2000 rows, " 90 ||
    { cat "$tmp/dim_run2.log"; echo "FAIL: --resume --skip-bad did not go on past the row beyond --dim"; exit 1; }
grep "skipped 1 row messages with a feature past dim $DIM (skip_bad)" "$tmp/dim_run2.log" ||
    { cat "$tmp/dim_run2.log"; echo "FAIL: the skipped message was not named"; exit 1; }
kill -TERM "$RUN_PID"
wait "$RUN_PID" || true
RUN_PID=
grep "): [0-9]* rows, " "$tmp/dim_run2.log" | tail -1 | grep -q "): 2000 rows, " ||
    { grep "aggregator: version" "$tmp/dim_run2.log"; echo "FAIL: rows trained past 2000"; exit 1; }
echo "ok: a follow job stopped by a row past --dim went on with --resume --skip-bad: 2000 rows trained once"
kafka_cluster_stop

[ "$KAFKA_MODE" = real ] || exit 0

# a real broker keeps the topics: the stopped job resumes where it stopped
"$FSGD" run --resume "${job[@]}" >"$tmp/run2.log" 2>&1 &
RUN_PID=$!
wait_for "$tmp/run2.log" "follow: resumed at version" 60 || { echo "no resume"; cat "$tmp/run2.log"; exit 1; }
# a new producer (a new incarnation: its rows are no replays of the first one's)
"$FSGD" produce --follow --brokers "$brokers" --name "$name" "${key[@]}" "$tmp/chunk$CHUNKS.svm" >"$tmp/produce.log" 2>&1 ||
    { cat "$tmp/produce.log"; exit 1; }
# the first run's worker_leave events (its workers had the ids the new ones
# have) and one of its row messages, copied again while the new workers train
kcat -C -b "$brokers" -t "$name.ctl" -o beginning -e -q -f '%o %k\n' | awk '$2 == "worker_leave" {print $1}' >"$tmp/leaves"
[ -s "$tmp/leaves" ] || { echo "FAIL: no worker_leave of the first run on $name.ctl"; exit 1; }
while read -r o; do kcat_replay "$name.ctl" 0 "$o"; done <"$tmp/leaves"
kcat_replay "$name.data" 3 0
wait_for "$tmp/run2.log" "step [0-9]*): $((total + CHUNK)) rows, " 120 ||
    { echo "the resumed job never reached $((total + CHUNK)) rows"; grep "version" "$tmp/run2.log" | tail -5; exit 1; }
# every copy refused before the stop: the first run's three row copies (read
# at start), the new one and the worker_leave copies, on the aggregator's
# /metrics (its log names the first replay only, of whichever topic)
want=$((4 + $(wc -l <"$tmp/leaves")))
port=$(sed -n 's|^fsgd: aggregator metrics at http://[^ ]*:\([0-9]*\)/metrics$|\1|p' "$tmp/run2.log" | tail -1)
for _ in $(seq 300); do
    "$PY" - "$port" "$want" >"$tmp/prom2" 2>/dev/null <<'PYEOF' && break
import re, sys, urllib.request
t = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
m = re.search(r'^fsgd_rejected_messages_total\{reason="replayed"\} (\S+)$', t, re.M)
print(m.group(1) if m else "none")
sys.exit(0 if m and float(m.group(1)) >= int(sys.argv[2]) else 1)
PYEOF
    sleep 0.2
done
echo "replays refused by the resumed aggregator: $(cat "$tmp/prom2") (want $want)"
stop_and_check "$tmp/run2.log" $((total + CHUNK))
grep -m1 "rejected a message on $name.data: replayed" "$tmp/run2.log" ||
    { echo "FAIL: the first run's copied rows were not named"; exit 1; }
got=$(json_get "$tmp/m.json" messages.rejected.replayed)
[ "$got" -ge "$want" ] && [ "$(json_get "$tmp/m.json" workers.dropped)" -eq 0 ] ||
    { echo "FAIL: $got replays refused (want $want), workers dropped $(json_get "$tmp/m.json" workers.dropped)"; exit 1; }
