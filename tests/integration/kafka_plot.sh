#!/usr/bin/env bash
# fsgd plot on the metrics of two real 3-worker runs (codec none and
# fastsgd) writes a PNG and an SVG of the requested sizes: both are valid
# images of that size (lib/imgcheck.py: PNG chunks, CRCs, IHDR, image data;
# SVG root width/height), and the SVG names both runs in its legends.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
needs_cmd gnuplot
IMG=("$PY" "$(dirname "$0")/lib/imgcheck.py")
for codec in none fastsgd; do
    start_run "$tmp/$codec.log" --workers 3 --codec "$codec" --metrics-json "$tmp/$codec.json"
    finish_run "$tmp/$codec.log"
done
"$FSGD" plot "$tmp/none.json" "$tmp/fastsgd.json" --out "$tmp/runs.png" --size 1000x700
"$FSGD" plot "$tmp/none.json" "$tmp/fastsgd.json" --out "$tmp/runs.svg" --size 1100x800 --title "none against fastsgd"
"${IMG[@]}" "$tmp/runs.png" 1000 700
"${IMG[@]}" "$tmp/runs.svg" 1100 800
for label in "none, 3 workers" "fastsgd, 3 workers" "none against fastsgd" "test AUC per epoch" "milliseconds per step"; do
    grep -q "$label" "$tmp/runs.svg" || { echo "the SVG does not show '$label'"; exit 1; }
done
# what the picture shows, in numbers: fastsgd sent fewer bytes for the same epochs
"$PY" - "$tmp/none.json" "$tmp/fastsgd.json" <<'PYEOF'
import json, sys
n, f = (json.load(open(p)) for p in sys.argv[1:])
sent = lambda m: (m["trace"]["bytes_up"][-1] + m["trace"]["bytes_down"][-1]) / 1e6
print("MB sent: none %.2f, fastsgd %.2f; final loss (moving average) none %.4f, fastsgd %.4f; test auc %.4f, %.4f" %
      (sent(n), sent(f), n["trace"]["loss"][-1], f["trace"]["loss"][-1], n["test"]["auc"], f["test"]["auc"]))
assert sent(f) < sent(n), "fastsgd did not send fewer bytes than none"
PYEOF
