#!/usr/bin/env python3
"""Builds fsgd Kafka messages the way an outsider with write access to a
job's topics could (trainer/KAFKA_FORMAT.md, codec/FORMAT.md), for the
integration tests that inject forged or junk messages. Written from the
format documents, not from fsgd's code.

  frames.py header MSGFILE             -> "GEN STEP" of a frame
  frames.py grad OUT --gen G --sender S --step T [--rows R] [--keys N]
            [--value V] [--epoch E] [--dim D]
      a gradient frame (kind 1): no ranges, codec none with N keys of value V
  frames.py chunk OUT --gen G --sender S --step T --chunk I --nchunks N --size B
      one chunk of a frame of random body bytes, valid CRC
  frames.py snapshot OUT --gen G --step T --parts P --end E --dim D [--final]
      a model snapshot frame (kind 3): step state of P partitions each
      claiming offsets [0, E), then a zero model of D features + intercept
  frames.py delta OUT --gen G --step T --parts P --end E
      a model delta frame (kind 2, version 1's): the same step state, then
      weight 0 set to 1000
Frames are signed with the job key (flag AUTH and a tag after the CRC,
lib/auth.py, KAFKA_FORMAT.md "Authentication") read from --key FILE, by
default $FSGD_JOB_KEY; --key none writes them unsigned, as an outsider
without the key would. A tag is bound to the job's name: --job NAME, by
default $FSGD_JOB.
With --count K, K files OUT.0 .. OUT.K-1 are written, the i-th for step
T + i (and with --senders W, from sender i % W + 1).
"""
import argparse
import os
import struct
import sys

import auth

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    t = _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


KEY = None
JOB = ""


def load_key(path):
    if not path or path == "none":
        return None
    return bytes.fromhex(open(path).read().strip())


def frame(kind, gen, sender, step, chunk, nchunks, body, flags=0):
    if KEY:
        flags |= 4
    h = b"FSGK" + struct.pack("<BBHIIQIII", 1, kind, flags, gen, sender, step, chunk, nchunks, len(body))
    m = h + body
    m += struct.pack("<I", crc32c(m))
    if KEY:
        m += auth.tag(KEY, auth.FRAME, m, job=JOB)
    return m


def codec_none(dim, keys, values):
    n = len(keys)
    data = struct.pack("<%dI" % n, *keys) + struct.pack("<%df" % n, *values)
    body = struct.pack("<B3xII", 0, 8 * n, len(data)) + data
    m = b"FSGC" + struct.pack("<BBHQII", 1, 1, 0, dim, n, len(body)) + body
    return m + struct.pack("<I", crc32c(m))


def grad_body(epoch, rows, codec):
    # epoch, nranges, rows, loss_sum, t_grad, t_encode, raw_entries; no ranges
    return struct.pack("<IIQdddQ", epoch, 0, rows, 0.0, 0.0, 0.0, 0) + struct.pack("<I", len(codec)) + codec


def state(parts, end):
    st = struct.pack("<IIQ", 1, parts, 0)
    for _ in range(parts):
        st += struct.pack("<QQQI", 0, 0, end, 10)
    return st


def snapshot_body(parts, end, dim):
    return state(parts, end) + struct.pack("<IIfQQ", 1, 1, 1.0, dim, dim + 1) + b"\0\0\0\0" * (dim + 1)


def delta_body(parts, end):
    return state(parts, end) + struct.pack("<QIf", 1, 0, 1000.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["header", "grad", "chunk", "snapshot", "delta"])
    ap.add_argument("--key", default=os.environ.get("FSGD_JOB_KEY"))
    ap.add_argument("--job", default=os.environ.get("FSGD_JOB", ""))  # tags are bound to the job's name
    ap.add_argument("--final", action="store_true")
    ap.add_argument("path")
    ap.add_argument("--gen", type=int, default=0)
    ap.add_argument("--sender", type=int, default=0)
    ap.add_argument("--step", type=int, default=0)
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--keys", type=int, default=124)
    ap.add_argument("--dim", type=int, default=124)
    ap.add_argument("--value", type=float, default=3e37)
    ap.add_argument("--epoch", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=0)
    ap.add_argument("--nchunks", type=int, default=1)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--senders", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--end", type=int, default=0)
    a = ap.parse_args()
    global KEY, JOB
    KEY = load_key(a.key)
    JOB = a.job
    if a.what == "header":
        b = open(a.path, "rb").read()
        if len(b) < 40 or b[:4] != b"FSGK":
            sys.exit("not a frame")
        gen, sender, step = struct.unpack_from("<IIQ", b, 8)
        print(gen, step)
        return
    for i in range(a.count or 1):
        step = a.step + i if a.count else a.step
        sender = i % a.senders + 1 if a.senders else a.sender
        if a.what == "snapshot":
            out = frame(3, a.gen, 0, step, 0, 1, snapshot_body(a.parts, a.end, a.dim), 1 if a.final else 0)
        elif a.what == "delta":
            out = frame(2, a.gen, 0, step, 0, 1, delta_body(a.parts, a.end))
        elif a.what == "grad":
            keys = list(range(a.keys))
            body = grad_body(a.epoch, a.rows, codec_none(a.dim, keys, [a.value] * a.keys))
            out = frame(1, a.gen, sender, step, 0, 1, body)
        else:
            out = frame(1, a.gen, sender, step, a.chunk, a.nchunks, os.urandom(a.size))
        open("%s.%d" % (a.path, i) if a.count else a.path, "wb").write(out)


if __name__ == "__main__":
    main()
