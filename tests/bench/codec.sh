#!/usr/bin/env bash
# Codec benchmark, short form: fsgd bench codec --quick (a9a and a 10^6-dim
# synthetic gradient, two batch sizes, every codec, the l sweep). The full
# run is `fsgd bench codec` (four datasets, 10^6..10^8 dims, 0.1%..10%).
set -eu
FSGD=${FSGD:-bin/fsgd}
out=$("$FSGD" bench codec --quick)
echo "$out"
# Sanity: every codec produced a line, and FastSGD compresses.
for c in none:lz4=0 none:lz4=1 fastsgd:b=1.1 logquant topk efsign sketchml source=kdd12 codec_l; do
    grep -q "$c" <<<"$out" || { echo "codec.sh: no result for $c" >&2; exit 1; }
done
