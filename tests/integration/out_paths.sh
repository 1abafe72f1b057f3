#!/usr/bin/env bash
# Output paths (issue 12, findings 1, 5 and 8): every command that writes a
# file refuses a target that is a device, FIFO, directory or symbolic link
# and leaves it as it was; an output that cannot be written fails before any
# work (no data is read, no broker started); predict keeps an existing --out
# when the input is bad; a killed write leaves no temporary file; export of a
# model too wide for LIBLINEAR fails from the header, before allocating it.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# expect STATUS PATTERN CMD...: the command exits with STATUS and says PATTERN
expect() {
    local want=$1 pat=$2 rc=0
    shift 2
    "$@" >"$tmp/out.txt" 2>&1 || rc=$?
    [ "$rc" -eq "$want" ] || fail "$* exited $rc, expected $want: $(cat "$tmp/out.txt")"
    grep -q -- "$pat" "$tmp/out.txt" || fail "$*: no '$pat' in: $(cat "$tmp/out.txt")"
}
no_tmp_files() { ! ls "$tmp"/* 2>/dev/null | grep -q '\.tmp\.' || fail "temporary files left: $(ls "$tmp")"; }

"$FSGD" gen --rows 3000 --dim 40 --nnz 5 --seed 3 --quiet --out "$tmp/d.svm"
mkfifo "$tmp/fifo"
echo keep >"$tmp/target.txt"
ln -s "$tmp/target.txt" "$tmp/link"
mkdir "$tmp/dir"
T=(train --data "$tmp/d.svm" --epochs 1 --quiet)

# 1. train --out / --metrics-json onto things that are not regular files
expect 2 "is a FIFO, not a regular file: refusing to replace it" "$FSGD" "${T[@]}" --out "$tmp/fifo"
expect 2 "is a symbolic link: refusing to write through it" "$FSGD" "${T[@]}" --out "$tmp/link"
expect 2 "is a directory" "$FSGD" "${T[@]}" --metrics-json "$tmp/dir"
[ -p "$tmp/fifo" ] && [ -L "$tmp/link" ] && [ "$(cat "$tmp/target.txt")" = keep ] || fail "a target was replaced"
if [ "$(id -u)" -eq 0 ]; then
    # the issue's case: a device node where --out points
    mknod -m 666 "$tmp/nulldev" c 1 3
    expect 2 "is a character device" "$FSGD" "${T[@]}" --out "$tmp/nulldev"
    [ -c "$tmp/nulldev" ] || fail "the device node was replaced"
fi
expect 2 "is a character device" "$FSGD" "${T[@]}" --metrics-json /dev/null

# 2. unwritable outputs fail before the data is even read: a missing data
#    file is not what they report
expect 2 "output '/proc/x': cannot create files in '/proc'" "$FSGD" train --data "$tmp/missing.svm" --out /proc/x
expect 2 "output 'nodir/x': directory 'nodir'" "$FSGD" train --data "$tmp/missing.svm" --metrics-json nodir/x
# ... and fsgd run before it starts a broker or a process
expect 2 "run: output '/proc/x'" "$FSGD" run --data "$tmp/d.svm" --out /proc/x
grep -q "embedded Kafka cluster" "$tmp/out.txt" && fail "fsgd run started a broker before checking --out"
expect 2 "run: output '$tmp/fifo'" "$FSGD" run --data "$tmp/d.svm" --checkpoint "$tmp/fifo"
expect 2 "run: output 'nodir/m.json'" "$FSGD" run --data "$tmp/d.svm" --metrics-json nodir/m.json

# 3. the other writers: export, predict, gen, model assemble
"$FSGD" "${T[@]}" --out "$tmp/m.fsgd" >/dev/null
expect 2 "is a symbolic link" "$FSGD" export --model "$tmp/m.fsgd" --format liblinear --out "$tmp/link"
expect 2 "is a FIFO" "$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/d.svm" --out "$tmp/fifo"
expect 2 "is a FIFO" "$FSGD" gen --rows 10 --out "$tmp/fifo"
expect 2 "is a directory" "$FSGD" model assemble --input "$tmp/m.fsgd" --out "$tmp/dir"
[ -p "$tmp/fifo" ] && [ "$(cat "$tmp/target.txt")" = keep ] || fail "a target was replaced"
no_tmp_files

# 4. predict: a bad row half way leaves an existing --out as it was
echo "previous scores" >"$tmp/scores.txt"
{ head -n 100 "$tmp/d.svm"; echo "1 7:x"; } >"$tmp/bad.svm"
expect 3 "bad.svm:101:" "$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/bad.svm" --out "$tmp/scores.txt"
[ "$(cat "$tmp/scores.txt")" = "previous scores" ] || fail "predict emptied --out on a parse error"
"$FSGD" predict --model "$tmp/m.fsgd" --data "$tmp/d.svm" --out "$tmp/scores.txt" --quiet
[ "$(wc -l <"$tmp/scores.txt")" -eq 3000 ] || fail "predict did not write its scores"
no_tmp_files

# 5. a write killed by SIGTERM leaves no temporary file: predict reading
#    stdin from a FIFO held open here has its temporary --out open meanwhile
mkfifo "$tmp/in"
"$FSGD" predict --model "$tmp/m.fsgd" --data - --out "$tmp/killed.txt" <"$tmp/in" &
pid=$!
exec 3>"$tmp/in"
head -n 10 "$tmp/d.svm" >&3
for _ in $(seq 100); do ls "$tmp" | grep -q '^killed.txt.tmp.' && break; sleep 0.1; done
ls "$tmp" | grep -q '^killed.txt.tmp.' || fail "predict never opened its temporary file"
kill -TERM $pid
rc=0
wait $pid || rc=$?
exec 3>&-
[ $rc -eq 143 ] || fail "predict killed by SIGTERM exited $rc, expected 143"
no_tmp_files
[ ! -e "$tmp/killed.txt" ] || fail "a killed predict left --out"

# 6. export of a 2^32-dimension model: refused from the header; under a 1 GiB
#    address space limit an attempt to allocate its 16 GiB would fail otherwise
/usr/bin/python3 - "$tmp/wide.fsgd" <<'PY'
import struct, sys
def crc32c(b):
    c = 0xffffffff
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
    return c ^ 0xffffffff
h = b"FSGDMODL" + struct.pack("<HBBIQQff", 1, 1, 0, 0, 1 << 32, 1, 0.0, 0.0)
h += struct.pack("<I", crc32c(h))
body = struct.pack("<If", (1 << 32) - 1, 0.5)
open(sys.argv[1], "wb").write(h + body + struct.pack("<I", crc32c(body)))
PY
# (AddressSanitizer reserves terabytes of shadow memory: no limit there; it
# fails a huge allocation by itself)
limit="ulimit -v 1048576;"
ldd "$FSGD" >"$tmp/ldd.txt" 2>&1 || true
grep -q libasan "$tmp/ldd.txt" && limit=
expect 3 "dim 4294967296 at byte 16 exceeds the limit 2147483647" \
    bash -c "$limit exec '$FSGD' export --model '$tmp/wide.fsgd' --format liblinear --out '$tmp/wide.txt'"
[ ! -e "$tmp/wide.txt" ] || fail "export wrote a file"
echo ok
