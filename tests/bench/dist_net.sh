#!/usr/bin/env bash
# Distributed training over Kafka with 2, 3 and 4 workers, codecs none and
# fastsgd, over plain loopback and over emulated 1 Gbit/s links, on the
# embedded cluster (mock) and on a real Apache Kafka broker (real,
# tests/kafka/broker.sh, one node), all in one run, with fastsgd/none ratios
# per (broker, link, workers) and real/mock ratios of step time and per-hop
# latency.
#
# Data: CTR-shaped rows from `fsgd gen` (Zipf feature popularity), dimension
# 2^20, ~100 nonzeros per row, a fixed global batch (rows per step, split over
# the workers), so that each worker's raw gradient per step is a few hundred
# KB (the aggregator's metrics report gradient_raw) and every worker count runs
# the same algorithm. The dimension is capped by the embedded cluster (the
# real broker runs the same data, so the two compare): the
# aggregator's full model snapshot (4 bytes per weight, chunked below 1 MiB)
# goes to the single-partition model topic and must fit the mock's 5 MiB per
# partition, so 2^20 weights (4 MiB) is the most it can hold; the data topic
# gets one partition per 2 MiB of text, at least 12 (fsgd run --broker-only
# sizes it; the real broker gets the same count).
#
# Links. The mock brokers listen on 127.0.0.1 only and advertise 127.0.0.1 in
# their metadata (librdkafka 2.0.2 has no listener setting), so a client in
# another namespace must still dial 127.0.0.1:PORT. For link=1gbit:
#   - the broker (fsgd run --broker-only), the producer and the aggregator run
#     in a namespace of their own, B;
#   - worker i runs in its own namespace Wi, joined to B by a veth pair
#     (10.201.i.2 in Wi, 10.201.i.1 in B) shaped with
#     `tc qdisc tbf rate 1gbit` on both ends (upload and download);
#   - in Wi, iptables DNATs TCP to 127.0.0.1 to 10.201.i.1 (route_localnet,
#     SNAT to 10.201.i.2); in B, PREROUTING DNATs it back to 127.0.0.1.
# So every byte between a worker and the broker crosses that worker's own
# 1 Gbit/s link; the aggregator talks to the broker over B's loopback (as a
# parameter server next to the broker would). Only 10.201.x addresses inside
# these namespaces are used. link=loopback runs the same processes in the
# current namespace. Without root or `ip netns`, only loopback runs.
# The real broker (a JVM, advertising 127.0.0.1:PORT too) runs where the mock
# does: in B for link=1gbit, here for loopback; one broker per link, a fresh
# job name per configuration.
#
# Measured per configuration, from the aggregator's metrics JSON:
#   epoch_s           mean wall time of epochs 2..E (epoch 1 also loads the
#                     data partitions into the workers' caches)
#   time_to_target_s  seconds from step 1 (after the consumer-group join) until
#                     the training loss averaged over the last 8 steps first
#                     is <= DIST_NET_TARGET (the aggregator's --target-loss)
#   wire_bytes_up/down Kafka record values: gradient frames received by the
#                     aggregator / model frames published times live workers
#   link_bytes_up/down (1gbit only) bytes the worker veths sent / received,
#                     all traffic (data loading, Kafka protocol, TCP/IP)
#   step_p50_ms       the aggregator's step time, p50 (a step: model out,
#                     gradients back)
#   hop_grads_p50_ms  produce-to-consume latency of NAME.grads frames, worker
#                     -> broker -> aggregator, p50 (fsgd.sent_us header)
#   hop_model_p50_ms  the same for NAME.model frames, aggregator -> broker ->
#                     workers (median of the workers' p50s)
# DIST_NET_CODECS ("none fastsgd") picks the strategies (--codec specs); with
# more than these two, each gets a "bench dist_vs_none" line against none
# (the strategies table of issue 13:
#   DIST_NET_WORKERS=4 DIST_NET_LINKS=1gbit DIST_NET_BROKERS=mock \
#   DIST_NET_CODECS="none fastsgd topk gtopk efsign sketchml" bash tests/bench/dist_net.sh).
# Env: DIST_NET_WORKERS ("2 3 4"), DIST_NET_EPOCHS (8), DIST_NET_ROWS (80000),
# DIST_NET_BATCH (6000), DIST_NET_DIM (1048576), DIST_NET_NNZ (100),
# DIST_NET_TARGET (0.45), DIST_NET_LINKS ("loopback 1gbit"), DIST_NET_BROKERS
# ("mock real"; real needs java, mvn, kcat: without them it says so and runs
# mock only).
set -euo pipefail
FSGD=$(realpath "${FSGD:-bin/fsgd}")
PY=/usr/bin/python3
workers_list=${DIST_NET_WORKERS:-2 3 4}
epochs=${DIST_NET_EPOCHS:-8}
rows=${DIST_NET_ROWS:-80000}
batch=${DIST_NET_BATCH:-6000}
dim=${DIST_NET_DIM:-1048576}
nnz=${DIST_NET_NNZ:-100}
target=${DIST_NET_TARGET:-0.45}
want_links=${DIST_NET_LINKS:-loopback 1gbit}
want_brokers=${DIST_NET_BROKERS:-mock real}
codecs=${DIST_NET_CODECS:-none fastsgd}
# a codec spec as a name part (topics, files): [A-Za-z0-9-] only
cname() { echo "$1" | tr -c 'A-Za-z0-9\n' '-'; }
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
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    for n in "${KDIRS[@]}"; do "$BROKER_SH" stop "$n" >/dev/null 2>&1 || true; done
    for n in "${NETNS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$FSGD" gen --rows $((rows + 5000)) --dim "$dim" --nnz "$nnz" --zipf 1.1 --seed 7 --quiet --out "$tmp/all.svm"
head -n "$rows" "$tmp/all.svm" >"$tmp/train.svm"
tail -n 5000 "$tmp/all.svm" >"$tmp/test.svm"
rm "$tmp/all.svm"
echo "bench dist_net_data rows=$rows test_rows=5000 dim=$dim nnz_mean=$nnz zipf=1.1 batch=$batch epochs=$epochs" \
    "target_loss=$target bytes=$(stat -c %s "$tmp/train.svm")"

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

links=()
for l in $want_links; do
    if [ "$l" = 1gbit ]; then
        # not in $(...): the namespaces must be recorded in this shell for cleanup
        if setup_netns >"$tmp/netns.log" 2>&1; then
            links+=(1gbit)
        else
            echo "bench dist_net note=\"network namespaces unavailable ($(tr '\n"' ' ' <"$tmp/netns.log" | cut -c1-120)):" \
                "1 Gbit/s link emulation skipped, loopback only\""
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
data_bytes=$(stat -c %s "$tmp/train.svm")
data_parts=$(((data_bytes + 2097151) / 2097152))
[ "$data_parts" -lt 12 ] && data_parts=12

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
    local nsb="" pb d=$tmp/kafka-$1
    [ "$1" = 1gbit ] && nsb=$NSB
    read -r -a pb <<<"$(ns_pre "$nsb")"
    KDIRS+=("$d")
    REAL_BROKERS=$(${pb[@]+"${pb[@]}"} "$BROKER_SH" start "$d" 1 | sed -n 's/^brokers=//p')
    [ -n "$REAL_BROKERS" ]
}
real_stop() {
    "$BROKER_SH" stop "$tmp/kafka-$1"
    REAL_BROKERS=
}

run_one() { # broker link workers codec: writes $tmp/BROKER-LINK-W-CODEC.json and .env
    local kind=$1 link=$2 w=$3 codec=$4 nsb="" i
    local base="$tmp/$kind-$link-$w-$(cname "$codec")" name="dn$w$(cname "$codec")"
    [ "$kind" = real ] && name="dn$w$(cname "$codec")-$link-$$"
    [ "$link" = 1gbit ] && nsb=$NSB
    local common=(--name "$name" --test "$tmp/test.svm" --dim "$dim" --epochs "$epochs" --batch "$batch"
        --lr 0.01 --codec "$codec")
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
            brokers=$(sed -n 's/^brokers=//p' "$base.broker")
            [ -n "$brokers" ] && break
            sleep 0.1
        done
        [ -n "$brokers" ] || { echo "broker did not start:"; cat "$base.broker"; return 1; }
    fi
    ${pb[@]+"${pb[@]}"} "$FSGD" produce --brokers "$brokers" --name "$name" --quiet "$tmp/train.svm" >"$base.produce" 2>&1
    local before="0 0"
    [ "$link" = 1gbit ] && before=$(veth_bytes)
    ${pb[@]+"${pb[@]}"} "$FSGD" aggregator --brokers "$brokers" --workers "$w" "${common[@]}" --quiet \
        --target-loss "$target" --metrics-json "$base.json" >"$base.agg" 2>&1 &
    local agg=$!
    PIDS+=("$agg")
    local wp=()
    for ((i = 1; i <= w; i++)); do
        local wns=""
        [ "$link" = 1gbit ] && wns=$tag-w$i
        read -r -a pw <<<"$(ns_pre "$wns")"
        ${pw[@]+"${pw[@]}"} "$FSGD" worker --brokers "$brokers" --id "$i" "${common[@]}" >"$base.w$i" 2>&1 &
        wp+=($!)
        PIDS+=($!)
    done
    local rc=0
    wait "$agg" || rc=$?
    for i in "${wp[@]}"; do wait "$i" || true; done
    local after="0 0"
    [ "$link" = 1gbit ] && after=$(veth_bytes)
    if [ -n "$broker" ]; then
        kill "$broker" 2>/dev/null || true
        wait "$broker" 2>/dev/null || true
    fi
    PIDS=()
    if [ $rc -ne 0 ]; then
        echo "bench dist_net error broker=$kind link=$link workers=$w codec=$codec: aggregator status $rc"
        tail -5 "$base.agg"
        return 1
    fi
    read -r b0 r0 <<<"$before"
    read -r b1 r1 <<<"$after"
    # the workers' NAME.model hop p50s (last line of each worker)
    local hops
    hops=$(sed -n 's/.*model hop p50 \([0-9.-]*\) ms.*/\1/p' "$base".w* | tr '\n' ',' | sed 's/,$//')
    echo "link_up=$((b1 - b0)) link_down=$((r1 - r0)) model_hops=${hops:-}" >"$base.env"
}

report() { # broker link workers
    local pairs=() c
    for c in $codecs; do pairs+=("$tmp/$1-$2-$3-$(cname "$c")" "$c"); done
    "$PY" - "$1" "$2" "$3" "${pairs[@]}" <<'PYEOF'
import json, statistics, sys
kind, link, w = sys.argv[1], sys.argv[2], sys.argv[3]
figs = {}
for base, codec in zip(sys.argv[4::2], sys.argv[5::2]):
    m = json.load(open(base + ".json"))
    env = dict(kv.split("=", 1) for kv in open(base + ".env").read().split())
    e = m["per_epoch"]
    assert all(x["rows"] == m["dataset_rows"] for x in e), "rows per epoch differ from the dataset"
    epoch_s = (e[-1]["seconds_from_step1"] - e[0]["seconds_from_step1"]) / max(1, len(e) - 1)
    ttt = m["time_to_target_loss_s"]
    f = dict(epoch_s=epoch_s, ttt=ttt if ttt >= 0 else float("nan"), up=m["bytes"]["up"], down=m["bytes"]["down"],
             auc=m["test"]["auc"], steps=max(1, m["steps"]))
    figs[codec] = f
    steps = max(1, m["steps"])
    link_fig = ""
    if link != "loopback":
        link_fig = " link_bytes_up=%s link_bytes_down=%s" % (env["link_up"], env["link_down"])
    hops = [float(x) for x in env.get("model_hops", "").split(",") if x and float(x) >= 0]
    hop_model = statistics.median(hops) if hops else float("nan")
    hop_grads = m.get("hop_latency_ms", {}).get("grads_p50", float("nan"))
    print("bench dist broker=%s link=%s workers=%s codec=%s epoch_s=%.3f epoch1_s=%.3f time_to_target_s=%.3f "
          "target_step=%d wire_bytes_up=%d wire_bytes_down=%d%s test_auc=%.5f grad_raw_kb_per_worker_step=%.0f "
          "compression=%.2f step_p50_ms=%.2f hop_grads_p50_ms=%.3f hop_model_p50_ms=%.3f steps=%d empty_steps=%d "
          "workers_dropped=%d join_s=%.2f" %
          (kind, link, w, codec, epoch_s, e[0]["seconds_from_step1"], f["ttt"], m["target_loss_step"], f["up"],
           f["down"], link_fig, m["test"]["auc"], m["bytes"]["gradient_raw"] / steps / int(w) / 1024,
           m["compression_ratio"], m["step_latency_ms"]["p50"], hop_grads, hop_model, m["steps"], m["empty_steps"],
           m["workers"]["dropped"], m["step1_at_seconds"]))
    if m["empty_steps"]:
        # a worker that joined the consumer group after step 1 makes the group
        # rebalance: steps wait for the new assignment and carry no rows
        print("bench dist note=\"broker=%s link=%s workers=%s codec=%s: %d empty steps (a consumer-group rebalance "
              "after step 1); its epoch 1 and time to target include that stall\"" % (kind, link, w, codec,
                                                                                    m["empty_steps"]))
for codec, f in figs.items():
    if "none" in figs and codec != "none":
        a = figs["none"]
        print("bench dist_vs_none broker=%s link=%s workers=%s codec=%s bytes_up_per_worker_step=%.0f "
              "bytes_down_per_worker_step=%.0f time_to_target_s=%.3f test_auc=%.5f auc_minus_none=%+.5f "
              "bytes_over_none=%.4f time_to_target_over_none=%.3f" %
              (kind, link, w, codec, f["up"] / f["steps"] / int(w), f["down"] / f["steps"] / int(w), f["ttt"], f["auc"],
               f["auc"] - a["auc"], (f["up"] + f["down"]) / (a["up"] + a["down"]), f["ttt"] / a["ttt"]))
if "none" not in figs or "fastsgd" not in figs:
    sys.exit(0)
a, b = figs["none"], figs["fastsgd"]
print("bench dist_ratio broker=%s link=%s workers=%s epoch_time_fastsgd_over_none=%.3f bytes_fastsgd_over_none=%.3f "
      "bytes_up_fastsgd_over_none=%.3f time_to_target_fastsgd_over_none=%.3f" %
      (kind, link, w, b["epoch_s"] / a["epoch_s"], (b["up"] + b["down"]) / (a["up"] + a["down"]), b["up"] / a["up"],
       b["ttt"] / a["ttt"]))
PYEOF
}

compare() { # link workers codec: real over mock, when both ran
    [ -f "$tmp/mock-$1-$2-$3.json" ] && [ -f "$tmp/real-$1-$2-$3.json" ] || return 0
    "$PY" - "$tmp/mock-$1-$2-$3" "$tmp/real-$1-$2-$3" "$1" "$2" "$3" <<'PYEOF'
import json, statistics, sys
out = {}
for base, kind in ((sys.argv[1], "mock"), (sys.argv[2], "real")):
    m = json.load(open(base + ".json"))
    env = dict(kv.split("=", 1) for kv in open(base + ".env").read().split())
    hops = [float(x) for x in env.get("model_hops", "").split(",") if x and float(x) >= 0]
    out[kind] = (m["step_latency_ms"]["p50"], m.get("hop_latency_ms", {}).get("grads_p50", float("nan")),
                 statistics.median(hops) if hops else float("nan"))
(sm, gm, mm), (sr, gr, mr) = out["mock"], out["real"]
print("bench dist_broker link=%s workers=%s codec=%s step_p50_ms_mock=%.2f step_p50_ms_real=%.2f "
      "hop_grads_p50_ms_mock=%.3f hop_grads_p50_ms_real=%.3f hop_model_p50_ms_mock=%.3f hop_model_p50_ms_real=%.3f "
      "step_p50_real_over_mock=%.3f" % (sys.argv[3], sys.argv[4], sys.argv[5], sm, sr, gm, gr, mm, mr, sr / sm))
PYEOF
}

status=0
for link in "${links[@]}"; do
    for kind in "${brokers_kinds[@]}"; do
        if [ "$kind" = real ] && ! real_start "$link"; then
            echo "bench dist_net error broker=real link=$link: the broker did not start"
            status=1
            continue
        fi
        for w in $workers_list; do
            ok=1
            for c in $codecs; do run_one "$kind" "$link" "$w" "$c" || { ok=0; break; }; done
            if [ $ok = 1 ]; then
                report "$kind" "$link" "$w" || status=1
            else
                status=1
            fi
        done
        [ "$kind" = real ] && real_stop "$link"
    done
    for w in $workers_list; do
        for codec in $codecs; do compare "$link" "$w" "$(cname "$codec")" || status=1; done
    done
done
exit $status
