#!/usr/bin/env python3
"""Checks of a running fsgd serve that need sockets or threads (serve_cli.sh).

  serve_check.py reload URL LIVE ROWS A.model:A.scores B.model:B.scores BAD...
      client threads score ROWS in a loop while LIVE is replaced by rename
      with A and B in turn (each swap awaited on GET /model), then with each
      BAD file (each refusal awaited): no request fails, and every answer's
      scores are exactly those of the file its X-Fsgd-Model-Version names
  serve_check.py limits HOST PORT     (a server started with --max-conns 2)
      a third connection waits unanswered while two are open; idle
      connections are closed by the server (--timeout), then it is answered;
      a body that trickles in past --timeout is closed and counted
  serve_check.py drain HOST PORT PID ROWS
      a request whose body is half sent when SIGTERM comes is still answered
      200, then the server exits
Every wait is bounded and says what it waited for when it gives up.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def wait_for(what, cond, limit=30.0):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > limit:
            fail("gave up after %.0f s waiting for %s" % (limit, what))
        time.sleep(0.02)


def model_info(host, port):
    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/model/default")
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        fail("GET /model/default: %d %s" % (r.status, body))
    return json.loads(body)


def replace(src, live):
    tmp = live + ".tmp"
    shutil.copyfile(src, tmp)
    os.rename(tmp, live)


def reload_check(url, live, rows_path, good, bad):
    host, port = url.split("//")[1].split(":")
    port = int(port)
    rows = open(rows_path, "rb").read()
    files, expect = [], {}
    for g in good:
        path, scores = g.split(":")
        files.append(path)
        expect[path] = open(scores).read()
    # Version 1 is what the server started with: files[0]'s copy at LIVE.
    version_file = {1: files[0]}
    stop = threading.Event()
    errors, answers = [], []
    lock = threading.Lock()

    def client():
        c = http.client.HTTPConnection(host, port, timeout=30)
        n = 0
        while not stop.is_set():
            try:
                c.request("POST", "/score", body=rows, headers={"Content-Type": "text/plain"})
                r = c.getresponse()
                body = r.read().decode()
                if r.status != 200:
                    raise RuntimeError("status %d: %s" % (r.status, body))
                v = int(r.getheader("X-Fsgd-Model-Version"))
                with lock:
                    answers.append((v, body))
                n += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                with lock:
                    errors.append(repr(e))
                c.close()
                c = http.client.HTTPConnection(host, port, timeout=30)
        c.close()

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    wait_for("answers from version 1", lambda: len(answers) > 0)
    version = 1
    swaps = 8
    for i in range(1, swaps + 1):
        src = files[i % len(files)]
        replace(src, live)
        version += 1
        version_file[version] = src
        wait_for("version %d on GET /model" % version, lambda: model_info(host, port)["version"] == version)
        seen = len(answers)
        wait_for("answers after version %d" % version, lambda: len(answers) > seen + 4)
    for path in bad:
        before = model_info(host, port)["refused"]
        replace(path, live)
        wait_for("the refusal of %s" % path, lambda: model_info(host, port)["refused"] == before + 1)
        info = model_info(host, port)
        if info["version"] != version:
            fail("%s: version %d serves after a refusal, expected %d" % (path, info["version"], version))
        seen = len(answers)
        wait_for("answers after refusing %s" % path, lambda: len(answers) > seen + 4)
    stop.set()
    for t in threads:
        t.join()
    if errors:
        fail("%d failed requests during reloads, first: %s" % (len(errors), errors[0]))
    versions = set()
    for v, body in answers:
        if v not in version_file:
            fail("an answer from version %d, never published" % v)
        if body != expect[version_file[v]]:
            fail("version %d answered scores that are not %s's:\n%s\nexpected:\n%s" %
                 (v, version_file[v], body, expect[version_file[v]]))
        versions.add(v)
    last = [b for v, b in answers if v == version]
    if not last:
        fail("no answer from the last good version %d after the refusals" % version)
    print("reload: %d answers, 0 failed, versions %s each scoring as its file; %d bad files refused" %
          (len(answers), sorted(versions), len(bad)))


def still_open(s):
    """The peer has not closed s (nothing to read, no EOF)."""
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        s.setblocking(True)


def limits_check(host, port):
    port = int(port)
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    held = []
    for _ in range(2):
        s = socket.create_connection((host, port), timeout=30)
        s.sendall(req)
        if b"200 OK" not in s.recv(4096):
            fail("a connection under the limit was not answered")
        held.append(s)  # kept alive: the server now holds two
    # A third waits unaccepted while the two are open.
    s3 = socket.create_connection((host, port), timeout=0.5)
    s3.sendall(req)
    try:
        early = s3.recv(4096)
    except socket.timeout:
        early = b""
    if early and all(still_open(s) for s in held):
        fail("a third connection over --max-conns 2 was answered while two were open: %r" % early[:80])
    # The held connections are idle: the server closes them (--timeout) ...
    for s in held:
        s.settimeout(60)
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        if data:
            fail("an idle connection got data instead of being closed: %r" % data[:80])
        s.close()
    # ... and then the third is answered.
    s3.settimeout(60)
    got = early
    while b"\r\n\r\nok\n" not in got:
        chunk = s3.recv(4096)
        if not chunk:
            fail("the third connection was closed unanswered: %r" % got[:80])
        got += chunk
    s3.close()
    # A body that keeps coming, a byte every 0.5 s, is closed --timeout after
    # its headers (the daemon's own timeout closes silent connections only),
    # long before its 60 bytes are in.
    s4 = socket.create_connection((host, port), timeout=60)
    s4.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 60\r\n\r\n")
    closed = False
    for _ in range(60):
        time.sleep(0.5)
        try:
            s4.sendall(b"1")
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        if not still_open(s4):
            closed = True
            break
    s4.close()
    if not closed:
        fail("a client sending a byte every 0.5 s kept its connection for 30 s at --timeout 2")
    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    if '\nfsgd_serve_errors_total{kind="timeout"} 1\n' not in text:
        fail("the slow body was not counted: %s" % [l for l in text.splitlines() if "errors_total" in l])
    print("limits: a third connection waits at --max-conns 2; idle connections closed by --timeout, then it is "
          "answered; a body slower than --timeout closed and counted")


def drain_check(host, port, pid, rows_path):
    port = int(port)
    pid = int(pid)
    rows = open(rows_path, "rb").read()
    s = socket.create_connection((host, port), timeout=30)
    head = ("POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" %
            len(rows)).encode()
    half = len(rows) // 2
    s.sendall(head + rows[:half])

    def in_flight():
        c = http.client.HTTPConnection(host, port, timeout=30)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        # This GET counts itself: 2 when the POST's headers are in.
        return "\nfsgd_serve_in_flight 2\n" in text
    wait_for("the half-sent request in flight (fsgd_serve_in_flight)", in_flight)
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.3)
    s.sendall(rows[half:])
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    if not data.startswith(b"HTTP/1.1 200"):
        fail("the request in flight at SIGTERM was not answered 200: %r" % data[:200])
    print("drain: the request in flight at SIGTERM answered 200")


def main():
    cmd = sys.argv[1]
    if cmd == "reload":
        url, live, rows = sys.argv[2:5]
        good = [a for a in sys.argv[5:] if ":" in a]
        bad = [a for a in sys.argv[5:] if ":" not in a]
        reload_check(url, live, rows, good, bad)
    elif cmd == "limits":
        limits_check(sys.argv[2], sys.argv[3])
    elif cmd == "drain":
        drain_check(*sys.argv[2:6])
    else:
        fail("unknown command " + cmd)


if __name__ == "__main__":
    main()
