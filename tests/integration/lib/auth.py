"""fsgd message tags (trainer/KAFKA_FORMAT.md, "Authentication"), written
from the format document with the standard library only: a tag is a 16-byte
nonce and the Poly1305 tag (RFC 8439) of the message under the one-time key
BLAKE2b(key=job key, digest 32 bytes) of b"2", the domain byte, the nonce,
the job name's length (one byte) and the job name. Domains: 1 frames (bytes
up to and with the CRC), 2 NAME.ctl events (the Kafka key, a zero byte, the
value), 3 NAME.data rows (the partition, u32 little-endian, then the
value: row_tag). A nonce is the writer's incarnation (8 random bytes a
process draws once) and its sequence number (u64 little-endian, 1, 2, ...):
readers refuse a copy of a message by it (KAFKA_FORMAT.md, "Exactly once
under replay")."""
import hashlib
import hmac
import os

FRAME, CTL, DATA = 1, 2, 3
TAG = 32


def poly1305(key, msg):
    r = int.from_bytes(key[:16], 'little') & 0x0ffffffc0ffffffc0ffffffc0fffffff
    s = int.from_bytes(key[16:32], 'little')
    p = (1 << 130) - 5
    acc = 0
    for i in range(0, len(msg), 16):
        acc = (acc + int.from_bytes(msg[i:i + 16] + b'\x01', 'little')) * r % p
    return ((acc + s) & ((1 << 128) - 1)).to_bytes(16, 'little')


# RFC 8439 section 2.5.2
assert poly1305(bytes.fromhex('85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b'),
                b'Cryptographic Forum Research Group').hex() == 'a8061dc1305136c6c22b8baf0c0127a9'


def _poly(key, domain, nonce, msg, job):
    job = job.encode() if isinstance(job, str) else job
    otk = hashlib.blake2b(b'2' + bytes([domain]) + nonce + bytes([len(job)]) + job, key=key,
                          digest_size=32).digest()
    return poly1305(otk, msg)


_INCARNATION = os.urandom(8)
_sequence = 0


def next_nonce():
    global _sequence
    _sequence += 1
    return _INCARNATION + _sequence.to_bytes(8, 'little')


def tag(key, domain, msg, nonce=None, job=b''):
    nonce = next_nonce() if nonce is None else nonce
    return nonce + _poly(key, domain, nonce, msg, job)


def row_tag(key, job, partition, line, nonce=None):
    """The tag of a NAME.data row message of job `job` on `partition`."""
    return tag(key, DATA, partition.to_bytes(4, 'little') + line, nonce, job)


def check(key, domain, msg, t, job=b''):
    return len(t) == TAG and hmac.compare_digest(_poly(key, domain, bytes(t[:16]), bytes(msg), job),
                                                 bytes(t[16:]))


def load_key(path):
    return bytes.fromhex(open(path).read().strip()) if path and path != 'none' else None
