#!/usr/bin/env bash
# The job key stays secret (issue 27, its closing paragraph). A job given
# --job-key-file writes the key, as hex or as its 32 raw bytes, into none
# of its outputs (the log, the metrics JSON, the model file, the
# checkpoint, the model topic, the Prometheus endpoints), and no process of
# the job has it on its command line. The key fsgd run makes when none is given is a mode-600
# file in a mode-700 folder while the job runs, and gone once a SIGTERM
# ended the run. A key file others may read is refused before anything
# starts, naming the file and its mode, without echoing the key, whether
# given by --job-key-file or by the job file's job_key_file.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
head -n 3000 "$DATA/a9a" >"$tmp/rows"
job=$(job_name ks)
R=(--data "$tmp/rows" --workers 2 --batch 32 --lr 0.01 --codec none)
[ "$KAFKA_MODE" = real ] && R+=(--brokers "$FSGD_BROKERS")
hex=$(head -c 64 "$FSGD_JOB_KEY")

# the key's hex (either case) or raw bytes in a file: its name, else nothing
holds_key() { # FILE...
    "$PY" - "$hex" "$@" <<'PY'
import sys
key = sys.argv[1]
needles = [key.encode(), key.upper().encode(), bytes.fromhex(key)]
for p in sys.argv[2:]:
    data = open(p, "rb").read()
    if any(n in data for n in needles):
        print(p)
PY
}

# 1. a job with the tests' key: the key in none of its outputs or command lines
"$FSGD" run "${R[@]}" --name "$job" --epochs 10 --job-key-file "$FSGD_JOB_KEY" --metrics-json "$tmp/m.json" \
    --checkpoint "$tmp/c.ckpt" --out "$tmp/model.fsgd" >"$tmp/run.log" 2>&1 &
RUN_PID=$!
seen=0
for _ in $(seq 300); do
    for p in $(pgrep -f -- "--name $job" || true); do
        # a process may end between pgrep and this read
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null >"$tmp/cmdline" || continue
        grep -qi -- "$hex" "$tmp/cmdline" && { echo "process $p has the key on its command line"; exit 1; }
        grep -q "fsgd worker" "$tmp/cmdline" && seen=1
    done
    [ $seen -eq 1 ] && break
    sleep 0.1
done
[ $seen -eq 1 ] || { echo "no worker of the job was seen running"; cat "$tmp/run.log"; exit 1; }
finish_run "$tmp/run.log"
grep -q "authenticated (key $FSGD_JOB_KEY)" "$tmp/run.log" || { echo "no startup line naming the key file"; exit 1; }
brokers=$(run_brokers "$tmp/run.log")
# the embedded cluster is gone with its run: the model topic is read on a real broker only
if [ "$KAFKA_MODE" = real ]; then
    kcat -C -b "$brokers" -t "$job.model" -o beginning -e -q -f '%s' >"$tmp/model.stream"
    kcat -C -b "$brokers" -t "$job.ctl" -o beginning -e -q -f '%h %k %s\n' >"$tmp/ctl.stream"
    [ -s "$tmp/model.stream" ] || { echo "read nothing from $job.model"; exit 1; }
fi
# an aggregator run to its end removes its checkpoint: keep one from a run
# stopped midway
"$FSGD" run "${R[@]}" --name "$(job_name ks2)" --epochs 100000 --snapshot-every 1 --checkpoint "$tmp/c.ckpt" \
    --job-key-file "$FSGD_JOB_KEY" >"$tmp/run2.log" 2>&1 &
RUN_PID=$!
for _ in $(seq 300); do [ -s "$tmp/c.ckpt" ] && break; sleep 0.1; done
kill -TERM $RUN_PID
wait $RUN_PID 2>/dev/null || true
RUN_PID=
[ -s "$tmp/c.ckpt" ] || { echo "no checkpoint to look into"; cat "$tmp/run2.log"; exit 1; }
files=("$tmp/run.log" "$tmp/run2.log" "$tmp/m.json" "$tmp/model.fsgd" "$tmp/c.ckpt")
[ "$KAFKA_MODE" = real ] && files+=("$tmp/model.stream" "$tmp/ctl.stream")
leaks=$(holds_key "${files[@]}")
[ -z "$leaks" ] || { echo "the job key is in: $leaks"; exit 1; }
echo "ok: the key is in none of ${#files[@]} outputs nor on any command line"

# 2. the key fsgd run makes itself: mode 600 in a mode-700 folder, in none
#    of the Prometheus endpoints' answers, removed when a SIGTERM ends the run
base=$("$PY" - <<'PORTS'
import random, socket
for _ in range(200):
    b, socks = random.randrange(20000, 60000), []
    try:
        for p in range(b, b + 3):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(b); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PORTS
)
"$FSGD" run "${R[@]}" --name "$(job_name ks3)" --epochs 100000 --metrics-port "$base" >"$tmp/run3.log" 2>&1 &
RUN_PID=$!
wait_for "$tmp/run3.log" "authenticated (key " 60 || { echo "no startup line about the key"; cat "$tmp/run3.log"; exit 1; }
made=$(sed -n 's/.*authenticated (key \([^)]*\)).*/\1/p' "$tmp/run3.log" | head -n 1)
[ -n "$made" ] && [ "$made" != "$FSGD_JOB_KEY" ] || { echo "the run did not make a key: '$made'"; exit 1; }
[ "$(stat -c %a "$made")" = 600 ] && [ "$(stat -c %a "$(dirname "$made")")" = 700 ] ||
    { echo "made key $made: mode $(stat -c %a "$made"), folder $(stat -c %a "$(dirname "$made")")"; exit 1; }
hex=$(head -c 64 "$made")
if command -v curl >/dev/null; then
    for who in "aggregator" "worker 1" "worker 2"; do
        wait_for "$tmp/run3.log" "^fsgd: $who metrics at " 60 || { echo "no '$who metrics at' line"; cat "$tmp/run3.log"; exit 1; }
        url=$(sed -n "s/^fsgd: $who metrics at //p" "$tmp/run3.log" | tail -n 1)
        curl -fsS --max-time 5 "$url" >"$tmp/prom-${who/ /}.txt" || { echo "scraping $url failed"; exit 1; }
    done
    leaks=$(holds_key "$tmp"/prom-*.txt)
    [ -z "$leaks" ] || { echo "the made key is in: $leaks"; exit 1; }
    echo "ok: the made key is in none of 3 metrics endpoints' answers ($(cat "$tmp"/prom-*.txt | wc -l) lines)"
else
    echo "note: no curl: the Prometheus endpoints are not scraped"
fi
kill -TERM $RUN_PID
rc=0
wait $RUN_PID || rc=$?
RUN_PID=
[ $rc -eq 143 ] || { echo "run stopped by SIGTERM exited $rc"; cat "$tmp/run3.log"; exit 1; }
[ ! -e "$made" ] && [ ! -e "$(dirname "$made")" ] || { echo "the made key outlived its run: $made"; exit 1; }
echo "ok: the run's own key was mode 600 in a mode-700 folder and is gone after SIGTERM"

# 3. a key file others may read: exit 2, naming it and its mode, the key not echoed
cp "$FSGD_JOB_KEY" "$tmp/open.key"
chmod 644 "$tmp/open.key"
rc=0
"$FSGD" run "${R[@]}" --name "$(job_name ks4)" --epochs 1 --job-key-file "$tmp/open.key" >"$tmp/run4.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "job key file '$tmp/open.key'.*mode 0644" "$tmp/run4.log" ||
    { echo "a key file of mode 644: exit $rc"; cat "$tmp/run4.log"; exit 1; }
grep -q "embedded Kafka cluster at" "$tmp/run4.log" && { echo "started a cluster before refusing the key file"; exit 1; }
hex=$(head -c 64 "$FSGD_JOB_KEY")
[ -z "$(holds_key "$tmp/run4.log")" ] || { echo "the refusal echoes the key"; exit 1; }
# the same through the job file's job_key_file: the YAML key is read and checked alike
printf 'job_key_file: %s\n' "$tmp/open.key" >"$tmp/job.yaml"
rc=0
"$FSGD" run "$tmp/job.yaml" "${R[@]}" --name "$(job_name ks5)" --epochs 1 >"$tmp/run5.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "job key file '$tmp/open.key'.*mode 0644" "$tmp/run5.log" ||
    { echo "job_key_file in YAML, mode 644: exit $rc"; cat "$tmp/run5.log"; exit 1; }
echo ok
