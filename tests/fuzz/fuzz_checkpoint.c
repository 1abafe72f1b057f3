/* Fuzz target: the aggregator's checkpoint loader (trainer/distributed/aggregator.c
 * through fsgd_agg_ckpt_check, the code a restarted aggregator runs on its
 * checkpoint file; KAFKA_FORMAT.md "Checkpoint").
 *
 * Input: one control byte, then the checkpoint bytes. Control bit 0: put
 * the right CRC32C into the last 4 bytes first (so the fuzzer gets past the
 * checksum); bit 1: expect the data the checkpoint itself names (its rows,
 * weights and step state's partition ranges; weights up to 2^16), so it can
 * be restored, otherwise a fixed small data set; bit 2: then change one of
 * those expectations (picked by bits 3-4), which must make it fail.
 * A restored checkpoint must write back to exactly the input bytes. A
 * follow job's checkpoint (versions 6 and 7, 10 and 11) is not checked
 * against rows and ranges, so for it those perturbations become the
 * weights'. Versions 8 to 11 have the writer's identity (shard, shards,
 * job name) between the header and the step state; 12 and 13 are 8 and 9
 * with a sparse table (its key list before the arrays). */
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/error.h"
#include "fsgd/le.h"

#include "agg_ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    size_t len = size - 1;
    uint8_t *p = malloc(len ? len : 1);
    if (!p)
        return 0;
    memcpy(p, data + 1, len);
    if ((ctl & 1) && len >= 4)
        fsgd_le_put32(p + len - 4, fsgd_crc32c(0, p, len - 4));
    uint64_t rows = 1000, mdim = 124;
    fsgd_wire_state_t exp = {0};
    if (fsgd_wire_state_alloc(&exp, 2) < 0)
        abort();
    exp.end[0] = 600;
    exp.end[1] = 400;
    const uint32_t version = len >= 12 ? fsgd_le_get32(p + 8) : 0;
    const int ident = version >= 8;
    if ((ctl & 2) && len >= 40) { /* the header: magic, version, gen, step, rows, weights */
        rows = fsgd_le_get64(p + 24);
        mdim = fsgd_le_get64(p + 32);
        size_t off = 40;
        if (ident) /* u32 shard, u32 shards, u8 job name length, the name */
            off = len >= 49 && (size_t)49 + p[48] <= len ? (size_t)49 + p[48] : len;
        char e[256];
        if (fsgd_wire_state_get(p, len, &off, &exp, e, sizeof e) < 0)
            fsgd_wire_state_alloc(&exp, 0);
    }
    int perturbed = 0;
    /* a follow job's checkpoint (versions 6, 7) does not name the data's rows
     * and ranges: its windows move on with the topic (checked against it on
     * restart), so only the weights and partition count must match */
    const int sparse = version >= 12; /* a sharded job's sparse table: never follow */
    const int follow = !sparse && (ident ? version - 4 : version) >= 6;
    if (ctl & 4) {
        int which = (ctl >> 3) & 3;
        if (follow && (which == 0 || which == 2))
            which = 1;
        if (which == 0)
            rows++;
        else if (which == 1)
            mdim++;
        else if (which == 2 && exp.nparts)
            exp.end[exp.nparts - 1]++;
        else
            fsgd_wire_state_alloc(&exp, exp.nparts + 1);
        perturbed = 1;
    }
    if (mdim > (1u << 16)) {
        fsgd_wire_state_free(&exp);
        free(p);
        return 0;
    }
    uint8_t *re = NULL;
    size_t relen = 0;
    char err[512] = "";
    int rc = fsgd_agg_ckpt_check(p, len, rows, mdim, &exp, &re, &relen, err, sizeof err);
    if (rc == 1) {
        if (perturbed || relen != len || memcmp(re, p, len) != 0)
            abort();
    } else if (rc >= 0 || strncmp(err, "checkpoint", 10) != 0 || !memchr(err, '\0', sizeof err)) {
        abort();
    }
    free(re);
    fsgd_wire_state_free(&exp);
    free(p);
    return 0;
}
