#!/usr/bin/env bash
# A broker goes down mid-run and comes back: clients reconnect, the job
# finishes, exactly-once holds (rows per epoch = the dataset, AUC within
# 0.005 of the fault-free run).
#   mock: the embedded broker leading NAME.grads is set down for 3 s (fault
#         injection);
#   real (3-broker cluster): the broker leading NAME.grads is stopped (TERM,
#         a controlled shutdown: its leaders move to the other two) and
#         started again 3 s later on its intact log dir; it catches up and
#         rejoins the in-sync replicas.
set -euo pipefail
# real-kafka: cluster
# suite: alone on real Kafka: stops a broker of the cluster the other scripts share
. "$(dirname "$0")/lib/kafka.bash"
COMMON+=(--batch 128)
ref=$(reference_auc)
if [ "$KAFKA_MODE" = mock ]; then
    # staleness 0 and steps of 32 rows: the job must still run 4 s after the
    # data is written and outlast the 3 s outage (at 128 rows a step it ended
    # first once start-up overlapped the produce, and the fault never came)
    start_run "$tmp/run.log" --workers 3 --staleness 0 --batch 32 --fault broker-down:after=4,for=3,broker=2 \
        --metrics-json "$tmp/m.json"
    finish_run "$tmp/run.log"
    grep "fault: broker 2 down" "$tmp/run.log"
    grep "fault: broker 2 up" "$tmp/run.log"
    check_metrics "$tmp/m.json" "$ref" 0.005
    exit 0
fi
[ "$(kafka_nodes)" -ge 3 ] || skip "needs the 3-broker cluster (FSGD_KAFKA_DIR with 3 nodes)"
# smaller steps, in lockstep, so the job still runs when the broker is back
# (a controlled shutdown and a JVM start take seconds; at 48 rows a step a
# warm cluster on an idle machine finished first)
COMMON+=(--batch 16 --staleness 0)
ref=$(reference_auc)
name=$(job_name bd)
node=
trap '[ -n "$node" ] && "$BROKER_SH" start-node "$FSGD_KAFKA_DIR" "$node" >/dev/null 2>&1; cleanup' EXIT
start_run "$tmp/run.log" --workers 3 --name "$name" --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
node=$("$BROKER_SH" leader "$FSGD_BROKERS" "$name.grads")
echo "stopping broker $node (leader of $name.grads)"
"$BROKER_SH" stop-node "$FSGD_KAFKA_DIR" "$node"
sleep 3
"$BROKER_SH" start-node "$FSGD_KAFKA_DIR" "$node"
echo "broker $node is back, leader of $name.grads now: $("$BROKER_SH" leader "$FSGD_BROKERS" "$name.grads")"
node=
kill -0 "$RUN_PID" 2>/dev/null || { echo "the job finished before the broker was back: no restart under load tested"; exit 1; }
finish_run "$tmp/run.log"
check_metrics "$tmp/m.json" "$ref" 0.005
