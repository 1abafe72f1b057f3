/* Fuzz target: Kafka frames (fsgd_kframe_parse) and their reassembly
 * (fsgd_kasm_feed / fsgd_kasm_prune), trainer/KAFKA_FORMAT.md "Frame".
 *
 * Input: one control byte, then records `u16 len, len bytes` (the last one
 * is cut at the end of the input). A record of 40 bytes or more is a frame:
 * it is parsed, and an accepted frame must re-write to the same bytes and is
 * fed to the reassembler. A shorter record prunes pending messages below the
 * step its bytes spell (little-endian). Control bit 0 fixes each frame's
 * body length and CRC32C first, so the fuzzer reaches the header checks and
 * the reassembler instead of the checksum.
 *
 * A shadow of the reassembler checks that a completed body is the
 * concatenation, in index order, of the first copy of each chunk since the
 * message began, that duplicates are reported as such, and that a chunk
 * count that disagrees with the message's first chunk is an error. */
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct rec {
    uint8_t kind;
    uint32_t gen, sender, nchunks, chunk;
    uint64_t step;
    const uint8_t *body;
    uint32_t len;
} rec_t;

static int same_msg(const rec_t *r, const fsgd_kframe_t *f)
{
    return r->kind == f->kind && r->gen == f->gen && r->sender == f->sender && r->step == f->step;
}

/* Messages completed so far (as the reassembler's done ring; inputs are far
 * below its 8192 entries). */
typedef struct done {
    uint8_t kind;
    uint32_t gen, sender;
    uint64_t step;
} done_t;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int fix = data[0] & 1;
    uint8_t *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    size_t nrec_cap = size / 2 + 1, nrec = 0, ndone = 0;
    rec_t *recs = calloc(nrec_cap, sizeof *recs);
    done_t *dones = calloc(nrec_cap, sizeof *dones);
    uint8_t *scratch = malloc(size + FSGD_KFRAME_OVERHEAD);
    fsgd_kasm_t *a = fsgd_kasm_new();
    if (!recs || !dones || !scratch || !a)
        abort();
    char err[256];
    size_t off = 1;
    while (off < size) {
        size_t len = size - off < 2 ? 0 : fsgd_le_get16(buf + off);
        off += size - off < 2 ? size - off : 2;
        if (len > size - off)
            len = size - off;
        uint8_t *p = buf + off;
        off += len;
        if (ndone >= 8000)
            break; /* the reassembler remembers the last 8192 messages */
        if (len < FSGD_KFRAME_OVERHEAD) {
            uint64_t below = 0;
            for (size_t i = 0; i < len && i < 8; i++)
                below |= (uint64_t)p[i] << (8 * i);
            fsgd_kasm_prune(a, below);
            size_t k = 0;
            for (size_t i = 0; i < nrec; i++)
                if (recs[i].step >= below)
                    recs[k++] = recs[i];
            nrec = k;
            continue;
        }
        if (fix) {
            fsgd_le_put32(p + 32, (uint32_t)(len - FSGD_KFRAME_OVERHEAD));
            fsgd_le_put32(p + len - 4, fsgd_crc32c(0, p, len - 4));
        }
        fsgd_kframe_t f;
        size_t used = 0;
        err[0] = '\0';
        int rc = fsgd_kframe_parse(p, len, &f, &used, NULL, err, sizeof err);
        if (rc < 0) {
            if (rc != FSGD_E_FORMAT && rc != FSGD_E_TRUNCATED && rc != FSGD_E_CRC && rc != FSGD_E_VERSION)
                abort();
            if (strncmp(err, "frame: ", 7) != 0 || !strstr(err, "byte"))
                abort(); /* every rejection names the field's offset */
            continue;
        }
        if (used != FSGD_KFRAME_OVERHEAD + (size_t)f.body_len || used > len || f.body != p + FSGD_KFRAME_HEADER ||
            f.kind < FSGD_KMSG_GRAD || f.kind > FSGD_KMSG_DELTA_CODED ||
            (f.flags & ~(FSGD_KFLAG_FINAL | FSGD_KFLAG_SECTION)) || f.nchunks == 0 ||
            f.nchunks > FSGD_KBUS_MAX_CHUNKS || f.chunk >= f.nchunks)
            abort();
        if (fsgd_kframe_write(scratch, &f, NULL) != used || memcmp(scratch, p, used) != 0)
            abort();

        /* what the reassembler must answer */
        int dup_done = 0, dup_chunk = 0, conflict = 0;
        for (size_t i = 0; i < ndone; i++)
            if (dones[i].kind == f.kind && dones[i].gen == f.gen && dones[i].sender == f.sender &&
                dones[i].step == f.step)
                dup_done = 1;
        for (size_t i = 0; i < nrec; i++)
            if (same_msg(&recs[i], &f)) {
                if (recs[i].nchunks != f.nchunks)
                    conflict = 1;
                else if (recs[i].chunk == f.chunk)
                    dup_chunk = 1;
            }
        const uint8_t *body = NULL;
        size_t blen = 0;
        err[0] = '\0';
        rc = fsgd_kasm_feed(a, &f, &body, &blen, err, sizeof err);
        if (dup_done) {
            if (rc != FSGD_KASM_DUP)
                abort();
            continue;
        }
        if (conflict) {
            if (rc != FSGD_E_FORMAT || strncmp(err, "reassembly: ", 12) != 0)
                abort();
            continue;
        }
        if (dup_chunk) {
            if (rc != FSGD_KASM_DUP)
                abort();
            continue;
        }
        if (rc != FSGD_KASM_PENDING && rc != FSGD_KASM_DONE)
            abort();
        recs[nrec++] = (rec_t){f.kind, f.gen, f.sender, f.nchunks, f.chunk, f.step, f.body, f.body_len};
        size_t have = 0, total = 0;
        for (size_t i = 0; i < nrec; i++)
            if (same_msg(&recs[i], &f)) {
                have++;
                total += recs[i].len;
            }
        if ((rc == FSGD_KASM_DONE) != (have == f.nchunks))
            abort();
        if (rc != FSGD_KASM_DONE)
            continue;
        /* the body is the chunks in index order; its length their sum */
        if (blen != total || (blen && !body))
            abort();
        size_t at = 0;
        for (uint32_t c = 0; c < f.nchunks; c++) {
            size_t i = 0;
            while (i < nrec && !(same_msg(&recs[i], &f) && recs[i].chunk == c))
                i++;
            if (i == nrec || at + recs[i].len > blen || (recs[i].len && memcmp(body + at, recs[i].body, recs[i].len)))
                abort();
            at += recs[i].len;
        }
        size_t k = 0;
        for (size_t i = 0; i < nrec; i++)
            if (!same_msg(&recs[i], &f))
                recs[k++] = recs[i];
        nrec = k;
        dones[ndone++] = (done_t){f.kind, f.gen, f.sender, f.step};
    }
    fsgd_kasm_destroy(a);
    free(recs);
    free(dones);
    free(scratch);
    free(buf);
    return 0;
}
