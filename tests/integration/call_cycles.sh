#!/usr/bin/env bash
# No call cycle among the files of a module's folder (tests/tools/call_cycles.py):
# a file calls only files below it, so each can be read, tested and changed
# with what is under it in mind (issue 43: distributed/ had one cycle of 13
# files, kafka/ bus.c <-> connect.c). Every folder of the library is held to
# it but trainer/serve/, whose http.c, serve.c and watch.c still call each
# other (left for its next change; the count is printed so it is seen).
set -euo pipefail
# sanitizers: leave out: a static check of the sources; it runs no fsgd code
# real-kafka: skip
cd "$(dirname "$0")/../.."
dirs=(common codec data strategy)
for d in trainer/*/; do
    d=${d%/}
    [ "$d" = trainer/serve ] && continue
    ls "$d"/*.c >/dev/null 2>&1 && dirs+=("$d")
done
python3 tests/tools/call_cycles.py "${dirs[@]}" || { echo "FAIL: call cycles above"; exit 1; }
python3 tests/tools/call_cycles.py --count trainer/serve
echo "ok: no call cycle among the files of ${dirs[*]}"
