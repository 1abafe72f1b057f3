#!/usr/bin/env bash
# Every compression strategy over 4 aggregator shards (issue 25): fsgd run
# --shards 4 ends within 0.01 test AUC of the same job unsharded (fastsgd
# within 0.002), or refuses
# with an error that names the strategy (gradiveq, mqgrad: strategy/FORMAT.md,
# "Sharded aggregators"). gTop-k runs with per-shard budgets and its
# selection feedback per shard.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
# the strategies' arithmetic does not depend on the broker; kafka_shards.sh runs on both
mock_only "every strategy sharded (the real pass runs kafka_shards.sh)"
head -n 8000 "$DATA/a9a" >"$tmp/rows"
args=(--data "$tmp/rows" --test "$DATA/a9a.t" --batch 64 --epochs 2 --quiet)
[ "$KAFKA_MODE" = real ] && args+=(--brokers "$FSGD_BROKERS")
auc() { "$FSGD" predict --model "$1" --data "$DATA/a9a.t" 2>&1 | sed -n 's/.*auc \([0-9.]*\).*/\1/p'; }
for codec in none fastsgd logquant topk sketchml efsign gtopk:k=24; do
    for s in 1 4; do
        "$FSGD" run "${args[@]}" --name "$(job_name "st$s")" --codec "$codec" --shards "$s" --out "$tmp/m$s.fsgd" \
            >"$tmp/r$s.log" 2>&1 || { tail "$tmp/r$s.log"; echo "FAIL: $codec at $s shards"; exit 1; }
    done
    a1=$(auc "$tmp/m1.fsgd") a4=$(auc "$tmp/m4.fsgd")
    echo "$codec: test auc unsharded $a1, 4 shards $a4"
    tol=0.01
    [ "$codec" = fastsgd ] && tol=0.002 # FastSGD, the project's first strategy: the issue's bound
    $PY -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) <= float(sys.argv[3]) else 1)" \
        "$a1" "$a4" "$tol" || { echo "FAIL: $codec: 4 shards end more than $tol from unsharded"; exit 1; }
done
for codec in gradiveq mqgrad; do
    rc=0
    "$FSGD" run "${args[@]}" --name "$(job_name "sr")" --codec "$codec" --shards 4 >"$tmp/ref.log" 2>&1 || rc=$?
    [ "$rc" != 0 ] && grep -q "$codec.*shard\|shard.*$codec" "$tmp/ref.log" ||
        { tail "$tmp/ref.log"; echo "FAIL: $codec at 4 shards: not refused with its name (status $rc)"; exit 1; }
    echo "$codec at 4 shards refused: $(grep -m1 -o "[^:]*$codec[^.]*" "$tmp/ref.log" | head -c 160)"
done
echo "PASS: kafka_shards_strategies"
