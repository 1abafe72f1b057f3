#!/usr/bin/env bash
# No file destroyed by a path mistake (issue 27, part 2): every command, with
# each output path naming each of its inputs and each other output, is
# refused with exit 2 before it writes anything, and every file is byte for
# byte what it was. Paths are compared by identity, so each collision is
# tried spelled three ways: the same string, through "sub/..", and as a hard
# link. The names fsgd derives from the given ones (shard I's files, the
# previous checkpoint) are checked as the given ones. A checkpoint path
# holding a file fsgd did not make is never resumed from nor deleted,
# --fresh or not.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp"
FSGD=$(command -v "$FSGD" 2>/dev/null || echo "$OLDPWD/$FSGD")
mkdir sub

"$FSGD" gen --rows 400 --dim 30 --nnz 4 --seed 5 --quiet --out d.svm
"$FSGD" gen --rows 100 --dim 30 --nnz 4 --seed 6 --quiet --out t.svm
printf 'epochs: 1\nquiet: 1\n' >job.yaml
"$FSGD" train --data d.svm --epochs 1 --quiet --out m.fsgd --metrics-json run.json >/dev/null
cp run.json run.png # a run's JSON where plot's --out points
echo "notes, not a checkpoint" >notes.txt

sums() { find . -type f -print0 | sort -z | xargs -0 sha256sum; }
before=$(sums)
tried=0
# refused CMD...: exit 2, says the paths collide, and no file changed
refused() {
    local rc=0
    "$FSGD" "$@" >out.txt 2>&1 || rc=$?
    local msg; msg=$(cat out.txt); rm -f out.txt
    [ "$rc" -eq 2 ] || fail "fsgd $* exited $rc, expected 2: $msg"
    grep -q "the same file" <<<"$msg" || fail "fsgd $*: no 'the same file' in: $msg"
    [ "$(sums)" = "$before" ] || fail "fsgd $* changed a file: $msg"
    ls | grep -q '\.tmp\.' && fail "fsgd $* left a temporary file"
    tried=$((tried + 1))
}
# spellings of an existing file F that name it: F, sub/../F, and a hard link
# made for the call (removed after, so the sums hold)
each_spelling() {
    local f=$1; shift
    local cmd=("$@")
    refused "${cmd[@]/@/$f}"
    refused "${cmd[@]/@/sub/../$f}"
    ln "$f" "hl.$f"
    before=$(sums)
    refused "${cmd[@]/@/hl.$f}"
    rm "hl.$f"
    before=$(sums)
}

# --- fsgd train: outputs --out, --metrics-json, --cache; inputs --data, --test, job file
for o in --out --metrics-json --cache; do
    for i in d.svm t.svm job.yaml; do
        each_spelling "$i" train job.yaml --data d.svm --test t.svm "$o" @
    done
done
refused train --data d.svm --out x.bin --metrics-json sub/../x.bin
refused train --data d.svm --out x.bin --cache x.bin
refused train --data d.svm --metrics-json x.bin --cache ./x.bin
[ ! -e x.bin ] || fail "train wrote x.bin"

# --- predict: --out against --model and --data
each_spelling m.fsgd predict --model m.fsgd --data d.svm --out @
each_spelling d.svm predict --model m.fsgd --data d.svm --out @

# --- export: --out against --model
each_spelling m.fsgd export --model m.fsgd --format liblinear --out @

# --- gen: --out against --weights-out (both absent: same directory and name)
refused gen --rows 10 --out w.txt --weights-out ./w.txt
each_spelling d.svm gen --rows 10 --out @ --weights-out sub/../d.svm

# --- model assemble: --out against --input
each_spelling m.fsgd model assemble --input m.fsgd --out @

# --- plot: --out against a RUN.json; --keep-script's files against one
each_spelling run.png plot run.png --out @
mkdir ks && cp run.json ks/plot.gp && before=$(sums)
refused plot ks/plot.gp --out p.png --keep-script ks

# --- run: outputs --out, --metrics-json, --checkpoint (default OUT.ckpt);
#     inputs --data, --test, job file. Refused before any broker starts.
for o in --out --metrics-json --checkpoint; do
    for i in d.svm t.svm job.yaml; do
        each_spelling "$i" run job.yaml --data d.svm --test t.svm "$o" @
    done
done
refused run --data d.svm --out o.fsgd --metrics-json o.fsgd
refused run --data d.svm --out o.fsgd --checkpoint sub/../o.fsgd
refused run --data d.svm --metrics-json o.json --checkpoint o.json
cp d.svm d.svm.ckpt && before=$(sums)
refused run --data d.svm.ckpt --out d.svm # the default checkpoint OUT.ckpt is the data
rm d.svm.ckpt && before=$(sums)

# --- the names fsgd derives (issue 42, items 5-8): shard I's metrics JSON
#     and checkpoint (X.shardI), each shard's previous checkpoint (X.prev,
#     X.shardI.prev), and --init, each spelled three ways
cp t.svm t2.svm.shard1 && cp t.svm tt.prev && cp t.svm o.fsgd.ckpt.shard1.prev && before=$(sums)
each_spelling t2.svm.shard1 run --data d.svm --test @ --shards 2 --epochs 1 --metrics-json t2.svm
each_spelling tt.prev run --data d.svm --test @ --shards 2 --epochs 1 --checkpoint tt
each_spelling o.fsgd.ckpt.shard1.prev run --data d.svm --test @ --shards 2 --epochs 1 --out o.fsgd
each_spelling t2.svm.shard1 run --data d.svm --shards 2 --epochs 1 --checkpoint t2.svm --test @
refused run --data d.svm --shards 2 --epochs 1 --checkpoint cc --out cc.prev
refused run --data d.svm --shards 3 --epochs 1 --checkpoint cc --metrics-json cc.shard2.prev
each_spelling m.fsgd run --data d.svm --init m.fsgd --out @
each_spelling m.fsgd train --data d.svm --init m.fsgd --out @
each_spelling t2.svm.shard1 aggregator --brokers 127.0.0.1:1 --shard 1/2 --metrics-json t2.svm --test @
each_spelling tt.prev aggregator --brokers 127.0.0.1:1 --shard 0/2 --checkpoint tt --test @
rm t2.svm.shard1 tt.prev o.fsgd.ckpt.shard1.prev && before=$(sums)

# --- aggregator: the same outputs against --test, --data, job file
for o in --out --metrics-json --checkpoint; do
    for i in t.svm job.yaml; do
        each_spelling "$i" aggregator job.yaml --brokers 127.0.0.1:1 --test t.svm "$o" @
    done
done
refused aggregator --brokers 127.0.0.1:1 --out a.fsgd --checkpoint a.fsgd

# --- a checkpoint path holding another kind of file: neither resumed from
#     nor deleted, and the error does not advise --fresh
for flag in "" --fresh --resume; do
    rc=0
    "$FSGD" run --data d.svm --epochs 1 --checkpoint notes.txt $flag >out.txt 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || fail "run --checkpoint notes.txt $flag exited $rc: $(cat out.txt)"
    grep -q "not an fsgd checkpoint" out.txt || fail "run --checkpoint notes.txt $flag: $(cat out.txt)"
    grep -q -- "--fresh" out.txt && fail "run --checkpoint notes.txt $flag advises --fresh: $(cat out.txt)"
    rm out.txt
    [ "$(cat notes.txt)" = "notes, not a checkpoint" ] || fail "run $flag changed notes.txt"
done
[ "$(sums)" = "$before" ] || fail "a file changed"
echo "ok ($tried refused commands, every file unchanged)"
