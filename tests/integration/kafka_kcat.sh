#!/usr/bin/env bash
# An outside client interoperates: rows produced with kcat (one LIBSVM line
# per message) train a model; the model topic read with kcat reassembles with
# `fsgd model assemble` into the same model file, byte for byte, as the one
# the aggregator wrote (and so does reading the topic directly).
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd kcat
kc=$(job_name kc)
kafka_cluster "$kc" 6
echo "$KAFKA_MODE cluster at $brokers"
head -n 8000 "$DATA/a9a" >"$tmp/rows"
kcat -P -b "$brokers" -t "$kc.data" -l "$tmp/rows"
n=$(kcat -C -b "$brokers" -t "$kc.data" -o beginning -e -q -f 'x\n' | wc -l)
echo "kcat wrote $n rows"
[ "$n" -eq 8000 ]
"$FSGD" run --no-produce --brokers "$brokers" --name "$kc" --workers 2 --test "$DATA/a9a.t" --batch 128 --epochs 2 \
    --job-key-file "$FSGD_JOB_KEY" --unsigned-rows \
    --out "$tmp/model.fsgd" --metrics-json "$tmp/m.json" >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; exit 1; }
rows=$(json_get "$tmp/m.json" dataset_rows)
auc=$(json_get "$tmp/m.json" test.auc)
echo "trained on $rows rows from kcat, test auc $auc"
[ "$rows" -eq 8000 ]
awk -v a="$auc" 'BEGIN{exit !(a > 0.85)}'
kcat -C -b "$brokers" -t "$kc.model" -o beginning -e -q -f '%s' >"$tmp/model.stream"
"$FSGD" model assemble --input "$tmp/model.stream" --name "$kc" --out "$tmp/assembled.fsgd" --job-key-file "$FSGD_JOB_KEY"
cmp "$tmp/model.fsgd" "$tmp/assembled.fsgd"
"$FSGD" model assemble --brokers "$brokers" --name "$kc" --out "$tmp/direct.fsgd" --job-key-file "$FSGD_JOB_KEY"
cmp "$tmp/model.fsgd" "$tmp/direct.fsgd"
echo "kcat-read model topic reassembles into the identical model file"
