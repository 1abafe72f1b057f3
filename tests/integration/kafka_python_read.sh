#!/usr/bin/env bash
# fsgd.kafka.read_model (python/) on the suite's real Apache Kafka broker:
# python/tests/test_kafka.py with FSGD_BROKERS, so the model a job leaves in
# its topic on a real broker reads back equal to the aggregator's file.
# On the embedded cluster tests/integration/python_pkg.sh runs the same test.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
real_only "python_pkg.sh runs python/tests/test_kafka.py on the embedded cluster"
root=$(cd "$(dirname "$0")/../.." && pwd)
lib=$(cd "$(dirname "$FSGD")/.." && pwd)/lib/libfsgd.so
[ -f "$lib" ] || { echo "FAIL: $lib not built (make shlib)"; exit 1; }
"$PY" -c 'import numpy, pytest' 2>/dev/null || skip "Debian's python3 lacks numpy/pytest (apt-get install python3-sklearn python3-pytest)"
run=()
if nm -D "$lib" | grep ' __asan_init' >/dev/null; then
    run=(env "LD_PRELOAD=$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0)
fi
cd "$root"
FSGD_LIB=$lib PYTHONPATH=$root/python FSGD=$root/$FSGD FSGD_BROKERS=$FSGD_BROKERS ${run[@]+"${run[@]}"} \
    "$PY" -m pytest -q -p no:cacheprovider python/tests/test_kafka.py
