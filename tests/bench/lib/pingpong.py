"""α and β of a link, as tests/bench/alphabeta.sh measures them: a TCP
ping-pong of messages of s bytes (4 B .. 8 MiB) over one connection, each
answered by a 1-byte ack; α = half the median round trip of 4 bytes, β = the
least-squares slope in seconds per byte over messages of 1 MiB and more (tbf's
128 KiB burst passes smaller ones at memory speed).

    pingpong.py serve ADDR PORT          answer one client, then exit
    pingpong.py probe ADDR PORT LINK     print "bench paper_alphabeta link=LINK alpha_s=.. beta_s_per_byte=.."
"""
import socket
import statistics
import sys
import time


def serve(addr, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        h = c.recv(8, socket.MSG_WAITALL)
        if len(h) < 8:
            return
        n, got = int.from_bytes(h, "little"), 0
        while got < n:
            b = c.recv(min(1 << 20, n - got))
            if not b:
                return
            got += len(b)
        c.sendall(b"k")


def fit(points):
    """least-squares line y = a + b x over (x, y): (a, b)"""
    n = len(points)
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return (sy - b * sx) / n, b


def probe(addr, port, link):
    for tries in range(50):
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            if tries == 49:
                raise
            time.sleep(0.1)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pts = []
    for s in (4, 1024, 65536, 1 << 20, 2 << 20, 4 << 20, 8 << 20):
        buf, ts = bytes(s), []
        reps = 30 if s <= 65536 else 6
        for r in range(reps + 2):
            t0 = time.perf_counter()
            c.sendall(s.to_bytes(8, "little") + buf)
            c.recv(1)
            if r >= 2:
                ts.append(time.perf_counter() - t0)
        pts.append((s, statistics.median(ts)))
    c.close()
    alpha = pts[0][1] / 2
    _, beta = fit([(x, y) for x, y in pts if x >= 1 << 20])
    print("bench paper_alphabeta link=%s alpha_s=%.6g beta_s_per_byte=%.6g effective_MBps=%.1f"
          % (link, alpha, beta, 1e-6 / beta if beta > 0 else float("inf")))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        probe(sys.argv[2], int(sys.argv[3]), sys.argv[4])
