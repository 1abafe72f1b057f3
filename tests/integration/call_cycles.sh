#!/usr/bin/env bash
# No call cycle among the files of a module's folder (tests/tools/call_cycles.py):
# a file calls only files below it, so each can be read, tested and changed
# with what is under it in mind (issue 43: distributed/ had one cycle of 13
# files, kafka/ bus.c <-> connect.c; issue 38: serve/'s http.c, serve.c and
# watch.c). Every folder of the library is held to it.
set -euo pipefail
# sanitizers: leave out: a static check of the sources; it runs no fsgd code
# real-kafka: skip
cd "$(dirname "$0")/../.."
dirs=(common codec data strategy)
for d in trainer/*/; do
    d=${d%/}
    ls "$d"/*.c >/dev/null 2>&1 && dirs+=("$d")
done
python3 tests/tools/call_cycles.py "${dirs[@]}" || { echo "FAIL: call cycles above"; exit 1; }
echo "ok: no call cycle among the files of ${dirs[*]}"
