"""An outside reader of an fsgd job's model topic, written from
trainer/KAFKA_FORMAT.md alone (no fsgd code): frames (FSGK header, CRC32C),
chunk reassembly with duplicate dropping, step state, snapshots (kind 3),
packed deltas (kind 4: bit-packed keys, raw or LZ4-block values) and v1
deltas (kind 2). Also a reader of fsgd model files (trainer/MODEL_FORMAT.md),
to compare against. Pure Python; only `read` needs confluent-kafka.

Authentication (KAFKA_FORMAT.md, "Authentication"): with the job key (a
file of 64 hex digits named by $FSGD_JOB_KEY) every frame must carry flag
AUTH and a valid tag after its CRC (lib/auth.py: a nonce and Poly1305 under a
per-message key from keyed BLAKE2b, standard library only); frames without a valid tag are skipped
and counted, never assembled. Without a key a tagged frame is an error (it
cannot be checked).

usage:
  kafka_model_reader.py read BROKERS NAME MODEL_FILE FSGD
      reads NAME.model from its log start to its high watermark and rebuilds
      the model: the FINAL snapshot must equal MODEL_FILE (what the aggregator
      wrote) bit for bit. The deltas are checked too: each step publishes one
      message, a snapshot every snapshot_every steps and at the end, else a
      packed delta, so no later snapshot holds the state a run of deltas ends
      in; instead, at every snapshot, the weights rebuilt here from the
      previous snapshot plus the deltas since must equal what
      `FSGD model assemble --partial` makes of the topic's bytes before it.
  kafka_model_reader.py selftest WIRE_CORPUS_DIR
      decodes the C encoder's packed deltas stored in the fuzz corpus
      (tests/fuzz/corpus/wire/pdelta_raw, pdelta_lz4: the LZ4 path, which a
      small job rarely takes) and checks them against the keys and values
      tests/fuzz/tools/gen_kafka_corpus.c encoded."""
import os
import struct
import sys

import auth

# --- CRC32C (Castagnoli, reflected 0x82F63B78, init and final xor ~0) ---
_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ (0x82F63B78 if _c & 1 else 0)
    _CRC_TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b'123456789') == 0xE3069283  # the standard check value


class FormatError(Exception):
    pass


class Unauthenticated(FormatError):
    pass


def load_key():
    path = os.environ.get('FSGD_JOB_KEY')
    return bytes.fromhex(open(path).read().strip()) if path else None


KEY = load_key()
JOB = ''  # the job a tag is bound to: NAME of cmd_read


def need(cond, msg):
    if not cond:
        raise FormatError(msg)


# --- frame ---
FRAME_HEADER = 36
KIND_GRAD, KIND_DELTA, KIND_SNAPSHOT, KIND_PDELTA, KIND_CDELTA = 1, 2, 3, 4, 5
FLAG_FINAL = 1
FLAG_AUTH = 4
TAG = 32


def parse_frame(v):
    """One Kafka message value -> dict of the header fields and the body chunk."""
    need(len(v) >= FRAME_HEADER + 4, 'frame of %d bytes, need at least 40' % len(v))
    need(v[0:4] == b'FSGK', 'bad magic %r' % bytes(v[0:4]))
    need(v[4] == 1, 'frame version %d' % v[4])
    kind, flags, gen, sender, step, chunk, nchunks, blen = struct.unpack_from('<BHIIQIII', v, 5)
    need(1 <= kind <= 5, 'unknown kind %d' % kind)
    need(flags & ~(FLAG_FINAL | FLAG_AUTH) == 0, 'reserved flag bits 0x%x' % flags)
    need(1 <= nchunks <= 65536 and chunk < nchunks, 'chunk %d of %d' % (chunk, nchunks))
    tag = TAG if flags & FLAG_AUTH else 0
    need(len(v) == FRAME_HEADER + blen + 4 + tag, 'body length %d in a %d-byte value' % (blen, len(v)))
    want, = struct.unpack_from('<I', v, FRAME_HEADER + blen)
    got = crc32c(v[:FRAME_HEADER + blen])
    need(want == got, 'crc32c 0x%08x, computed 0x%08x' % (want, got))
    end = FRAME_HEADER + blen + 4
    if KEY is None:
        need(not tag, 'an authenticated frame (flag AUTH) and no job key ($FSGD_JOB_KEY) to check it')
    elif not tag:
        raise Unauthenticated('no tag (flag AUTH unset)')
    else:
        if not auth.check(KEY, auth.FRAME, bytes(v[:end]), bytes(v[end:end + TAG]), JOB):
            raise Unauthenticated('the tag is not this job key\'s')
    return dict(kind=kind, flags=flags, gen=gen, sender=sender, step=step, chunk=chunk,
                nchunks=nchunks, body=bytes(v[FRAME_HEADER:FRAME_HEADER + blen]))


class Reassembler:
    """Chunks -> whole bodies; duplicates dropped by (kind, gen, sender, step, chunk)."""

    def __init__(self):
        self.pending = {}
        self.done = set()
        self.duplicates = 0

    def feed(self, f, index):
        """-> (body, index of its first chunk), or None while chunks are missing."""
        msg = (f['kind'], f['gen'], f['sender'], f['step'])
        if msg in self.done:
            self.duplicates += 1
            return None
        parts = self.pending.setdefault(msg, {})
        if f['chunk'] in parts:
            self.duplicates += 1
            return None
        parts[f['chunk']] = (f, index)
        need(all(p['nchunks'] == f['nchunks'] for p, _ in parts.values()), 'chunk counts differ in %r' % (msg,))
        if len(parts) < f['nchunks']:
            return None
        del self.pending[msg]
        self.done.add(msg)
        return (b''.join(parts[i][0]['body'] for i in range(f['nchunks'])),
                min(i for _, i in parts.values()))


# --- bodies ---
def parse_state(b, off):
    """Step state: u32 epoch, u32 nparts, u64 adam_t, nparts x {u64 start, pos, end, u32 quota}."""
    need(len(b) - off >= 16, 'step state truncated')
    epoch, nparts, adam_t = struct.unpack_from('<IIQ', b, off)
    off += 16
    need(len(b) - off >= 28 * nparts, 'step state partitions truncated')
    parts = [struct.unpack_from('<QQQI', b, off + 28 * i) for i in range(nparts)]
    for start, pos, end, _ in parts:
        need(start <= pos <= end, 'partition position outside its range')
    return dict(epoch=epoch, adam_t=adam_t, parts=parts), off + 28 * nparts


def parse_snapshot(b, off):
    """u32 kind, u32 flags (bit 0 has_bias, bit 1 sparse), f32 bias, u64 features,
    u64 n = features + has_bias, then f32 w[n], or (sparse) u64 nnz and nnz x
    {u32 j, f32 w[j]} with j increasing and < n, every other weight +0.0."""
    need(len(b) - off >= 28, 'snapshot header truncated')
    kind, flags, bias, dim, n = struct.unpack_from('<IIfQQ', b, off)
    off += 28
    has_bias, sparse = flags & 1, (flags >> 1) & 1
    need(1 <= kind <= 3 and flags <= 3 and n == dim + has_bias, 'snapshot header inconsistent')
    if sparse:
        need(len(b) - off >= 8, 'sparse snapshot count truncated')
        (nnz,) = struct.unpack_from('<Q', b, off)
        off += 8
        need(nnz <= n and len(b) - off == 8 * nnz, 'sparse snapshot of %d pairs has %d bytes' % (nnz, len(b) - off))
        w = [0.0] * n
        prev = -1
        for i in range(nnz):
            j, x = struct.unpack_from('<If', b, off + 8 * i)
            need(prev < j < n, 'sparse snapshot index %d out of order or range' % j)
            w[j] = x
            prev = j
    else:
        need(len(b) - off == 4 * n, 'snapshot of %d weights has %d bytes' % (n, len(b) - off))
        w = list(struct.unpack_from('<%df' % n, b, off))
    need(all(x == x and abs(x) != float('inf') for x in w), 'non-finite snapshot weight')
    return dict(kind=kind, has_bias=has_bias, bias=bias, dim=dim, w=w)


def decode_keys(b, off, dim):
    """Keys block -> (keys, offset after it). Bits are read LSB first."""
    need(len(b) - off >= 12, 'keys header truncated')
    n, stream_bytes, l = struct.unpack_from('<IIB', b, off)
    need(b[off + 9:off + 12] == b'\0\0\0', 'keys reserved bytes')
    need(l <= 5 and n <= dim, 'keys: l %d, n %d, dim %d' % (l, n, dim))
    k = 1 << l
    lens = b[off + 12:off + 12 + k]
    need(len(lens) == k and all(x <= 32 for x in lens) and list(lens) == sorted(lens), 'keys lengths')
    s0 = off + 12 + k
    stream = b[s0:s0 + stream_bytes]
    need(len(stream) == stream_bytes, 'keys stream truncated')
    bits = int.from_bytes(stream, 'little')
    pos, keys, prev = 0, [], -1
    for i in range(n):
        c = (bits >> pos) & (k - 1)
        pos += l
        w = lens[c]
        d = (bits >> pos) & ((1 << w) - 1)
        pos += w
        key = d if i == 0 else prev + 1 + d
        need(key < dim, 'key %d >= dim %d' % (key, dim))
        keys.append(key)
        prev = key
    need(pos <= 8 * stream_bytes and (pos + 7) // 8 == stream_bytes and bits >> pos == 0,
         'keys stream not used exactly (%d bits of %d bytes, padding must be zero)' % (pos, stream_bytes))
    return keys, s0 + stream_bytes


def lz4_block_decompress(src, out_len):
    """LZ4 block format (no frame), as LZ4_compress_default writes it."""
    dst = bytearray()
    i, n = 0, len(src)
    while True:
        need(i < n, 'LZ4: input ends before the last sequence')
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                need(i < n, 'LZ4: literal length truncated')
                i += 1
                lit += src[i - 1]
                if src[i - 1] != 255:
                    break
        need(i + lit <= n, 'LZ4: literals past the input')
        dst += src[i:i + lit]
        i += lit
        if i == n:  # the last sequence has literals only
            break
        need(i + 2 <= n, 'LZ4: offset truncated')
        dist = src[i] | (src[i + 1] << 8)
        i += 2
        need(0 < dist <= len(dst), 'LZ4: offset %d with %d bytes out' % (dist, len(dst)))
        ml = token & 15
        if ml == 15:
            while True:
                need(i < n, 'LZ4: match length truncated')
                i += 1
                ml += src[i - 1]
                if src[i - 1] != 255:
                    break
        ml += 4
        need(len(dst) + ml <= out_len, 'LZ4: output longer than %d bytes' % out_len)
        start = len(dst) - dist
        while ml > 0:  # the match may overlap what it writes
            piece = dst[start:start + min(ml, dist)]
            dst += piece
            start += len(piece)
            ml -= len(piece)
    need(len(dst) == out_len, 'LZ4: %d bytes out, expected %d' % (len(dst), out_len))
    return bytes(dst)


def decode_pdelta(b, off, dim):
    """Packed delta (kind 4) after the step state -> (keys, values, value_format)."""
    keys, off = decode_keys(b, off, dim)
    n = len(keys)
    need(len(b) - off >= 8, 'delta values header truncated')
    fmt, stored = b[off], struct.unpack_from('<I', b, off + 4)[0]
    need(fmt <= 1 and b[off + 1:off + 4] == b'\0\0\0', 'value format %d / reserved bytes' % fmt)
    off += 8
    need(len(b) - off == stored, 'delta values: %d stored bytes, %d present' % (stored, len(b) - off))
    raw = b[off:off + stored]
    if fmt == 0:
        need(stored == 4 * n, 'raw values: %d bytes for %d keys' % (stored, n))
    else:
        raw = lz4_block_decompress(raw, 4 * n)
    vals = list(struct.unpack('<%df' % n, raw))
    need(all(x == x and abs(x) != float('inf') for x in vals), 'non-finite delta value')
    return keys, vals, fmt


def decode_delta_v1(b, off, dim):
    """Delta (kind 2): u64 n, u32 keys[n], f32 values[n]."""
    need(len(b) - off >= 8, 'delta count truncated')
    n, = struct.unpack_from('<Q', b, off)
    off += 8
    need(len(b) - off == 8 * n, 'delta of %d keys has %d bytes' % (n, len(b) - off))
    keys = list(struct.unpack_from('<%dI' % n, b, off))
    vals = list(struct.unpack_from('<%df' % n, b, off + 4 * n))
    need(all(k < dim for k in keys) and all(x < y for x, y in zip(keys, keys[1:])), 'delta keys')
    return keys, vals


def f32bits(x):
    return struct.pack('<f', x)


class ModelTopic:
    """Applies whole model messages in topic order (KAFKA_FORMAT.md,
    "Reassembling the model"): a snapshot of the same or a higher generation
    replaces the weights; a delta of that generation with a later step sets
    its keys' new absolute values."""

    def __init__(self):
        self.asm = Reassembler()
        self.values = []     # every value read, for the stream prefixes
        self.snapshots = []  # (gen, step, final, snapshot)
        self.cur = None      # gen, step, snap_step, snap, w
        self.boundaries = [] # state just before a snapshot that followed deltas
        self.deltas = 0
        self.lz4_deltas = 0
        self.keys_applied = 0
        self.unauthenticated = 0

    def feed(self, value):
        index = len(self.values)
        self.values.append(value)
        try:
            f = parse_frame(value)
        except Unauthenticated:
            self.unauthenticated += 1  # not the job's: skipped, never assembled
            return
        need(f['kind'] != KIND_GRAD, 'a gradient frame on the model topic')
        # Coded deltas carry a lossy codec's message (codec/FORMAT.md), which
        # this reader does not decode; jobs with codec none write kind 4.
        need(f['kind'] != KIND_CDELTA, 'a coded delta (kind 5, lossy downlink): not decoded by this reader')
        got = self.asm.feed(f, index)
        if got is None:
            return
        body, first = got
        _, off = parse_state(body, 0)
        gen, step, cur = f['gen'], f['step'], self.cur
        if f['kind'] == KIND_SNAPSHOT:
            s = parse_snapshot(body, off)
            self.snapshots.append((gen, step, bool(f['flags'] & FLAG_FINAL), s))
            if cur is not None and gen < cur['gen']:
                return
            if cur is not None and cur['step'] > cur['snap_step']:
                self.boundaries.append(dict(prefix=first, gen=cur['gen'], step=cur['step'],
                                            snap=cur['snap'], w=list(cur['w'])))
            self.cur = dict(gen=gen, step=step, snap_step=step, snap=s, w=list(s['w']))
            return
        if cur is None or gen != cur['gen'] or step <= cur['step']:
            return  # an older generation's or an already-covered message
        dim = len(cur['w'])
        if f['kind'] == KIND_PDELTA:
            keys, vals, fmt = decode_pdelta(body, off, dim)
            self.lz4_deltas += fmt
        else:
            keys, vals = decode_delta_v1(body, off, dim)
        for k, v in zip(keys, vals):
            cur['w'][k] = v
        cur['step'] = step
        self.deltas += 1
        self.keys_applied += len(keys)


def read_model_file(path):
    """fsgd model file (MODEL_FORMAT.md) -> dict(kind, has_bias, bias, dim, bias_weight, entries{key: f32 bits})."""
    b = open(path, 'rb').read()
    need(len(b) >= 48 and b[:8] == b'FSGDMODL', '%s: not an fsgd model file' % path)
    version, kind, flags, reserved, dim, nnz, bias, bias_w, hcrc = struct.unpack_from('<HBBIQQffI', b, 8)
    need(version == 1, '%s: version %d' % (path, version))
    need(crc32c(b[:40]) == hcrc, '%s: header crc' % path)
    need(flags & ~1 == 0 and reserved == 0 and len(b) == 48 + 8 * nnz, '%s: flags/reserved/length' % path)
    need(crc32c(b[44:44 + 8 * nnz]) == struct.unpack_from('<I', b, 44 + 8 * nnz)[0], '%s: body crc' % path)
    entries = {}
    for i in range(nnz):
        k, v = struct.unpack_from('<If', b, 44 + 8 * i)
        need(k < dim and v != 0.0, '%s: entry %d' % (path, i))
        entries[k] = f32bits(v)
    return dict(kind=kind, has_bias=flags & 1, bias=bias, dim=dim, bias_weight=f32bits(bias_w), entries=entries)


def as_model(snap, w):
    """Weights of a snapshot's shape -> the model file's view: nonzero weights
    below `features`, the intercept at column `features`."""
    dim = snap['dim']
    return dict(kind=snap['kind'], has_bias=snap['has_bias'], bias=snap['bias'], dim=dim,
                bias_weight=f32bits(w[dim]) if snap['has_bias'] else f32bits(0.0),
                entries={k: f32bits(w[k]) for k in range(dim) if w[k] != 0.0})


def consume_topic(brokers, topic):
    """Every message of partition 0 of topic, from its log start to its high
    watermark: (lo, hi, values, offsets). The model topic is compacted, so
    offsets may have gaps (records the cleaner removed)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    c = Consumer({'bootstrap.servers': brokers, 'group.id': 'outside-reader', 'enable.auto.commit': False,
                  'auto.offset.reset': 'error', 'fetch.wait.max.ms': 10})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, lo)])
        out, offsets, nxt = [], [], lo
        while nxt < hi:
            m = c.poll(10)
            need(m is not None, '%s: no message at or after offset %d of [%d, %d) within 10 s' % (topic, nxt, lo, hi))
            if m.error():
                raise KafkaException(m.error())
            need(m.offset() >= nxt, '%s: offset %d where %d or later was next' % (topic, m.offset(), nxt))
            out.append(m.value())
            offsets.append(m.offset())
            nxt = m.offset() + 1
        return lo, hi, out, offsets
    finally:
        c.close()


def same_model(label, got, want):
    for field in ('kind', 'has_bias', 'bias', 'dim', 'bias_weight'):
        need(got[field] == want[field], '%s: %s %r, expected %r' % (label, field, got[field], want[field]))
    odd = set(want['entries']) ^ set(got['entries'])
    need(not odd, '%s: nonzero weights at keys %s differ' % (label, sorted(odd)[:10]))
    diff = [k for k in want['entries'] if want['entries'][k] != got['entries'][k]]
    need(not diff, '%s: weights at keys %s differ' % (label, diff[:10]))


def cmd_read(brokers, name, model_path, fsgd):
    global JOB
    JOB = name
    import os
    import subprocess
    import tempfile
    lo, hi, values, offsets = consume_topic(brokers, name + '.model')
    t = ModelTopic()
    for off, v in zip(offsets, values):
        try:
            t.feed(v)
        except FormatError as e:
            raise FormatError('%s.model offset %d: %s' % (name, off, e))
    need(t.snapshots, 'no complete snapshot on %s.model' % name)
    # the highest generation's FINAL snapshot (a later-step one of that generation
    # that is not FINAL cannot be the job's: it ended at its FINAL one)
    gen, step, final, snap = max(t.snapshots, key=lambda s: (s[0], s[2], s[1]))
    need(final, 'the last snapshot (step %d) is not FINAL: the job did not finish' % step)
    want = read_model_file(model_path)
    same_model('FINAL snapshot (generation %d, step %d) vs %s' % (gen, step, model_path),
               as_model(snap, snap['w']), want)
    if t.unauthenticated:
        print('%s.model: %d messages without this job key\'s tag skipped' % (name, t.unauthenticated))
    print('%s.model: offsets [%d, %d), %d duplicates dropped, %d snapshots, %d deltas (%d with LZ4 values, '
          '%d keys); the FINAL snapshot (generation %d, step %d) equals %s bit for bit: %d nonzero weights '
          '+ intercept, %d features' % (name, lo, hi, t.asm.duplicates, len(t.snapshots), t.deltas,
                                         t.lz4_deltas, t.keys_applied, gen, step, model_path,
                                         len(want['entries']), want['dim']))
    if len(values) < hi - lo:
        # Compaction kept only the newest record of each key: the deltas
        # between snapshots are no longer all there to replay.
        print('%s.model: %d of %d offsets compacted away; the deltas are not checked' % (name, hi - lo - len(values),
                                                                                       hi - lo))
        return
    need(t.boundaries, 'no deltas between snapshots to check')
    with tempfile.TemporaryDirectory() as d:
        for b in t.boundaries:
            stream, out = os.path.join(d, 'prefix'), os.path.join(d, 'partial.fsgd')
            with open(stream, 'wb') as f:
                f.write(b''.join(t.values[:b['prefix']]))
            keyed = ['--job-key-file', os.environ['FSGD_JOB_KEY']] if KEY else []
            r = subprocess.run([fsgd, 'model', 'assemble', '--partial', '--input', stream, '--name', name,
                                '--out', out] + keyed,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            need(r.returncode == 0, 'fsgd model assemble --partial failed: %s' % r.stderr.strip())
            same_model('step %d (snapshot + deltas) vs fsgd model assemble of offsets [%d, %d)'
                       % (b['step'], lo, lo + b['prefix']), as_model(b['snap'], b['w']), read_model_file(out))
    print('deltas: the weights rebuilt here at steps %s equal fsgd model assemble --partial of the topic up to '
          'there' % ', '.join(str(b['step']) for b in t.boundaries))


def cmd_selftest(corpus):
    # gen_kafka_corpus.c: DIM 124, keys i = 0, 4, 5, 9, 10, 14, ... (i += 4 after
    # a multiple of 5, else 1), values 0.01 i - 0.3 (raw) or 0.25 (LZ4);
    # each file is 5 bytes of fuzz control, then the packed delta.
    keys, i = [], 0
    while i < 124:
        keys.append(i)
        i += 1 + (3 if i % 5 == 0 else 0)
    for name, fmt, vals in (('pdelta_raw', 0, [f32bits(0.01 * k - 0.3) for k in keys]),
                            ('pdelta_lz4', 1, [f32bits(0.25)] * len(keys))):
        b = open('%s/%s' % (corpus, name), 'rb').read()[5:]
        got_keys, got_vals, got_fmt = decode_pdelta(b, 0, 125)
        # 0.01f * i - 0.3f in C's float arithmetic
        if fmt == 0:
            vals = [f32bits(struct.unpack('<f', f32bits(struct.unpack('<f', f32bits(0.01))[0] * k))[0]
                            - struct.unpack('<f', f32bits(0.3))[0]) for k in keys]
        need(got_fmt == fmt, '%s: value format %d, expected %d' % (name, got_fmt, fmt))
        need(got_keys == keys, '%s: keys %s' % (name, got_keys[:8]))
        need([f32bits(v) for v in got_vals] == vals, '%s: values differ' % name)
        print('%s: %d keys, value format %d (%s), decoded as encoded' % (name, len(keys), fmt, ('raw', 'LZ4')[fmt]))
    # a sparse snapshot (weights that are not +0.0 as pairs): 1000 features
    # and an intercept, w[3] = 0.5 and the intercept -1.0
    b = open('%s/snapshot_sparse' % corpus, 'rb').read()[5:]
    snap = parse_snapshot(b, 0)
    need(snap['has_bias'] == 1 and snap['dim'] == 1000 and len(snap['w']) == 1001, 'snapshot_sparse: shape')
    need(snap['w'][3] == 0.5 and snap['w'][1000] == -1.0 and sum(1 for x in snap['w'] if x) == 2,
         'snapshot_sparse: weights')
    print('snapshot_sparse: 1001 weights, 2 listed, decoded as encoded')


def main():
    a = sys.argv[1:]
    try:
        if len(a) == 5 and a[0] == 'read':
            cmd_read(a[1], a[2], a[3], a[4])
        elif len(a) == 2 and a[0] == 'selftest':
            cmd_selftest(a[1])
        else:
            sys.exit(__doc__)
    except FormatError as e:
        sys.exit('kafka_model_reader: %s' % e)


if __name__ == '__main__':
    main()
