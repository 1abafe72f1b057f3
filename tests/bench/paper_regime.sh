#!/usr/bin/env bash
# The FastSGD paper's own regime (issue 26; paper §4, Tables IV and V, Figs. 4b
# and 7): KDD12-shaped rows from `fsgd gen` (Zipf, ~30 nonzeros a row), a 70/30
# train/test split, batches of 10% of the training rows split over the
# workers, synchronous steps (--staleness 0: the paper's BSP, and the parts
# of a step then add up to it), a sharded aggregator, a real Apache Kafka cluster of 3 brokers
# (tests/kafka/broker.sh), links emulated with network namespaces + tc as in
# tests/bench/dist_net.sh (1 Gbit/s, 100 Mbit/s) and loopback as the bound.
# One command; every size is an environment parameter:
#
#   PR_DIM (2^26)        features of the main table's runs
#   PR_ROWS (4000000)    training rows; PR_TEST_ROWS (3/7 of them: 70/30)
#   PR_NNZ (30)          mean nonzeros a row
#   PR_BATCH_FRAC (0.1)  rows a step, as a fraction of the training rows, split over the workers
#   PR_WORKERS (4), PR_SHARDS (2), PR_EPOCHS (2: the last epoch is timed; the
#                        first also loads and caches the data, as RDD.cache)
#   PR_CODECS ("none fastsgd topk sketchml logquant"; efsign and gtopk:k=N run
#                        sharded too, untried here at this size)
#   PR_LINKS ("loopback 1gbit 100mbit")
#   PR_FIG7_DIMS ("65536 1048576 16777216 67108864"), PR_FIG7_CODECS ("none
#                        fastsgd"), PR_FIG7_LINK (1gbit): Fig. 7, the same rows
#                        at each feature count ("" skips it)
#                        Each Fig. 7 dimension (and the main one) is also
#                        timed in one process (fsgd train, --threads = workers)
#                        to give the cost model its per-key costs there
#                        (PR_CALIB_REPEATS (3) times; the median of each figure)
#   PR_BROKERS (3), PR_REPLICATION (0: min(3, brokers)), PR_LR (0.01)
#   PR_REPEATS (1)       passes of the main table, interleaved; the report takes
#                        each configuration's median epoch (a shared machine's
#                        load slows single runs 3x at times)
#   PR_KEEP (unset)      a directory to copy the runs' metrics into
#
# Printed (lib/paper_regime_report.py, lib/cost_model.py): `bench paper_run`
# per run, `bench paper_table4` (seconds per epoch: gradient, encode, decode,
# communication, model updating; message bytes a step; AUC) beside the
# paper's LR rows, `bench paper_keys` (bits per key of fastsgd and sketchml
# against the entropy floor of the same keys and SketchML's own coder),
# `bench paper_fig7`, `bench paper_calib` (the single-process per-key costs at
# each Fig. 7 dimension), `bench paper_alphabeta` (α, β of each emulated link,
# measured by a TCP ping-pong), `bench paper_model_check` (the cost model
# against every run) and `bench paper_model` (its extrapolation to 12, 100 and
# 1,000 workers, S = 1..64), `bench paper_mem` (peak RSS of each role).
# Needs root and `ip netns` for shaped links (else loopback only) and java,
# mvn, kcat for the real brokers (else it says so and exits 0: no mock
# cluster holds a 2^26 model).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FSGD=$(realpath "${FSGD:-$here/../../bin/fsgd}")
PY=/usr/bin/python3
BROKER_SH=$here/../kafka/broker.sh
dim_main=${PR_DIM:-67108864}
rows=${PR_ROWS:-4000000}
test_rows=${PR_TEST_ROWS:-$((rows * 3 / 7))}
nnz=${PR_NNZ:-30}
batch_frac=${PR_BATCH_FRAC:-0.1}
workers=${PR_WORKERS:-4}
shards=${PR_SHARDS:-2}
epochs=${PR_EPOCHS:-2}
codecs=${PR_CODECS:-none fastsgd topk sketchml logquant}
want_links=${PR_LINKS:-loopback 1gbit 100mbit}
fig7_dims=${PR_FIG7_DIMS-65536 1048576 16777216 67108864}
fig7_codecs=${PR_FIG7_CODECS:-none fastsgd}
fig7_link=${PR_FIG7_LINK:-1gbit}
nbrokers=${PR_BROKERS:-3}
replication=${PR_REPLICATION:-0}
lr=${PR_LR:-0.01}
repeats=${PR_REPEATS:-1}
calib_repeats=${PR_CALIB_REPEATS:-3}
batch=$("$PY" -c "import sys; print(max(1, round(float(sys.argv[1]) * int(sys.argv[2]))))" "$batch_frac" "$rows")
tmp=$(mktemp -d)
tag=fpr$$
NSB=$tag-b
PIDS=()
NETNS=()
KDIR=
cleanup() {
    local p n
    trap '' INT TERM # a second signal must not cut the cleanup short (namespaces left behind)
    # /usr/bin/time wraps the roles: their fsgd children first
    for p in ${PIDS[@]+"${PIDS[@]}"}; do pkill -TERM -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
    for p in ${PIDS[@]+"${PIDS[@]}"}; do wait "$p" 2>/dev/null || true; done
    [ -n "$KDIR" ] && "$BROKER_SH" stop "$KDIR" >/dev/null 2>&1 || true
    for n in ${NETNS[@]+"${NETNS[@]}"}; do ip netns del "$n" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! why=$("$BROKER_SH" check) || ! "$BROKER_SH" install >"$tmp/install.log" 2>&1; then
    echo "bench paper note=\"real Kafka cluster unavailable (${why:-$(tail -1 "$tmp/install.log")}); skipped\""
    exit 0
fi

# The namespaces as in dist_net.sh: the brokers, the producer and the
# aggregator shards in B; worker i in Wi, joined to B by a veth pair shaped on
# both ends; its TCP to 127.0.0.1 DNATed across the pair (the brokers
# advertise 127.0.0.1). Only 10.202.x addresses inside these namespaces.
setup_netns() {
    [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
    command -v ip >/dev/null && command -v tc >/dev/null && command -v iptables >/dev/null ||
        { echo "ip, tc or iptables missing"; return 1; }
    ip netns add "$NSB" || return 1
    NETNS+=("$NSB")
    ip -n "$NSB" link set lo up
    ip netns exec "$NSB" sysctl -qw net.ipv4.conf.all.route_localnet=1
    local i ns
    for ((i = 1; i <= workers; i++)); do
        ns=$tag-w$i
        ip netns add "$ns" || return 1
        NETNS+=("$ns")
        ip link add "$tag-$i" netns "$ns" type veth peer name "$tag-$i-b" netns "$NSB" || return 1
        ip -n "$ns" addr add "10.202.$i.2/24" dev "$tag-$i"
        ip -n "$NSB" addr add "10.202.$i.1/24" dev "$tag-$i-b"
        ip -n "$ns" link set lo up
        ip -n "$ns" link set "$tag-$i" up
        ip -n "$NSB" link set "$tag-$i-b" up
        ip netns exec "$NSB" sysctl -qw "net.ipv4.conf.$tag-$i-b.route_localnet=1"
        ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.route_localnet=1 "net.ipv4.conf.$tag-$i.route_localnet=1"
        ip netns exec "$ns" tc qdisc add dev "$tag-$i" root tbf rate 1gbit burst 128kb latency 20ms
        ip netns exec "$NSB" tc qdisc add dev "$tag-$i-b" root tbf rate 1gbit burst 128kb latency 20ms
        ip netns exec "$ns" iptables -t nat -A OUTPUT -p tcp -d 127.0.0.1 -j DNAT --to-destination "10.202.$i.1"
        ip netns exec "$ns" iptables -t nat -A POSTROUTING -o "$tag-$i" -j SNAT --to-source "10.202.$i.2"
        ip netns exec "$NSB" iptables -t nat -A PREROUTING -i "$tag-$i-b" -p tcp -d "10.202.$i.1" \
            -j DNAT --to-destination 127.0.0.1
    done
}
set_rate() {
    local i
    for ((i = 1; i <= workers; i++)); do
        ip netns exec "$tag-w$i" tc qdisc change dev "$tag-$i" root tbf rate "$1" burst 128kb latency 20ms
        ip netns exec "$NSB" tc qdisc change dev "$tag-$i-b" root tbf rate "$1" burst 128kb latency 20ms
    done
}
veth_bytes() { # the worker-side veths' tx and rx, "tx rx"
    local tx=0 rx=0 i
    for ((i = 1; i <= workers; i++)); do
        tx=$((tx + $(ip netns exec "$tag-w$i" cat "/sys/class/net/$tag-$i/statistics/tx_bytes")))
        rx=$((rx + $(ip netns exec "$tag-w$i" cat "/sys/class/net/$tag-$i/statistics/rx_bytes")))
    done
    echo "$tx $rx"
}

links=()
have_netns=
for l in $want_links $([ -n "$fig7_dims" ] && echo "$fig7_link"); do
    [[ " ${links[*]-} " == *" $l "* ]] && continue
    if [ "$l" != loopback ] && [ -z "$have_netns" ]; then
        if setup_netns >"$tmp/netns.log" 2>&1; then
            have_netns=1
        else
            echo "bench paper note=\"network namespaces unavailable ($(tr '\n"' ' ' <"$tmp/netns.log" | cut -c1-120)):" \
                "loopback only\""
            fig7_link=loopback
            continue
        fi
    fi
    if [ "$l" = loopback ] || [ -n "$have_netns" ]; then links+=("$l"); fi
done
# With namespaces, loopback runs put the workers in B beside the brokers.
nsb_pre=()
[ -n "$have_netns" ] && nsb_pre=(ip netns exec "$NSB")

KDIR=$tmp/kafka
brokers=$(${nsb_pre[@]+"${nsb_pre[@]}"} "$BROKER_SH" start "$KDIR" "$nbrokers" | sed -n 's/^brokers=//p')
[ -n "$brokers" ] || { echo "bench paper error: the $nbrokers-broker cluster did not start"; exit 1; }
echo "bench paper_cluster brokers=$brokers nodes=$nbrokers"

# α and β of each shaped link: a TCP ping-pong from W1 to B (lib/pingpong.py)
if [ -n "$have_netns" ]; then
    for l in "${links[@]}"; do
        [ "$l" = loopback ] && continue
        set_rate "$l"
        ip netns exec "$NSB" "$PY" "$here/lib/pingpong.py" serve 0.0.0.0 7302 &
        pp=$!
        PIDS+=("$pp")
        sleep 0.5
        ip netns exec "$tag-w1" "$PY" "$here/lib/pingpong.py" probe 10.202.1.1 7302 "$l" >"$tmp/ab-$l.txt"
        wait "$pp" 2>/dev/null || true
        PIDS=()
        cat "$tmp/ab-$l.txt"
    done
fi
"$PY" "$here/lib/pingpong.py" serve 127.0.0.1 7302 &
pp=$!
PIDS+=("$pp")
sleep 0.5
"$PY" "$here/lib/pingpong.py" probe 127.0.0.1 7302 loopback >"$tmp/ab-loopback.txt"
wait "$pp" 2>/dev/null || true
PIDS=()
cat "$tmp/ab-loopback.txt"
cat "$tmp"/ab-*.txt >"$tmp/alphabeta.txt"

make_data() { # DIM: $tmp/d$DIM/train.svm, test.svm (the same seed and rows at every dimension)
    local d=$tmp/d$1
    [ -f "$d/train.svm" ] && return 0
    mkdir -p "$d"
    "$FSGD" gen --rows $((rows + test_rows)) --dim "$1" --nnz "$nnz" --zipf 1.1 --seed 26 --quiet --out "$d/all.svm"
    head -n "$rows" "$d/all.svm" >"$d/train.svm"
    tail -n "$test_rows" "$d/all.svm" >"$d/test.svm"
    rm "$d/all.svm"
    echo "bench paper_data dim=$1 rows=$rows test_rows=$test_rows nnz_mean=$nnz zipf=1.1 batch=$batch" \
        "batch_frac=$batch_frac workers=$workers shards=$shards epochs=$epochs bytes=$(stat -c %s "$d/train.svm")"
}

runs=$tmp/runs
mkdir -p "$runs"
seq_no=0
status=0
# run_one SET DIM LINK CODEC: one job; $runs/N.env, N.json (shard 0) and N.json.shardI
run_one() {
    local set=$1 dim=$2 link=$3 codec=$4 i
    seq_no=$((seq_no + 1))
    local base=$runs/$seq_no name=pr$seq_no-${codec//[^a-z0-9]/}-$$
    local d=$tmp/d$dim
    local parts=$(( ($(stat -c %s "$d/train.svm") + 8388607) / 8388608 ))
    [ "$parts" -lt 12 ] && parts=12
    local common=(--brokers "$brokers" --name "$name" --dim "$dim" --epochs "$epochs" --batch "$batch" --lr "$lr"
        --codec "$codec" --shards "$shards" --workers "$workers" --step-timeout-ms 600000 --staleness 0
        --replica full) # the seeds' regime: every worker a whole replica (replica auto takes working sets at 2^25+)
    ${nsb_pre[@]+"${nsb_pre[@]}"} "$FSGD" run --broker-only --brokers "$brokers" --name "$name" --partitions "$parts" \
        --shards "$shards" --replication-factor "$replication" >"$base.topics" 2>&1 ||
        { echo "bench paper error: topics of $name not made:"; cat "$base.topics"; return 1; }
    ${nsb_pre[@]+"${nsb_pre[@]}"} "$FSGD" produce --brokers "$brokers" --name "$name" --shards "$shards" --quiet \
        "$d/train.svm" >"$base.produce" 2>&1 || { echo "bench paper error: produce:"; tail -3 "$base.produce"; return 1; }
    local before="0 0"
    [ "$link" != loopback ] && before=$(veth_bytes)
    local agg=()
    for ((i = 0; i < shards; i++)); do
        ${nsb_pre[@]+"${nsb_pre[@]}"} /usr/bin/time -f %M -o "$base.rss.a$i" "$FSGD" aggregator "${common[@]}" \
            --shard "$i/$shards" --test "$d/test.svm" --quiet --metrics-json "$base.json" >"$base.a$i" 2>&1 &
        agg+=($!)
        PIDS+=($!)
    done
    local wp=() pre
    for ((i = 1; i <= workers; i++)); do
        pre=(${nsb_pre[@]+"${nsb_pre[@]}"})
        [ "$link" != loopback ] && pre=(ip netns exec "$tag-w$i")
        ${pre[@]+"${pre[@]}"} /usr/bin/time -f %M -o "$base.rss.w$i" "$FSGD" worker "${common[@]}" --id "$i" \
            >"$base.w$i" 2>&1 &
        wp+=($!)
        PIDS+=($!)
    done
    local rc=0 p
    for p in "${agg[@]}"; do wait "$p" || rc=$?; done
    for p in "${wp[@]}"; do wait "$p" || rc=$?; done
    PIDS=()
    local after="0 0"
    [ "$link" != loopback ] && after=$(veth_bytes)
    if [ $rc -ne 0 ]; then
        echo "bench paper error set=$set dim=$dim link=$link codec=$codec: a role exited with status $rc"
        tail -n 3 "$base".a* "$base".w* 2>/dev/null
        return 1
    fi
    read -r b0 r0 <<<"$before"
    read -r b1 r1 <<<"$after"
    local rss_a=0 rss_w=0 k
    for f in "$base".rss.a*; do k=$(tail -1 "$f"); [ "$k" -gt "$rss_a" ] && rss_a=$k; done
    for f in "$base".rss.w*; do k=$(tail -1 "$f"); [ "$k" -gt "$rss_w" ] && rss_w=$k; done
    echo "set=$set dim=$dim link=$link codec=$codec workers=$workers shards=$shards rows=$rows batch=$batch" \
        "epochs=$epochs nnz=$nnz link_up=$((b1 - b0)) link_down=$((r1 - r0)) rss_agg_kb=$rss_a rss_worker_kb=$rss_w" \
        >"$base.env"
}

# calibrate DIM: the cost model's per-key costs at this feature count, from a
# single-process fsgd train (threads standing in for the workers, the same
# rows, batch and epochs), not from the distributed runs the model is checked
# against: $runs/calib-DIM-CODEC-REP.json for each Fig. 7 codec
calibrate() {
    local codec rep
    for ((rep = 1; rep <= calib_repeats; rep++)); do for codec in $fig7_codecs; do
        "$FSGD" train --data "$tmp/d$1/train.svm" --test "$tmp/d$1/test.svm" --dim "$1" --epochs "$epochs" \
            --batch "$batch" --threads "$workers" --codec "$codec" --lr "$lr" --quiet \
            --metrics-json "$runs/calib-$1-${codec//[^a-z0-9]/}-$rep.json" >"$tmp/calib.log" 2>&1 ||
            { echo "bench paper error: calibration at dim=$1 codec=$codec run $rep:"; tail -3 "$tmp/calib.log"; return 1; }
    done; done
}

make_data "$dim_main"
# One job of one epoch before the timed ones, not reported: the brokers'
# JVMs compile their hot paths on the first messages, so without it the
# first timed runs (loopback's) paid for that (fastsgd on loopback, run
# first, 1.34 s an epoch against 0.98 on the 1 Gbit/s link right after)
epochs_timed=$epochs
epochs=1
run_one warmup "$dim_main" loopback none || status=1
rm -f "$runs/$seq_no".*
epochs=$epochs_timed
for ((rep = 1; rep <= repeats; rep++)); do
    for link in "${links[@]}"; do
        [[ " $want_links " == *" $link "* ]] || continue
        [ "$link" != loopback ] && set_rate "$link"
        for codec in $codecs; do
            run_one table4 "$dim_main" "$link" "$codec" || status=1
        done
    done
done
[ -n "$fig7_dims" ] && { calibrate "$dim_main" || status=1; }
# bits per key of the first step's gradient of one worker (its share of the
# batch), every codec: fsgd bench codec on the same rows; fastsgd with the
# paper's key lengths and with the optimal ones (the same GK-Encoder format)
worker_frac=$("$PY" -c "import sys; print(int(sys.argv[1]) / int(sys.argv[2]) / int(sys.argv[3]))" "$batch" "$workers" "$rows")
"$FSGD" bench codec --data-dir "$tmp/d$dim_main" --datasets train.svm --dims "" --batches "$worker_frac" \
    --codecs "none;fastsgd;fastsgd:levels=optimal;sketchml;topk;logquant" --no-sweep --min-time 0.01 \
    >"$tmp/codec.txt" 2>&1 ||
    { cat "$tmp/codec.txt"; status=1; }
for dim in $fig7_dims; do
    make_data "$dim"
    [ "$dim" != "$dim_main" ] && { calibrate "$dim" || status=1; }
    [ "$fig7_link" != loopback ] && set_rate "$fig7_link"
    for codec in $fig7_codecs; do
        if [ "$dim" = "$dim_main" ] && [[ " $want_links " == *" $fig7_link "* ]] && [[ " $codecs " == *" $codec "* ]]; then
            continue # the main table's run stands for it
        fi
        run_one fig7 "$dim" "$fig7_link" "$codec" || status=1
    done
    [ "$dim" != "$dim_main" ] && rm -rf "$tmp/d$dim"
done
# the brokers' peak memory, before they stop
bk=0
for p in $(cat "$KDIR"/node*/pid 2>/dev/null); do
    k=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$p/status" 2>/dev/null || echo 0)
    [ "${k:-0}" -gt "$bk" ] && bk=$k
done
echo "$bk" >"$runs/broker_rss_kb"
"$PY" "$here/lib/test_cost_model.py" || status=1
"$PY" "$here/lib/paper_regime_report.py" --runs "$runs" --codec-bench "$tmp/codec.txt" \
    --alphabeta "$tmp/alphabeta.txt" --train "$tmp/d$dim_main/train.svm" --dim "$dim_main" --batch "$batch" \
    --workers "$workers" --shards "$shards" || status=1
if [ -n "${PR_KEEP:-}" ]; then
    mkdir -p "$PR_KEEP"
    cp "$runs"/*.env "$runs"/*.json* "$runs/broker_rss_kb" "$tmp/codec.txt" "$tmp/alphabeta.txt" "$PR_KEEP"/
    # a step's rows: enough to print the report again (its --train)
    head -n "$batch" "$tmp/d$dim_main/train.svm" >"$PR_KEEP/train_head.svm"
fi
exit $status
