#!/usr/bin/env bash
# Loading a file into NAME.data: `fsgd produce --batch 474` of generated
# CTR-shaped rows (fsgd gen, BENCH_PRODUCE_ROWS rows, default 1e6, dim 2^24,
# 40 nonzeros a row: 417 MB) into a real Apache Kafka broker on loopback
# (tests/kafka/broker.sh, one node), whole process, alternating
# BENCH_REPEATS (5) times between the variants; medians:
#   threads=2   the producer as shipped (two parsing threads ahead of the sends)
#   threads=0   the reference: the same binary parsing on its sending thread
#               (FSGD_PRODUCE_THREADS=0)
#   ref         BENCH_PRODUCE_REF, another fsgd binary (say main's), if given
# Each run writes a new job's topics. The first run of each variant is
# checked against threads=2's first run with kcat: every partition of
# NAME.data must hold the same messages (offsets, keys, headers, values).
# Lines:
#   bench produce variant=V wall_s=.. user_s=.. sys_s=.. broker_cpu_s=..
#   bench produce wall_ratio_threads2_over_threads0=.. [wall_ratio_threads2_over_ref=..]
# (< 1: faster). On a machine shared with other work the ratios mean little:
# check `uptime` first. Without java/mvn (no broker) it says so and exits 0.
set -euo pipefail
FSGD=${FSGD:-bin/fsgd}
ROWS=${BENCH_PRODUCE_ROWS:-1000000}
REPEATS=${BENCH_REPEATS:-5}
REF=${BENCH_PRODUCE_REF:-}
BROKER_SH=$(cd "$(dirname "$0")/../kafka" && pwd)/broker.sh
case $FSGD in */*) FSGD=$(realpath "$FSGD") ;; esac
tmp=$(mktemp -d)
kdir=""
cleanup() {
    [ -z "$kdir" ] || "$BROKER_SH" stop "$kdir" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! "$BROKER_SH" check >/dev/null 2>&1; then
    echo "bench produce skipped: no real broker here ($("$BROKER_SH" check 2>&1 | head -1))"
    exit 0
fi
"$FSGD" gen --rows "$ROWS" --dim 16777216 --nnz 40 --seed 1 --quiet --out "$tmp/ctr.svm"
kdir=$tmp/kafka
brokers=$("$BROKER_SH" start "$kdir" 1 | sed -n 's/^brokers=//p')
[ -n "$brokers" ] || { echo "bench produce: the broker did not start"; exit 1; }
jpid=$(pgrep -f "kafka.Kafka.*$kdir" | head -1 || true)
tck=$(getconf CLK_TCK)
broker_cpu() { [ -n "$jpid" ] && awk -v t="$tck" '{ print ($14 + $15) / t }' "/proc/$jpid/stat" || echo 0; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

variants=(threads2 threads0)
[ -z "$REF" ] || variants+=(ref)
declare -A W U S B first
for ((i = 0; i < REPEATS; i++)); do
    for v in "${variants[@]}"; do
        bin=$FSGD
        envs=(FSGD_PRODUCE_THREADS=2)
        case $v in
        threads0) envs=(FSGD_PRODUCE_THREADS=0) ;;
        ref) bin=$REF ;;
        esac
        name=bp$v$i
        b0=$(broker_cpu)
        env "${envs[@]}" /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$bin" produce --brokers "$brokers" --name "$name" \
            --batch 474 --quiet "$tmp/ctr.svm" >"$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
        b1=$(broker_cpu)
        read -r w u s <"$tmp/time"
        W[$v]+=" $w" U[$v]+=" $u" S[$v]+=" $s" B[$v]+=" $(awk -v a="$b0" -v b="$b1" 'BEGIN { print b - a }')"
        [ -n "${first[$v]:-}" ] || first[$v]=$name
    done
done
if command -v kcat >/dev/null; then
    P=$(kcat -b "$brokers" -L -t "${first[threads2]}.data" | grep -c 'partition ')
    for v in "${variants[@]}"; do
        [ "$v" != threads2 ] || continue
        for ((p = 0; p < P; p++)); do
            a=$(kcat -C -b "$brokers" -t "${first[threads2]}.data" -p $p -e -q -f '%o %k %h %S %s\n' | md5sum)
            b=$(kcat -C -b "$brokers" -t "${first[$v]}.data" -p $p -e -q -f '%o %k %h %S %s\n' | md5sum)
            [ "$a" = "$b" ] || { echo "bench produce: $v wrote other messages into partition $p than threads2"; exit 1; }
        done
    done
fi
for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    echo "bench produce variant=$v wall_s=$(median ${W[$v]}) user_s=$(median ${U[$v]}) sys_s=$(median ${S[$v]})" \
        "broker_cpu_s=$(median ${B[$v]})"
done
# shellcheck disable=SC2086
line="bench produce wall_ratio_threads2_over_threads0=$(awk -v a="$(median ${W[threads2]})" -v b="$(median ${W[threads0]})" 'BEGIN { printf "%.3f", a / b }')"
# shellcheck disable=SC2086
[ -z "$REF" ] || line+=" wall_ratio_threads2_over_ref=$(awk -v a="$(median ${W[threads2]})" -v b="$(median ${W[ref]})" 'BEGIN { printf "%.3f", a / b }')"
echo "$line"
