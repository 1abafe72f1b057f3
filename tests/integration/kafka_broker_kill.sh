#!/usr/bin/env bash
# kill -9 one broker of three mid-job, the one leading NAME.model, and leave
# it down: the controller fences it, leadership of its partitions moves to
# the in-sync replicas (replication 3, min.insync.replicas 2, acks=all), and
# training goes on. The job finishes, every epoch applies exactly the
# dataset's rows, AUC within 0.005 of the fault-free run. The broker is
# started again afterwards so later tests see three.
set -euo pipefail
# real-kafka: cluster
# suite: alone on real Kafka: kills a broker of the cluster the other scripts share
. "$(dirname "$0")/lib/kafka.bash"
real_only "kills a broker process; the embedded cluster's brokers are threads of fsgd run (kafka_broker_down.sh injects its broker-down fault)"
[ "$(kafka_nodes)" -ge 3 ] || skip "needs the 3-broker cluster (FSGD_KAFKA_DIR with 3 nodes)"
COMMON+=(--batch 128)
ref=$(reference_auc)
name=$(job_name bk)
node=
trap '[ -n "$node" ] && "$BROKER_SH" start-node "$FSGD_KAFKA_DIR" "$node" >/dev/null 2>&1; cleanup' EXIT
start_run "$tmp/run.log" --workers 3 --name "$name" --metrics-json "$tmp/m.json"
wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
node=$("$BROKER_SH" leader "$FSGD_BROKERS" "$name.model")
"$BROKER_SH" kill "$FSGD_KAFKA_DIR" "$node"
t_kill=$SECONDS
echo "killed broker $node (kill -9; leader of $name.model)"
others=$(tr ',' '\n' <<<"$FSGD_BROKERS" | sed -n "$((node % 3 + 1))p")
for _ in $(seq 300); do
    l=$("$BROKER_SH" leader "$others" "$name.model")
    [ -n "$l" ] && [ "$l" != "$node" ] && [ "$l" != -1 ] && break
    sleep 0.1
done
echo "leader of $name.model now: broker $l ($((SECONDS - t_kill)) s after the kill)"
[ "$l" != "$node" ]
finish_run "$tmp/run.log"
echo "the job ended $((SECONDS - t_kill)) s after the kill; what it waited for:"
grep -E "waiting|dropped after|resync|retry|timed out" "$tmp/run.log" | grep -v " done: " | tail -8 || true
check_metrics "$tmp/m.json" "$ref" 0.005
"$BROKER_SH" start-node "$FSGD_KAFKA_DIR" "$node"
node=
echo "broker restarted; the cluster has three again"
