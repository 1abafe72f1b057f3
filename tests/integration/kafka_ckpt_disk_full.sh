#!/usr/bin/env bash
# Disk full under a sharded job's checkpoint (issue 42, item 2): the file
# system of --checkpoint (a 64 KiB tmpfs in a private mount namespace) fills
# mid-run. The job stops with status 74, and every shard's last checkpoint
# is still there: a new one is written and synced before the old one is
# retired to .prev, never the other way round. Once space is freed,
# --resume ends the job with every row once per epoch.
set -euo pipefail
if [ -z "${FSGD_IN_MOUNT_NS:-}" ]; then
    # a tmpfs of its own: root, or an unprivileged user namespace
    if unshare -rm true 2>/dev/null; then
        FSGD_IN_MOUNT_NS=1 exec unshare -rm bash "$0" "$@"
    fi
    echo "SKIP: cannot make a mount namespace (unshare -rm) for a small tmpfs"
    exit 77
fi
. "$(dirname "$0")/lib/kafka.bash"
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with status $?"' ERR
mock_only "a small file system for the checkpoint is mounted here"
mkdir "$tmp/mnt"
mount -t tmpfs -o size=64k tmpfs "$tmp/mnt" 2>/dev/null || skip "cannot mount a tmpfs here"
trap 'umount "$tmp/mnt" 2>/dev/null || true; cleanup' EXIT
args=(--data "$DATA/a9a" --test "$DATA/a9a.t" --shards 2 --batch 64 --epochs 2 --staleness 0 --name ckfull
    --checkpoint "$tmp/mnt/c.ckpt")

"$FSGD" run "${args[@]}" >"$tmp/full.log" 2>&1 &
RUN_PID=$!
# full as soon as both shards have a checkpoint (renaming it to .prev first
# would free no space then: the new one cannot be written)
for _ in $(seq 6000); do [ -f "$tmp/mnt/c.ckpt.shard1" ] && [ -f "$tmp/mnt/c.ckpt" ] && break; sleep 0.01; done
[ -f "$tmp/mnt/c.ckpt.shard1" ] || { tail "$tmp/full.log"; echo "FAIL: no checkpoint"; exit 1; }
dd if=/dev/zero of="$tmp/mnt/fill" bs=1k status=none 2>/dev/null || true # until the disk is full
rc=0
wait "$RUN_PID" || rc=$?
RUN_PID=
[ "$rc" = 74 ] || { tail -n 20 "$tmp/full.log"; echo "FAIL: disk full under the checkpoint: status $rc, not 74"; exit 1; }
for f in c.ckpt c.ckpt.shard1; do
    [ -f "$tmp/mnt/$f" ] || { ls -l "$tmp/mnt"; echo "FAIL: disk full: $f is gone (renamed to .prev before the new one was written)"; exit 1; }
done
ls "$tmp/mnt" | grep -q '\.tmp\.' && { ls -l "$tmp/mnt"; echo "FAIL: a temporary file was left"; exit 1; }
echo "PASS: disk full: status 74, both shards' checkpoints kept ($(ls "$tmp/mnt" | grep -v fill | tr '\n' ' '))"

rm "$tmp/mnt/fill"
rc=0
"$FSGD" run "${args[@]}" --resume --metrics-json "$tmp/r.json" >"$tmp/r.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || { tail -n 20 "$tmp/r.log"; echo "FAIL: --resume after the disk was freed: status $rc"; exit 1; }
$PY - "$tmp/r.json" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))
assert k["rows_applied"] == 2 * k["dataset_rows"], (k["rows_applied"], k["dataset_rows"])
assert k["resumed_from_step"] > 0, k["resumed_from_step"]
print("PASS: resumed from step %d: rows %d = 2 x %d, test auc %.6f" % (
    k["resumed_from_step"], k["rows_applied"], k["dataset_rows"], k["test"]["auc"]))
PY
echo "ok: kafka_ckpt_disk_full"
