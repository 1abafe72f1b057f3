#!/usr/bin/env bash
# Outside clients on both ends of a job, written from trainer/KAFKA_FORMAT.md
# with the confluent-kafka Python client (build/venv, scripts/install-peers.sh),
# not fsgd's code: a producer writes a9a's rows into NAME.data of the embedded
# broker (or the real one, FSGD_KAFKA=real), `fsgd run --no-produce` trains on them with 3 workers, and a reader
# decodes NAME.model (frames, CRC32C, chunks, snapshots, packed deltas) and
# rebuilds the weights: the FINAL snapshot must equal the model file fsgd wrote
# bit for bit, and at every snapshot the weights rebuilt from the previous one
# plus the deltas since must equal `fsgd model assemble --partial` of the topic
# up to there. Every epoch must have applied exactly the rows the producer wrote.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
lib=$(cd "$(dirname "$0")/lib" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${FSGD_VENV:-$root/build/venv}
VPY=$VENV/bin/python
[ -x "$VPY" ] && "$VPY" -c 'import confluent_kafka' 2>/dev/null ||
    { echo "skipped: $VENV lacks confluent-kafka (run scripts/install-peers.sh)"; exit 77; }
EPOCHS=3

# The reader's LZ4 and bit-packed keys paths against fsgd's C encoder (a job
# this small rarely writes LZ4 values).
"$VPY" "$lib/kafka_model_reader.py" selftest "$root/tests/fuzz/corpus/wire"

oc=$(job_name oc)
kafka_cluster "$oc" 6
echo "$KAFKA_MODE cluster at $brokers"

out=$("$VPY" "$lib/kafka_outside_producer.py" "$brokers" "$oc.data" "$DATA/a9a")
echo "$out"
written=$(sed -n 's/^produced \([0-9]*\) rows.*/\1/p' <<<"$out")
[ -n "$written" ]

"$FSGD" run --no-produce --brokers "$brokers" --name "$oc" --workers 3 --test "$DATA/a9a.t" --epochs $EPOCHS \
    --job-key-file "$FSGD_JOB_KEY" \
    --out "$tmp/model.fsgd" --metrics-json "$tmp/m.json" >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; exit 1; }

"$PY" - "$tmp/m.json" "$written" "$EPOCHS" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1])); written, epochs = int(sys.argv[2]), int(sys.argv[3])
per = m["rows_per_epoch"]
print("producer wrote %d rows; fsgd: dataset_rows %d, rows_per_epoch %s, workers %s, test auc %.4f"
      % (written, m["dataset_rows"], per, m["workers"], m["test"]["auc"]))
ok = m["dataset_rows"] == written and len(per) == epochs and all(r == written for r in per)
sys.exit(0 if ok else 1)
PYEOF

"$VPY" "$lib/kafka_model_reader.py" read "$brokers" "$oc" "$tmp/model.fsgd" "$FSGD"
