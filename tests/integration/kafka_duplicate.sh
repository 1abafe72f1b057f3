#!/usr/bin/env bash
# Gradients that reach NAME.grads twice are applied once: the aggregator
# drops the copies, as replays when they carry the job key's tag (the same
# nonce twice: fsgd run's jobs have a key; issue 42) and otherwise by
# (sender, step, chunk).
#   mock: a produce reply of the broker leading NAME.grads is delayed 3 s, past
#         the workers' 1.5 s socket timeout: the client retries and the broker
#         stores the gradient twice;
#   real (3-broker cluster): the first three gradient frames of the run are
#         read back with kcat and written again mid-run.
# Either way every epoch applies exactly the dataset's rows and the AUC is
# within 0.005 of the fault-free run.
set -euo pipefail
# real-kafka: cluster
. "$(dirname "$0")/lib/kafka.bash"
# mock: the fault comes 6 s after the processes start; steps of 64 rows keep
# the job training then (3 epochs at 256 were over by then once start-up got fast)
[ "$KAFKA_MODE" != mock ] || COMMON+=(--batch 64)
ref=$(reference_auc)
if [ "$KAFKA_MODE" = mock ]; then
    # staleness 0: the delayed reply must be a gradient's, which in lockstep
    # the 6th produce request to broker 2 is
    FSGD_RDKAFKA="socket.timeout.ms=1500" \
        start_run "$tmp/run.log" --workers 3 --staleness 0 --fault produce-delay:after=6,rtt=3000,count=1,broker=2 \
        --metrics-json "$tmp/m.json"
    finish_run "$tmp/run.log"; grep -v "^fsgd: epoch [0-9]* step" "$tmp/run.log" | sed "s/^/  | /"
    grep "produce replies of broker 2 delayed" "$tmp/run.log"
    want=1
else
    command -v kcat >/dev/null || { echo "kcat not installed"; exit 1; }
    name=$(job_name dup)
    start_run "$tmp/run.log" --workers 3 --name "$name" --metrics-json "$tmp/m.json"
    wait_for "$tmp/run.log" "epoch 1/[0-9]* *step" 60 || { cat "$tmp/run.log"; exit 1; }
    for o in 0 1 2; do
        kcat -C -b "$FSGD_BROKERS" -t "$name.grads" -p 0 -o "$o" -c 1 -e -q -f '%s' >"$tmp/f$o"
        test -s "$tmp/f$o"
    done
    for o in 0 1 2; do kcat -P -b "$FSGD_BROKERS" -t "$name.grads" -p 0 -H "fsgd.job=$name" "$tmp/f$o"; done
    echo "wrote 3 gradient frames of $name.grads again"
    finish_run "$tmp/run.log"
    want=3
fi
check_metrics "$tmp/m.json" "$ref" 0.005
dups=$(json_get "$tmp/m.json" messages.duplicates_dropped)
replays=$(json_get "$tmp/m.json" messages.rejected.replayed)
echo "duplicates dropped: $dups, replays: $replays"
[ $((dups + replays)) -ge "$want" ]
