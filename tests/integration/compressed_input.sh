#!/usr/bin/env bash
# gzip and zstd input, told by the magic bytes: fsgd train, predict and run
# (its producer) read a .gz/.zst LIBSVM, Criteo or VW file as the text it holds
# (the same model byte for byte, the same scores); a compressed stream on
# stdin too. A truncated or corrupt file stops each command with an error
# naming the file and the byte offset, exit 3, and no output file.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v gzip >/dev/null || { echo "skip: no gzip"; exit 77; }

"$FSGD" gen --rows 6000 --dim 2000 --nnz 10 --seed 3 --quiet --out "$tmp/all.svm"
head -n 5000 "$tmp/all.svm" > "$tmp/train.svm"
tail -n 1000 "$tmp/all.svm" > "$tmp/test.svm"
gzip -c "$tmp/train.svm" > "$tmp/train.svm.gz"
gzip -c "$tmp/test.svm" > "$tmp/test.svm.gz"
opts=(--epochs 2 --quiet --seed 1 --threads 2)
"$FSGD" train --data "$tmp/train.svm" --test "$tmp/test.svm" "${opts[@]}" --out "$tmp/plain.fsgd" > /dev/null
"$FSGD" train --data "$tmp/train.svm.gz" --test "$tmp/test.svm.gz" "${opts[@]}" --out "$tmp/gz.fsgd" > /dev/null
cmp -s "$tmp/plain.fsgd" "$tmp/gz.fsgd" || fail "gzip input trained another model"
gzip -c "$tmp/train.svm" | "$FSGD" train --data - --test "$tmp/test.svm" "${opts[@]}" --out "$tmp/stdin.fsgd" > /dev/null
test -s "$tmp/stdin.fsgd" || fail "gzip on stdin: no model"
if command -v zstd >/dev/null; then
    zstd -q -c "$tmp/train.svm" > "$tmp/train.svm.zst"
    "$FSGD" train --data "$tmp/train.svm.zst" --test "$tmp/test.svm" "${opts[@]}" --out "$tmp/zst.fsgd" > /dev/null
    cmp -s "$tmp/plain.fsgd" "$tmp/zst.fsgd" || fail "zstd input trained another model"
fi
"$FSGD" predict --model "$tmp/plain.fsgd" --data "$tmp/test.svm" --out "$tmp/p1.txt" --quiet
"$FSGD" predict --model "$tmp/plain.fsgd" --data "$tmp/test.svm.gz" --out "$tmp/p2.txt" --quiet
cmp -s "$tmp/p1.txt" "$tmp/p2.txt" || fail "predict scored the gzip file differently"

# Criteo-shaped TSV, gzip: the delimited reader.
"$FSGD" gen --format criteo --rows 3000 --seed 5 --quiet --out "$tmp/c.tsv"
gzip -c "$tmp/c.tsv" > "$tmp/c.tsv.gz"
"$FSGD" train --data "$tmp/c.tsv" --format criteo --hash-bits 16 "${opts[@]}" --out "$tmp/c1.fsgd" > /dev/null
"$FSGD" train --data "$tmp/c.tsv.gz" --format criteo --hash-bits 16 "${opts[@]}" --out "$tmp/c2.fsgd" > /dev/null
cmp -s "$tmp/c1.fsgd" "$tmp/c2.fsgd" || fail "criteo gzip input trained another model"

# VW text, gzip and zstd: the VW reader, crosses built from the text it holds; a
# truncated VW stream stops with the byte offset (exit 3, no model).
awk '{ printf "%s |a", $1; for (i = 2; i <= NF; i++) { split($i, p, ":"); printf " f%s", p[1] } print "" }' \
    "$tmp/train.svm" > "$tmp/t.vw"
gzip -c "$tmp/t.vw" > "$tmp/t.vw.gz"
vo=(--format vw -q aa --bits 16 --epochs 1 --seed 1 --test-fraction 0 --quiet)
"$FSGD" train --data "$tmp/t.vw" "${vo[@]}" --out "$tmp/v1.fsgd" > /dev/null
"$FSGD" train --data "$tmp/t.vw.gz" "${vo[@]}" --out "$tmp/v2.fsgd" > /dev/null
cmp -s "$tmp/v1.fsgd" "$tmp/v2.fsgd" || fail "vw gzip input trained another model"
if command -v zstd >/dev/null; then
    zstd -q -c "$tmp/t.vw" > "$tmp/t.vw.zst"
    "$FSGD" train --data "$tmp/t.vw.zst" "${vo[@]}" --out "$tmp/v3.fsgd" > /dev/null
    cmp -s "$tmp/v1.fsgd" "$tmp/v3.fsgd" || fail "vw zstd input trained another model"
fi
vsize=$(stat -c %s "$tmp/t.vw.gz")
head -c $((vsize / 2)) "$tmp/t.vw.gz" > "$tmp/tcut.vw.gz"
rc=0; "$FSGD" train --data "$tmp/tcut.vw.gz" "${vo[@]}" --out "$tmp/vcut.fsgd" 2> "$tmp/err.txt" || rc=$?
[ $rc -eq 3 ] && grep -q "tcut.vw.gz: truncated gzip stream: the file ends at byte $((vsize / 2)) " "$tmp/err.txt" &&
    [ ! -e "$tmp/vcut.fsgd" ] || fail "truncated vw.gz: exit $rc: $(cat "$tmp/err.txt")"

# Damaged files: exit 3, the file and byte offset named, nothing written.
size=$(stat -c %s "$tmp/train.svm.gz")
head -c $((size / 2)) "$tmp/train.svm.gz" > "$tmp/cut.gz"
cp "$tmp/train.svm.gz" "$tmp/bad.gz"
printf '\377\377\377\377\377\377\377\377' | dd of="$tmp/bad.gz" bs=1 seek=$((size / 3)) conv=notrunc 2>/dev/null
for f in cut bad; do
    for cmd in "train --data $tmp/$f.gz --test $tmp/test.svm --quiet --out $tmp/$f.fsgd" \
        "predict --model $tmp/plain.fsgd --data $tmp/$f.gz --out $tmp/$f.txt --quiet" \
        "run --data $tmp/$f.gz --test $tmp/test.svm --workers 1 --epochs 1 --quiet --out $tmp/$f.run.fsgd"; do
        rc=0
        # shellcheck disable=SC2086
        "$FSGD" $cmd 2> "$tmp/err.txt" || rc=$?
        [ $rc -eq 3 ] || fail "$cmd: exit $rc: $(cat "$tmp/err.txt")"
        if [ $f = cut ]; then
            grep -q "$f.gz: truncated gzip stream: the file ends at byte $((size / 2)) " "$tmp/err.txt" ||
                fail "$cmd: $(cat "$tmp/err.txt")"
        else
            grep -q "$f.gz: corrupt gzip stream at byte [0-9]" "$tmp/err.txt" || fail "$cmd: $(cat "$tmp/err.txt")"
        fi
    done
    [ ! -e "$tmp/$f.fsgd" ] && [ ! -e "$tmp/$f.txt" ] && [ ! -e "$tmp/$f.run.fsgd" ] || fail "$f: an output was written"
done
echo "compressed input: gzip, zstd, stdin, criteo, vw; damaged files refused"
