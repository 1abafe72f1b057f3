/* Fuzz target: the bodies of working-set pulls and their answers
 * (trainer/distributed/pull.h) on arbitrary bytes. The first byte picks the
 * decoder, the next 4 the dimension. A pull that reads must hold a key
 * block that decodes to exactly its count of increasing keys below the
 * dimension and re-encodes to the same body; a pull by id that reads names
 * a list of at most the dimension's keys and re-encodes to the same bytes;
 * an answer that reads must hold exactly its count of finite values (none
 * for a miss) and re-encode to the same bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/keys.h"
#include "fsgd/le.h"
#include "pull.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void pull_case(const uint8_t *data, size_t size, uint64_t dim)
{
    fsgd_pull_t pl;
    char err[256];
    if (fsgd_pull_get(data, size, dim, &pl, err, sizeof err) < 0) {
        if (!strstr(err, "pull:"))
            abort();
        return;
    }
    uint32_t n = pl.n;
    if (n > dim || pl.block_len + FSGD_PULL_HEADER != size)
        abort();
    uint32_t *keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return;
    uint32_t m = 0;
    if (fsgd_keys_decode(pl.block, pl.block_len, dim, keys, n, &m, err, sizeof err) == 0) {
        if (m != n)
            abort();
        fsgd_wire_buf_t b = {0};
        if (fsgd_pull_put(&b, pl.need, keys, m, err, sizeof err) < 0)
            abort();
        fsgd_pull_t back;
        if (fsgd_pull_get(b.p, b.n, dim, &back, err, sizeof err) < 0 || back.need != pl.need || back.n != n)
            abort();
        free(b.p);
    }
    free(keys);
}

static void values_case(const uint8_t *data, size_t size)
{
    fsgd_values_t in;
    char err[256];
    if (fsgd_values_get(data, size, &in, err, sizeof err) < 0) {
        if (!strstr(err, "values:"))
            abort();
        return;
    }
    uint32_t n = in.n;
    if (FSGD_VALUES_HEADER + (in.half ? 2 : 4) * (size_t)n != size || ((in.flags & FSGD_VALUES_MISS) && n))
        abort();
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return;
    for (uint32_t i = 0; i < n; i++)
        if (!isfinite(v[i] = fsgd_values_at(&in, i)))
            abort();
    fsgd_wire_buf_t b = {0};
    if (fsgd_values_put(&b, in.worker, in.at, in.keys_crc, v, n, in.half, in.flags) < 0 || b.n != size || memcmp(b.p, data, size))
        abort();
    free(b.p);
    free(v);
}

static void ref_case(const uint8_t *data, size_t size, uint64_t dim)
{
    fsgd_pull_ref_t r;
    char err[256];
    if (fsgd_pull_ref_get(data, size, dim, &r, err, sizeof err) < 0) {
        if (!strstr(err, "pull by id:"))
            abort();
        return;
    }
    if (size != FSGD_PULL_BY_ID_LEN || r.n > dim || !r.id)
        abort();
    fsgd_wire_buf_t b = {0};
    if (fsgd_pull_ref_put(&b, &r) < 0 || b.n != size || memcmp(b.p, data, size))
        abort();
    free(b.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    int which = data[0] % 3; /* 0, 1: as before the by-id pull came (the corpus) */
    uint64_t dim = 1 + (fsgd_le_get32(data + 1) % (1u << 24));
    if (which == 0)
        pull_case(data + 5, size - 5, dim);
    else if (which == 1)
        values_case(data + 5, size - 5);
    else
        ref_case(data + 5, size - 5, dim);
    return 0;
}
