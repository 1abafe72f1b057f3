#!/usr/bin/env bash
# α and β of the α-β cost model (gtopk.txt section III-D; strategy/FORMAT.md,
# "gtopk") on the emulated 1 Gbit/s link of tests/bench/dist_net.sh: two
# network namespaces of our own joined by a veth pair shaped with
# `tc qdisc tbf rate 1gbit burst 128kb latency 20ms` on both ends (the same
# shaping as dist_net.sh), addresses 10.213.0.1/2 only.
#
# A TCP ping-pong of messages of s bytes (s = 4..4 MiB) over one connection:
# the round trip of s bytes out and a 1-byte ack back, median of
# repetitions; α = half the round trip of 4 bytes, β = the slope per element
# (the paper's element: a 4-byte value or index, elements = s/4) of a
# least-squares line over s >= 256 KiB, as the paper fits its OSU
# point-to-point times (Fig. 8: α = 0.436 ms, β = 3.6e-5 ms). Then the model's step costs
# for P = 2, 4, 8, 16 and k = 0.001·2^20 (dist_net's dimension), as the
# closing note's table. Prints "bench alphabeta ..." lines. Needs root and
# `ip netns`; otherwise says so and exits 0.
set -eu
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "alphabeta.sh: needs root and ip netns; skipped"
    exit 0
fi
NA=sp13ab-a NB=sp13ab-b
cleanup() { ip netns del "$NA" 2>/dev/null || true; ip netns del "$NB" 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add "$NA"
ip netns add "$NB"
ip link add sp13ab0 netns "$NA" type veth peer name sp13ab1 netns "$NB"
ip netns exec "$NA" ip addr add 10.213.0.1/24 dev sp13ab0
ip netns exec "$NB" ip addr add 10.213.0.2/24 dev sp13ab1
for ns in "$NA" "$NB"; do
    ip netns exec "$ns" ip link set lo up
done
ip netns exec "$NA" ip link set sp13ab0 up
ip netns exec "$NB" ip link set sp13ab1 up
ip netns exec "$NA" tc qdisc add dev sp13ab0 root tbf rate 1gbit burst 128kb latency 20ms
ip netns exec "$NB" tc qdisc add dev sp13ab1 root tbf rate 1gbit burst 128kb latency 20ms

PY=$(command -v python3)
ip netns exec "$NB" "$PY" - <<'EOF' &
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.213.0.2", 7213)); s.listen(1)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    h = c.recv(8, socket.MSG_WAITALL)
    if len(h) < 8: break
    n = int.from_bytes(h, "little")
    got = 0
    while got < n:
        b = c.recv(min(1 << 20, n - got))
        if not b: raise SystemExit
        got += len(b)
    c.sendall(b"k")
EOF
srv=$!
sleep 0.5
ip netns exec "$NA" "$PY" - <<'EOF'
import socket, time, statistics
c = socket.create_connection(("10.213.0.2", 7213)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sizes = [4, 64, 1024, 16384, 65536, 262144, 1048576, 4194304]
pts = []
for s in sizes:
    buf = bytes(s); ts = []
    reps = 40 if s <= 65536 else 12
    for r in range(reps + 3):
        t0 = time.perf_counter()
        c.sendall(s.to_bytes(8, "little") + buf)
        c.recv(1)
        dt = time.perf_counter() - t0
        if r >= 3: ts.append(dt)
    # one way: the message goes one way, a 1-byte ack comes back (≈ α)
    t = statistics.median(ts)
    pts.append((s / 4, t))
    print("bench alphabeta link=1gbit bytes=%d elements=%d roundtrip_ms=%.4f" % (s, s // 4, t * 1e3))
# α: half the round trip of the smallest message (it and its 1-byte ack
# each cost α, no β). β: the least-squares slope over messages of 256 KiB and
# more: tbf's 128 KiB burst lets smaller messages through at memory speed,
# so the line's intercept over all sizes would mean nothing.
alpha = pts[0][1] / 2
big = [(x, y) for x, y in pts if x * 4 >= 262144]
n = len(big); sx = sum(x for x, _ in big); sy = sum(y for _, y in big)
sxx = sum(x * x for x, _ in big); sxy = sum(x * y for x, y in big)
beta = (n * sxy - sx * sy) / (n * sxx - sx * sx)
print("bench alphabeta link=1gbit alpha_ms=%.4f beta_ms=%.3e (paper: alpha 0.436 ms, beta 3.6e-05 ms)" % (alpha * 1e3, beta * 1e3))
import math
k = math.ceil(0.001 * (1 << 20)); m = 1 << 20
for P in (2, 4, 8, 16):
    lg = math.ceil(math.log2(P))
    dense = 2 * (P - 1) * alpha + 2 * (P - 1) / P * m * beta
    topk = lg * alpha + 2 * (P - 1) * k * beta
    tree = 2 * lg * alpha + 4 * k * lg * beta
    ps = 2 * alpha + 4 * P * k * beta
    star = 2 * alpha + 4 * k * beta
    print("bench alphabeta model P=%d k=%d m=%d dense_allreduce_ms=%.3f topk_allgather_ms=%.3f gtopk_tree_ms=%.3f "
          "gtopk_ps_one_link_ms=%.3f gtopk_aggregator_per_worker_links_ms=%.3f"
          % (P, k, m, dense * 1e3, topk * 1e3, tree * 1e3, ps * 1e3, star * 1e3))
c.close()
EOF
wait $srv 2>/dev/null || true
