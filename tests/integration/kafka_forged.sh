#!/usr/bin/env bash
# Forged gradients (issue 12, finding 2): well-formed gradient frames written
# into NAME.grads mid-job by someone who is not a worker -- codec none,
# 0 rows, 124 keys x 3e37, from a made-up sender and impersonating worker 1
# for the steps around the one in progress. The aggregator takes gradients
# only from members of the job, for the step in progress, with rows and
# values it can check: the job finishes with no worker dropped (a fake
# sender used to stall every step for the timeout), its AUC within 0.005 of
# a clean run, and the log names the reason. Kafka security settings pass
# through to every client (--kafka-opt, YAML kafka:) and others are refused.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
FRAMES="$PY $(dirname "$0")/lib/frames.py"
COMMON+=(--batch 32)
ref=$(reference_auc)
# a fresh name on a real broker (topics outlive a job), fj on the mock;
# steps of 32 rows in lockstep, so the job still runs when the forged
# messages come (at 128 rows it was at its last steps: CI failed so)
job=$(job_name fj)
export FSGD_JOB=$job # lib/frames.py binds its tags to the job
start_run "$tmp/run.log" --workers 3 --staleness 0 --name "$job" --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
brokers=$(run_brokers "$tmp/run.log")
# the generation and step in progress, from the latest model message
kcat -C -b "$brokers" -t "$job.model" -o -1 -c 1 -e -f '%s' >"$tmp/last" 2>/dev/null
read -r gen step < <($FRAMES header "$tmp/last")
echo "job at generation $gen step $step"
# the issue's message: a sender that is no worker of the job
$FRAMES grad "$tmp/f777" --gen "$gen" --sender 777 --step $((step + 1))
files=("$tmp/f777")
# worker 1 impersonated for the steps around the current one: whichever
# lands on the step in progress must be refused for what it claims
$FRAMES grad "$tmp/f1" --gen "$gen" --sender 1 --step "$step" --count 60
kcat -P -b "$brokers" -t "$job.grads" -k 1 "${files[@]}" "$tmp"/f1.*
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
grep "rejected a message on $job.grads: forged: sender 777 is not a member of job $job" "$tmp/run.log"
forged=$(json_get "$tmp/m.json" messages.rejected.forged)
dropped=$(json_get "$tmp/m.json" workers.dropped)
echo "forged rejected: $forged, workers dropped: $dropped"
[ "$forged" -ge 1 ]
[ "$dropped" -eq 0 ]

# Security settings: only security.*, sasl.*, ssl.* reach the clients ...
rc=0
"$FSGD" run "${COMMON[@]}" --workers 1 --kafka-opt fetch.wait.max.ms=500 >"$tmp/opt.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "kafka option 'fetch.wait.max.ms' is not passed to Kafka clients" "$tmp/opt.log"
# ... librdkafka checks them before anything starts ...
rc=0
"$FSGD" run "${COMMON[@]}" --workers 1 --kafka-opt security.protocol=bogus >"$tmp/opt.log" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "kafka option security.protocol" "$tmp/opt.log"
grep -q "embedded Kafka cluster" "$tmp/opt.log" && { echo "started before checking --kafka-opt"; exit 1; }
# ... and the embedded cluster, which speaks PLAINTEXT only, refuses TLS or
# SASL settings up front (exit 2, naming the setting) instead of failing at
# its first connect; kafka_tls.sh and kafka_sasl.sh train over them for real
printf 'kafka:\n  security.protocol: ssl\n' >"$tmp/ssl.yaml"
rc=0
timeout 120 "$FSGD" run "$tmp/ssl.yaml" "${COMMON[@]}" --workers 1 >"$tmp/ssl.log" 2>&1 || rc=$?
echo "run with security.protocol=ssl on the embedded cluster: status $rc"
tail -2 "$tmp/ssl.log"
[ $rc -eq 2 ] && grep -q "the embedded cluster speaks PLAINTEXT only: the Kafka setting security.protocol" "$tmp/ssl.log"
grep -q "embedded Kafka cluster at" "$tmp/ssl.log" && { echo "started the cluster before refusing TLS"; exit 1; }
echo ok
