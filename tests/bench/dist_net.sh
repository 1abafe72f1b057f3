#!/usr/bin/env bash
# Distributed training over Kafka, every configuration in one invocation:
# codecs (DIST_NET_CODECS, "none fastsgd"), worker counts (DIST_NET_WORKERS,
# "4"), links (DIST_NET_LINKS, "loopback 1gbit 100mbit": loopback is the
# testbed's limit, any other word is a tc rate), model dimensions
# (DIST_NET_DIMS, "1048576 4194304") and brokers (DIST_NET_BROKERS, "mock
# real": the embedded cluster and a real Apache Kafka broker,
# tests/kafka/broker.sh, one node). The embedded cluster holds models up to
# ~2^20 weights (its 5 MiB per partition; fsgd refuses larger ones there with
# a message), so larger dimensions run on the real broker only.
#
# Printed, from the aggregators' metrics JSON:
#   bench dist ...        one line per run: time to target, epoch time, bytes
#                         up and down per worker per step, test AUC, step p50
#   bench dist_ratio ...  per (broker, dim, link, workers) and codec: its time
#                         to target over none's on the same link, and bytes
#   bench dist_bound ...  per (broker, dim, link, workers): the bound any codec
#                         can reach on that link, none on loopback over none on
#                         the link, printed beside each codec's ratio
#   bench dist_step ...   on loopback, the step broken down per step (ms):
#                         worker gradient, encode, Kafka hops (grads, model),
#                         aggregator decode + reduce, update (Adam + publish),
#                         downlink encode, and what is left (waiting)
#
# Data: CTR-shaped rows from `fsgd gen` (Zipf feature popularity), ~100
# nonzeros per row, a fixed global batch (rows per step, split over the
# workers), so every worker count runs the same algorithm; the data topic
# gets one partition per 2 MiB of text, at least 12.
#
# Links. The mock brokers listen on 127.0.0.1 only and advertise 127.0.0.1 in
# their metadata (librdkafka 2.0.2 has no listener setting), so a client in
# another namespace must still dial 127.0.0.1:PORT. For a shaped link:
#   - the broker (fsgd run --broker-only), the producer and the aggregator run
#     in a namespace of their own, B;
#   - worker i runs in its own namespace Wi, joined to B by a veth pair
#     (10.201.i.2 in Wi, 10.201.i.1 in B) shaped with
#     `tc qdisc tbf rate RATE` on both ends (upload and download);
#   - in Wi, iptables DNATs TCP to 127.0.0.1 to 10.201.i.1 (route_localnet,
#     SNAT to 10.201.i.2); in B, PREROUTING DNATs it back to 127.0.0.1.
# So every byte between a worker and the broker crosses that worker's own
# link; the aggregator talks to the broker over B's loopback (as a parameter
# server next to the broker would). Only 10.201.x addresses inside these
# namespaces are used. Without root or `ip netns`, only loopback runs.
# The real broker (a JVM, advertising 127.0.0.1:PORT too) runs where the mock
# does: in B for shaped links, here for loopback.
#
#   time_to_target_s  seconds from step 1 (after the consumer-group join) until
#                     the training loss averaged over the last 8 steps first
#                     is <= DIST_NET_TARGET (the aggregator's --target-loss)
#   up_B/down_B       Kafka record bytes one worker sends / receives per step
#                     (gradient frames; model frames)
#   link_bytes_up/down (shaped links) bytes the worker veths sent / received,
#                     all traffic (data loading, Kafka protocol, TCP/IP)
# DIST_NET_REPEATS (1): runs of each configuration, interleaved; times are
# their medians (a busy machine makes single runs noisy).
# Env: DIST_NET_EPOCHS (8), DIST_NET_ROWS (80000), DIST_NET_BATCH (6000),
# DIST_NET_NNZ (100), DIST_NET_TARGET (0.45), DIST_NET_LR (0.01, Adam's
# --lr), DIST_NET_L2 (0, --l2: λ on the mean loss; every strategy optimizes
# the same objective, efsign's workers put λθ in their gradients),
# DIST_NET_DOWNLINK (auto, --downlink); real needs java, mvn, kcat:
# without them it says so and runs mock only.
set -euo pipefail
FSGD=$(realpath "${FSGD:-bin/fsgd}")
PY=/usr/bin/python3
workers_list=${DIST_NET_WORKERS:-4}
codecs=${DIST_NET_CODECS:-none fastsgd}
dims=${DIST_NET_DIMS:-1048576 4194304}
MOCK_MAX_WEIGHTS=1100000 # FSGD_EMBEDDED_MAX_MODEL_WEIGHTS
repeats=${DIST_NET_REPEATS:-1}
epochs=${DIST_NET_EPOCHS:-8}
rows=${DIST_NET_ROWS:-80000}
batch=${DIST_NET_BATCH:-6000}
nnz=${DIST_NET_NNZ:-100}
target=${DIST_NET_TARGET:-0.45}
lr=${DIST_NET_LR:-0.01}
l2=${DIST_NET_L2:-0}
downlink=${DIST_NET_DOWNLINK:-auto}
want_links=${DIST_NET_LINKS:-loopback 1gbit 100mbit}
want_brokers=${DIST_NET_BROKERS:-mock real}
BROKER_SH=$(cd "$(dirname "$0")/../kafka" && pwd)/broker.sh
tmp=$(mktemp -d)
tag=fdn$$
NSB=$tag-b
maxw=0
for w in $workers_list; do [ "$w" -gt "$maxw" ] && maxw=$w; done
PIDS=()
NETNS=()
KDIRS=()
cleanup() {
    local p n
    trap '' INT TERM # a second signal must not cut the cleanup short (namespaces left behind)
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for n in "${KDIRS[@]}"; do "$BROKER_SH" stop "$n" >/dev/null 2>&1 || true; done
    for n in "${NETNS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

make_data() { # dim: writes $tmp/train.svm and $tmp/test.svm
    "$FSGD" gen --rows $((rows + 5000)) --dim "$1" --nnz "$nnz" --zipf 1.1 --seed 7 --quiet --out "$tmp/all.svm"
    head -n "$rows" "$tmp/all.svm" >"$tmp/train.svm"
    tail -n 5000 "$tmp/all.svm" >"$tmp/test.svm"
    rm "$tmp/all.svm"
    echo "bench dist_net_data rows=$rows test_rows=5000 dim=$1 nnz_mean=$nnz zipf=1.1 batch=$batch epochs=$epochs" \
        "lr=$lr l2=$l2 target_loss=$target bytes=$(stat -c %s "$tmp/train.svm")"
}

setup_netns() {
    [ "$(id -u)" = 0 ] || { echo "not root"; return 1; }
    command -v ip >/dev/null && command -v tc >/dev/null && command -v iptables >/dev/null ||
        { echo "ip, tc or iptables missing"; return 1; }
    ip netns add "$NSB" || return 1
    NETNS+=("$NSB")
    ip -n "$NSB" link set lo up
    ip netns exec "$NSB" sysctl -qw net.ipv4.conf.all.route_localnet=1
    local i ns
    for ((i = 1; i <= maxw; i++)); do
        ns=$tag-w$i
        ip netns add "$ns" || return 1
        NETNS+=("$ns")
        ip link add "$tag-$i" netns "$ns" type veth peer name "$tag-$i-b" netns "$NSB" || return 1
        ip -n "$ns" addr add "10.201.$i.2/24" dev "$tag-$i"
        ip -n "$NSB" addr add "10.201.$i.1/24" dev "$tag-$i-b"
        ip -n "$ns" link set lo up
        ip -n "$ns" link set "$tag-$i" up
        ip -n "$NSB" link set "$tag-$i-b" up
        ip netns exec "$NSB" sysctl -qw "net.ipv4.conf.$tag-$i-b.route_localnet=1"
        ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.route_localnet=1 "net.ipv4.conf.$tag-$i.route_localnet=1"
        ip netns exec "$ns" tc qdisc add dev "$tag-$i" root tbf rate 1gbit burst 128kb latency 20ms
        ip netns exec "$NSB" tc qdisc add dev "$tag-$i-b" root tbf rate 1gbit burst 128kb latency 20ms
        ip netns exec "$ns" iptables -t nat -A OUTPUT -p tcp -d 127.0.0.1 -j DNAT --to-destination "10.201.$i.1"
        ip netns exec "$ns" iptables -t nat -A POSTROUTING -o "$tag-$i" -j SNAT --to-source "10.201.$i.2"
        ip netns exec "$NSB" iptables -t nat -A PREROUTING -i "$tag-$i-b" -p tcp -d "10.201.$i.1" \
            -j DNAT --to-destination 127.0.0.1
    done
}

# set_rate RATE: every worker link (both ends) shaped to RATE
set_rate() {
    local i
    for ((i = 1; i <= maxw; i++)); do
        ip netns exec "$tag-w$i" tc qdisc change dev "$tag-$i" root tbf rate "$1" burst 128kb latency 20ms
        ip netns exec "$NSB" tc qdisc change dev "$tag-$i-b" root tbf rate "$1" burst 128kb latency 20ms
    done
}

links=()
have_netns=
for l in $want_links; do
    if [ "$l" != loopback ] && [ -n "$have_netns" ]; then
        links+=("$l")
    elif [ "$l" != loopback ]; then
        # not in $(...): the namespaces must be recorded in this shell for cleanup
        if setup_netns >"$tmp/netns.log" 2>&1; then
            links+=("$l")
            have_netns=1
        else
            echo "bench dist_net note=\"network namespaces unavailable ($(tr '\n"' ' ' <"$tmp/netns.log" | cut -c1-120)):" \
                "link emulation skipped, loopback only\""
            break
        fi
    else
        links+=("$l")
    fi
done

brokers_kinds=()
for b in $want_brokers; do
    if [ "$b" = real ]; then
        if why=$("$BROKER_SH" check) && "$BROKER_SH" install >"$tmp/install.log" 2>&1; then
            brokers_kinds+=(real)
        else
            echo "bench dist_net note=\"real Kafka broker unavailable (${why:-$(tail -1 "$tmp/install.log")}): mock only\""
        fi
    else
        brokers_kinds+=("$b")
    fi
done

# ns_pre NS: the command prefix that runs in namespace NS ("" = here). Used
# directly (not through a shell function) so that $! of a background job is
# the fsgd process itself (ip netns exec execs it) and kill reaches it.
ns_pre() { [ -n "$1" ] && echo "ip netns exec $1" || true; }

veth_bytes() { # total tx and rx of the worker-side veths, "tx rx"
    local tx=0 rx=0 i
    for ((i = 1; i <= maxw; i++)); do
        tx=$((tx + $(ip netns exec "$tag-w$i" cat "/sys/class/net/$tag-$i/statistics/tx_bytes")))
        rx=$((rx + $(ip netns exec "$tag-w$i" cat "/sys/class/net/$tag-$i/statistics/rx_bytes")))
    done
    echo "$tx $rx"
}

REAL_BROKERS=
# real_start LINK / real_stop LINK: one real broker per link, where the mock runs
real_start() {
    local nsb="" pb d=$tmp/kafka-$dim-$1
    [ "$1" != loopback ] && nsb=$NSB
    read -r -a pb <<<"$(ns_pre "$nsb")"
    KDIRS+=("$d")
    REAL_BROKERS=$(${pb[@]+"${pb[@]}"} "$BROKER_SH" start "$d" 1 | sed -n 's/^brokers=//p')
    [ -n "$REAL_BROKERS" ]
}
real_stop() {
    "$BROKER_SH" stop "$tmp/kafka-$dim-$1"
    rm -rf "$tmp/kafka-$dim-$1"
    REAL_BROKERS=
}

run_one() { # broker link workers codec: writes $tmp/runs/BROKER-DIM-LINK-W-CODEC.json and .env
    local kind=$1 link=$2 w=$3 codec=$4 nsb="" i
    local cname=${codec//[^a-z0-9]/}
    local base="$tmp/runs/$kind-$dim-$link-$w-$codec-r$rep" name="dn$w$cname"
    [ "$kind" = real ] && name="dn$w$cname-$dim-$link-$rep-$$"
    [ "$link" != loopback ] && nsb=$NSB
    local common=(--name "$name" --test "$tmp/test.svm" --dim "$dim" --epochs "$epochs" --batch "$batch"
        --lr "$lr" --l2 "$l2" --downlink "$downlink" --codec "$codec")
    local pb pw broker=""
    read -r -a pb <<<"$(ns_pre "$nsb")"
    local brokers=""
    if [ "$kind" = real ]; then
        brokers=$REAL_BROKERS
        ${pb[@]+"${pb[@]}"} "$FSGD" run --broker-only --brokers "$brokers" --name "$name" --partitions "$data_parts" \
            >"$base.broker" 2>&1 || { echo "topics not created:"; cat "$base.broker"; return 1; }
    else
        ${pb[@]+"${pb[@]}"} "$FSGD" run --broker-only --name "$name" --data "$tmp/train.svm" >"$base.broker" 2>&1 &
        broker=$!
        PIDS+=("$broker")
        # The mock cluster's setup ops can each wait for its 1 s poll: with many
        # partitions the embedded broker takes from 0.1 s to tens of seconds to start.
        for ((i = 0; i < 900; i++)); do
            brokers=$(sed -n 's/^brokers=//p' "$base.broker" 2>/dev/null) || true
            [ -n "$brokers" ] && break
            sleep 0.1
        done
        [ -n "$brokers" ] || { echo "broker did not start:"; cat "$base.broker"; return 1; }
    fi
    ${pb[@]+"${pb[@]}"} "$FSGD" produce --brokers "$brokers" --name "$name" --quiet "$tmp/train.svm" >"$base.produce" 2>&1
    local before="0 0"
    [ "$link" != loopback ] && before=$(veth_bytes)
    ${pb[@]+"${pb[@]}"} "$FSGD" aggregator --brokers "$brokers" --workers "$w" "${common[@]}" --quiet \
        --target-loss "$target" --metrics-json "$base.json" >"$base.agg" 2>&1 &
    local agg=$!
    PIDS+=("$agg")
    local wp=()
    for ((i = 1; i <= w; i++)); do
        local wns=""
        [ "$link" != loopback ] && wns=$tag-w$i
        read -r -a pw <<<"$(ns_pre "$wns")"
        ${pw[@]+"${pw[@]}"} "$FSGD" worker --brokers "$brokers" --id "$i" "${common[@]}" >"$base.w$i" 2>&1 &
        wp+=($!)
        PIDS+=($!)
    done
    local rc=0
    wait "$agg" || rc=$?
    for i in "${wp[@]}"; do wait "$i" || true; done
    local after="0 0"
    [ "$link" != loopback ] && after=$(veth_bytes)
    if [ -n "$broker" ]; then
        kill "$broker" 2>/dev/null || true
        wait "$broker" 2>/dev/null || true
    fi
    PIDS=()
    if [ $rc -ne 0 ]; then
        echo "bench dist_net error broker=$kind dim=$dim link=$link workers=$w codec=$codec: aggregator status $rc"
        tail -5 "$base.agg"
        return 1
    fi
    read -r b0 r0 <<<"$before"
    read -r b1 r1 <<<"$after"
    # the workers' NAME.model hop p50s (last line of each worker)
    local hops
    hops=$(sed -n 's/.*model hop p50 \([0-9.-]*\) ms.*/\1/p' "$base".w* | tr '\n' ',' | sed 's/,$//')
    echo "broker=$kind dim=$dim link=$link workers=$w codec=$codec link_up=$((b1 - b0)) link_down=$((r1 - r0))" \
        "model_hops=${hops:-}" >"$base.env"
}

status=0
mkdir -p "$tmp/runs"
for dim in $dims; do
    make_data "$dim"
    data_bytes=$(stat -c %s "$tmp/train.svm")
    data_parts=$(((data_bytes + 2097151) / 2097152))
    [ "$data_parts" -lt 12 ] && data_parts=12
    for link in "${links[@]}"; do
        [ "$link" != loopback ] && set_rate "$link"
        for kind in "${brokers_kinds[@]}"; do
            if [ "$kind" = mock ] && [ "$dim" -ge "$MOCK_MAX_WEIGHTS" ]; then
                echo "bench dist_net note=\"dim=$dim: beyond the embedded cluster's ~2^20 weights; real broker only\""
                continue
            fi
            if [ "$kind" = real ] && ! real_start "$link"; then
                echo "bench dist_net error broker=real link=$link: the broker did not start"
                status=1
                continue
            fi
            for ((rep = 1; rep <= repeats; rep++)); do
                for w in $workers_list; do
                    for codec in $codecs; do
                        run_one "$kind" "$link" "$w" "$codec" || status=1
                    done
                done
            done
            [ "$kind" = real ] && real_stop "$link"
        done
    done
done
"$PY" "$(dirname "$0")/lib/dist_net_report.py" "$tmp/runs" || status=1
# The same comparison as pictures (fsgd plot, trainer/observe/METRICS.md): one
# PNG per broker, dimension, link and worker count, its codecs side by side
# (the first repeat of each).
plots=${DIST_NET_PLOTS:-${BUILD:-build}/bench/dist_net}
if command -v gnuplot >/dev/null && mkdir -p "$plots"; then
    for g in $(ls "$tmp/runs"/*-r1.json 2>/dev/null | sed 's/-[^-]*-r1\.json$//' | sort -u); do
        "$FSGD" plot "$g"-*-r1.json --out "$plots/$(basename "$g").png" --title "dist_net $(basename "$g")" >/dev/null &&
            echo "bench dist_plot file=$plots/$(basename "$g").png" || status=1
    done
else
    echo "bench dist_net note=\"no pictures: gnuplot is not installed\""
fi
exit $status
