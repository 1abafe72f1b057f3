#include "fsgd/shard.h"

#include "fsgd/error.h"

uint64_t fsgd_shard_dim(uint64_t dim, uint32_t shard, uint32_t shards)
{
    if (shards == 0 || shard >= dim)
        return 0;
    return (dim - shard + shards - 1) / shards;
}

int fsgd_shard_split(const fsgd_sparse_t *in, uint32_t shards, fsgd_sparse_t *parts)
{
    size_t count[FSGD_SHARDS_MAX] = {0};
    if (shards == 0 || shards > FSGD_SHARDS_MAX)
        return FSGD_E_ARG;
    for (size_t i = 0; i < in->n; i++)
        count[in->keys[i] % shards]++;
    for (uint32_t s = 0; s < shards; s++) {
        FSGD_TRY(fsgd_sparse_reserve(&parts[s], count[s]));
        parts[s].n = 0;
    }
    for (size_t i = 0; i < in->n; i++) {
        fsgd_sparse_t *p = &parts[in->keys[i] % shards];
        p->keys[p->n] = in->keys[i] / shards;
        p->vals[p->n++] = in->vals[i];
    }
    return FSGD_E_OK;
}

int fsgd_shard_merge(const fsgd_sparse_t *parts, uint32_t shards, fsgd_sparse_t *out)
{
    size_t pos[FSGD_SHARDS_MAX] = {0}, total = 0;
    if (shards == 0 || shards > FSGD_SHARDS_MAX)
        return FSGD_E_ARG;
    for (uint32_t s = 0; s < shards; s++)
        total += parts[s].n;
    FSGD_TRY(fsgd_sparse_reserve(out, total));
    out->n = 0;
    /* Global keys in order: local key l of shard s is l*S + s, so the next
     * key is the smallest (local, shard) pair in that order. */
    for (;;) {
        uint64_t best = UINT64_MAX;
        uint32_t who = 0;
        for (uint32_t s = 0; s < shards; s++)
            if (pos[s] < parts[s].n) {
                uint64_t g = (uint64_t)parts[s].keys[pos[s]] * shards + s;
                if (g < best) {
                    best = g;
                    who = s;
                }
            }
        if (best == UINT64_MAX)
            break;
        out->keys[out->n] = (uint32_t)best;
        out->vals[out->n++] = parts[who].vals[pos[who]++];
    }
    return FSGD_E_OK;
}
