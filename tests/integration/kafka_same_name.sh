#!/usr/bin/env bash
# Two jobs of the same name started at once on a real broker (issue 27, part
# 4): when both write the data, both stop (exit 4); when one finds the name
# already used it is refused (exit 2) before writing, and the other may
# finish; a job whose producer was done before the other's rows came finds
# them, signed with the other job's key, when it reads the topic (exit 3).
# Never both succeed, and no message blames the embedded cluster: it names
# the other writer or the used name.
set -euo pipefail
. "$(dirname "$0")/lib/kafka.bash"
real_only "two jobs share one real broker; the embedded cluster is one per fsgd run"
name=$(job_name twin)
head -n 6000 "$DATA/a9a" >"$tmp/rows"
args=(run --brokers "$FSGD_BROKERS" --name "$name" --data "$tmp/rows" --workers 1 --epochs 1 --quiet)
rc1=0 rc2=0
"$FSGD" "${args[@]}" >"$tmp/j1.log" 2>&1 &
p1=$!
"$FSGD" "${args[@]}" >"$tmp/j2.log" 2>&1 || rc2=$?
wait $p1 || rc1=$?
cat "$tmp/j1.log" "$tmp/j2.log" | grep "fsgd: run:" || true
[ $rc1 -ne 0 ] || [ $rc2 -ne 0 ] || { echo "both jobs of one name succeeded"; exit 1; }
for i in 1 2; do
    rc=$([ $i = 1 ] && echo $rc1 || echo $rc2)
    log=$tmp/j$i.log
    [ "$rc" -eq 0 ] && continue
    [ "$rc" -eq 4 ] || [ "$rc" -eq 2 ] || [ "$rc" -eq 3 ] || { echo "job $i exited $rc, expected 4, 3 or 2"; cat "$log"; exit 1; }
    grep -q "embedded cluster" "$log" && { echo "job $i blames the embedded cluster"; cat "$log"; exit 1; }
    grep -q "another job of the same name\|was used before on these brokers" "$log" ||
        { echo "job $i does not name the cause"; cat "$log"; exit 1; }
done
echo ok
