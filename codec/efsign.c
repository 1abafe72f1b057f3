/* Codec "efsign": the blockwise scaled sign compressor of dist-EF-blockSGDM
 * (Zheng, Huang, Kwok, NeurIPS 2019, section 3.2):
 *
 *   C_B(v) = [ ||v_G1||_1/|G1| · sign(v_G1), ..., ||v_GB||_1/|GB| · sign(v_GB) ]
 *
 * The partition {G_b}: the paper leaves it open (an input of Algorithm 4;
 * Proposition 1: C_B is δ-approximate with δ the worst block's
 * ||v_G||_1^2 / (|G| ||v_G||_2^2), large when a block's magnitudes are
 * similar, hence its one block per tensor). A sparse linear model has no
 * tensors, and blocks of consecutive keys mix hot and rare features whose
 * magnitudes differ by orders (measured: two-way compression then trains to
 * AUC 0.60 where uncompressed reaches 0.75, strategy/FORMAT.md). So entries
 * are first put in one of C magnitude classes (the binary exponent of the
 * largest |v| minus v's, capped at C-1: a factor 2 per class), and each
 * class's entries, in key order, form blocks of B. classes=1 is key-order
 * blocks. The partition travels in the order of the keys (layout=keys, the
 * default): one key block per class, so an entry costs the paper's 1 sign
 * bit + 32/B and the receiver rebuilds the blocks from the keys alone; or,
 * layout=ids, as a class id of ceil(log2 C) bits per entry after one key
 * block. Either way any decoder decodes any message. Exact zeros are not
 * sent (sign(0) = 0 in the paper). Keys travel with the FastSGD key coder
 * (fsgd/keys.h). C_B is homogeneous, C_B(c·v) = c·C_B(v) for every real c
 * (the classes of c·v are those of v), which the efsign strategy relies on
 * (strategy/FORMAT.md).
 * Layout: codec/FORMAT.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "fsgd/keys.h"

enum { P_BLOCK, P_CLASSES, P_LAYOUT };
/* layout: how the partition travels. "keys" (default): the keys of each
 * class are their own key block, class 0's first, so the order of the keys
 * is the partition and an entry costs 1 bit + 32/B; "ids": one key block and
 * a class id of ceil(log2 C) bits per entry (format v1 as first written). */
static const char *const efsign_layouts[] = {"keys", "ids", NULL};
enum { LAYOUT_KEYS = 0, LAYOUT_IDS = 1 };
static const codec_param_def_t efsign_params[] = {
    {"block", PARAM_INT, 1, 1048576, 0, 128, NULL},
    {"classes", PARAM_INT, 1, 16, 0, 4, NULL},
    {"layout", PARAM_ENUM, 0, 1, 0, LAYOUT_KEYS, efsign_layouts},
};

#define EFSIGN_FIXED 12 /* block (u32), key_bytes (u32), classes (u8), layout (u8), 2 reserved */
/* body byte 9: 0 class ids (or C = 1), 1 one key block per class */
#define WIRE_IDS 0
#define WIRE_KEYS 1

static size_t class_bits(uint32_t C) { return (size_t)codec_bitlen(C - 1); }

/* Class ids on the wire: only with layout=ids and more than one class. */
static int wire_ids(const fsgd_codec_t *c) { return (int)c->p[P_LAYOUT] == LAYOUT_IDS && c->p[P_CLASSES] > 1; }

static size_t efsign_bound(const fsgd_codec_t *c, size_t n)
{
    size_t b = (size_t)c->p[P_BLOCK], C = (size_t)c->p[P_CLASSES];
    /* C key blocks cost at most one block of n keys + C headers, length
     * tables and rounding (fsgd_keys_bound: 36 bytes per 8 keys, 5 per rest) */
    size_t keys = fsgd_keys_bound(n) + (C - 1) * (FSGD_KEYS_HEADER + 16 + 1 + 40);
    return EFSIGN_FIXED + keys + (wire_ids(c) ? (n * class_bits((uint32_t)C) + 7) / 8 : 0) +
           4 * (n / b + C + 1) + (n + 7) / 8;
}

/* The magnitude class of v: the binary exponent of the largest |v| minus
 * v's, capped at C-1, so a class holds values within a factor 2 of each
 * other (the last class: everything smaller). */
static inline uint32_t mag_class(int emax, float v, uint32_t C)
{
    int e;
    frexpf(v, &e);
    int d = emax - e;
    return d <= 0 ? 0 : (uint32_t)d >= C ? C - 1 : (uint32_t)d;
}

static int efsign_encode(fsgd_codec_t *c, const uint32_t *keys, const float *vals, size_t n, uint8_t *body,
                         size_t cap, size_t *body_len, uint32_t *count, fsgd_sparse_t *sent, char *err,
                         size_t errsz)
{
    size_t B = (size_t)c->p[P_BLOCK];
    uint32_t C = (uint32_t)c->p[P_CLASSES];
    int ids = wire_ids(c), lists = C > 1 && !ids;
    size_t cb = ids ? class_bits(C) : 0;
    /* scratch: nonzero keys (4n), their input index (4n), class (4n), keys
     * by class (4n), block sums (8(n+C+1)) */
    if (fsgd_codec_scratch(c, 28 * n + 8 * (C + 3)) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "efsign: out of memory");
    uint32_t *nzk = c->scratch, *idx = nzk + n, *cls = idx + n, *ck = cls + n;
    double *l1 = (double *)(void *)(ck + n); /* 16n bytes in: 8-aligned */
    size_t m = 0;
    float vmax = 0;
    for (size_t i = 0; i < n; i++)
        if (vals[i] != 0.0f) {
            nzk[m] = keys[i];
            idx[m++] = (uint32_t)i;
            vmax = fabsf(vals[i]) > vmax ? fabsf(vals[i]) : vmax;
        }
    int emax = 0;
    frexpf(vmax, &emax);
    size_t nc[16] = {0}, sbase[17] = {0};
    for (size_t j = 0; j < m; j++) {
        cls[j] = mag_class(emax, vals[idx[j]], C);
        nc[cls[j]]++;
    }
    for (uint32_t k = 0; k < C; k++)
        sbase[k + 1] = sbase[k] + (nc[k] + B - 1) / B;
    size_t nb = sbase[C];
    if (cap < EFSIGN_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "efsign: buffer of %zu body bytes", cap);
    /* the sign of entry j goes at its place in the order the keys travel:
     * key order, or class by class (key order within a class) */
    size_t cstart[17] = {0}, fill[16] = {0};
    for (uint32_t k = 0; k < C; k++)
        cstart[k + 1] = cstart[k] + nc[k];
    size_t klen = 0;
    if (lists) {
        for (size_t j = 0; j < m; j++)
            ck[cstart[cls[j]] + fill[cls[j]]++] = nzk[j];
        for (uint32_t k = 0; k < C; k++) {
            size_t kl = 0;
            FSGD_TRY(fsgd_keys_encode(ck + cstart[k], nc[k], body + EFSIGN_FIXED + klen, cap - EFSIGN_FIXED - klen,
                                      &kl, err, errsz));
            klen += kl;
        }
    } else {
        FSGD_TRY(fsgd_keys_encode(nzk, m, body + EFSIGN_FIXED, cap - EFSIGN_FIXED, &klen, err, errsz));
    }
    size_t cbytes = (m * cb + 7) / 8, need = EFSIGN_FIXED + klen + cbytes + 4 * nb + (m + 7) / 8;
    if (need > cap)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOSPACE, "efsign: need %zu body bytes, buffer has %zu", need, cap);
    fsgd_le_put32(body, (uint32_t)B);
    fsgd_le_put32(body + 4, (uint32_t)klen);
    body[8] = (uint8_t)C;
    body[9] = lists ? WIRE_KEYS : WIRE_IDS;
    body[10] = body[11] = 0;
    uint8_t *cids = body + EFSIGN_FIXED + klen, *scales = cids + cbytes, *signs = scales + 4 * nb;
    bitw_t bw = {cids, 0, 0};
    if (cb)
        for (size_t j = 0; j < m; j++)
            bitw_put(&bw, cls[j], (int)cb);
    bitw_end(&bw);
    /* ||p_G||_1 / |G| per block: class by class, blocks of B in key order,
     * summed in double in key order */
    size_t pos[16] = {0};
    memset(l1, 0, nb * sizeof *l1);
    for (size_t j = 0; j < m; j++) {
        uint32_t k = cls[j];
        l1[sbase[k] + pos[k]++ / B] += fabs((double)vals[idx[j]]);
    }
    for (uint32_t k = 0; k < C; k++)
        for (size_t b = sbase[k]; b < sbase[k + 1]; b++) {
            size_t first = (b - sbase[k]) * B, size = nc[k] - first < B ? nc[k] - first : B;
            float scale = (float)(l1[b] / (double)size);
            if (!isfinite(scale))
                scale = 3.40282347e38f; /* a sum beyond FLT_MAX saturates */
            fsgd_le_putf32(scales + 4 * b, scale);
            l1[b] = scale;
        }
    memset(signs, 0, (m + 7) / 8);
    memset(pos, 0, sizeof pos);
    for (size_t j = 0; j < m; j++) {
        float v = vals[idx[j]];
        int neg = signbit(v) != 0;
        size_t at = lists ? cstart[cls[j]] + pos[cls[j]] : j;
        signs[at >> 3] |= (uint8_t)(neg << (at & 7));
        size_t q = pos[cls[j]]++;
        if (sent) {
            float scale = (float)l1[sbase[cls[j]] + q / B];
            sent->keys[j] = nzk[j];
            sent->vals[j] = neg ? -scale : scale;
        }
    }
    if (sent)
        sent->n = m;
    *body_len = need;
    *count = (uint32_t)m;
    c->last.key_bits = 8 * (uint64_t)klen;
    c->last.value_bits = 8 * (uint64_t)cbytes + 32 * (uint64_t)nb + 8 * (uint64_t)((m + 7) / 8);
    c->last.header_bytes = EFSIGN_FIXED;
    return 0;
}

static int efsign_decode(const uint8_t *msg, size_t off, size_t blen, uint32_t count, uint64_t dim,
                         fsgd_sparse_t *out, char *err, size_t errsz)
{
    if (blen < EFSIGN_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED, "field efsign.block at offset %zu: body of %zu bytes < %d",
                            off, blen, EFSIGN_FIXED);
    const uint8_t *p = msg + off;
    uint32_t B = fsgd_le_get32(p), klen = fsgd_le_get32(p + 4), C = p[8], layout = p[9];
    if (B < 1 || B > 1048576)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.block at offset %zu: %u out of range [1, 2^20]",
                            off, B);
    if (C < 1 || C > 16)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.classes at offset %zu: %u out of range [1, 16]",
                            off + 8, C);
    if (layout > WIRE_KEYS || (layout == WIRE_KEYS && C == 1))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field efsign.layout at offset %zu: %u (0: class ids, 1: a key block per class, "
                            "only with classes > 1)",
                            off + 9, layout);
    if (p[10] | p[11])
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.reserved at offset %zu: not zero", off + 10);
    if (klen > blen - EFSIGN_FIXED)
        return fsgd_err_fmt(err, errsz, FSGD_E_TRUNCATED,
                            "field efsign.key_bytes at offset %zu: %u bytes but %zu left in the body", off + 4, klen,
                            blen - EFSIGN_FIXED);
    int lists = layout == WIRE_KEYS;
    size_t cb = lists ? 0 : class_bits(C);
    uint64_t cbytes = ((uint64_t)count * cb + 7) / 8, sbytes = ((uint64_t)count + 7) / 8;
    /* the scales follow the class ids; at least ceil(count/B), at most that + C */
    uint64_t fixed = EFSIGN_FIXED + (uint64_t)klen + cbytes + sbytes;
    if (fixed > blen || (blen - fixed) % 4)
        return fsgd_err_fmt(err, errsz, fixed > blen ? FSGD_E_TRUNCATED : FSGD_E_FORMAT,
                            "field count at offset 16: %u entries do not fit a body of %zu bytes", count, blen);
    size_t koff = off + EFSIGN_FIXED;
    char kerr[160];
    uint64_t nc[16] = {0}, sbase[17] = {0};
    size_t kat[17] = {0}; /* lists: where each class's key block starts within the keys */
    if (lists) {
        /* C key blocks, exactly key_bytes together, count keys together */
        uint64_t total = 0;
        for (uint32_t k = 0; k < C; k++) {
            uint32_t kn = 0;
            size_t ksize = 0;
            if (fsgd_keys_peek(p + EFSIGN_FIXED + kat[k], klen - kat[k], dim, &kn, &ksize, kerr, sizeof kerr) < 0)
                return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.keys at offset %zu: class %u: %s",
                                    koff + kat[k], k, kerr);
            nc[k] = kn;
            total += kn;
            kat[k + 1] = kat[k] + ksize;
        }
        if (total != count || kat[C] != klen)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field efsign.keys at offset %zu: %u key blocks of %llu keys in %zu bytes, header says "
                                "%u keys in %u",
                                koff, C, (unsigned long long)total, kat[C], count, klen);
    } else {
        uint32_t kn = 0;
        size_t ksize = 0;
        if (fsgd_keys_peek(p + EFSIGN_FIXED, klen, dim, &kn, &ksize, kerr, sizeof kerr) < 0)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.keys at offset %zu: %s", koff, kerr);
        if (kn != count || ksize != klen)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field efsign.keys at offset %zu: block of %u keys in %zu bytes, header says %u keys "
                                "in %u",
                                koff, kn, ksize, count, klen);
    }
    /* class ids: counts per class, then the number of scales */
    const uint8_t *cids = p + EFSIGN_FIXED + klen;
    size_t coff = koff + klen;
    bitr_t br = {cids, cids + cbytes, 0, 0};
    for (uint32_t j = 0; j < count && cb; j++) {
        uint32_t k = 0;
        bitr_get(&br, (int)cb, &k); /* cbytes holds count·cb bits */
        if (k >= C)
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.classes at offset %zu: entry %u class %u >= %u",
                                coff + (size_t)((uint64_t)j * cb / 8), j, k, C);
        nc[k]++;
    }
    if (!cb && !lists)
        nc[0] = count;
    if (cb && (count * cb) % 8 && cids[cbytes - 1] >> ((count * cb) % 8))
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.classes at offset %zu: padding bits set",
                            coff + (size_t)cbytes - 1);
    for (uint32_t k = 0; k < C; k++)
        sbase[k + 1] = sbase[k] + (nc[k] + B - 1) / B;
    uint64_t nb = sbase[C];
    if (fixed + 4 * nb != blen)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                            "field count at offset 16: %u entries in %llu blocks need a body of %llu bytes, body has %zu",
                            count, (unsigned long long)nb, (unsigned long long)(fixed + 4 * nb), blen);
    const uint8_t *scales = cids + cbytes, *signs = scales + 4 * nb;
    size_t soff = coff + (size_t)cbytes;
    for (uint64_t b = 0; b < nb; b++) {
        float s = fsgd_le_getf32(scales + 4 * b);
        if (!isfinite(s) || s < 0 || signbit(s))
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT,
                                "field efsign.scale at offset %zu: block %llu scale %g is not finite and >= 0",
                                soff + 4 * (size_t)b, (unsigned long long)b, (double)s);
    }
    if ((count & 7) && (signs[sbytes - 1] >> (count & 7)) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.signs at offset %zu: padding bits set",
                            soff + 4 * (size_t)nb + (size_t)sbytes - 1);
    FSGD_TRY(codec_reserve(out, count, err, errsz));
    if (!lists) {
        uint32_t kn = 0;
        int rc = fsgd_keys_decode(p + EFSIGN_FIXED, klen, dim, out->keys, count, &kn, kerr, sizeof kerr);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "field efsign.keys at offset %zu: %s", koff, kerr);
        uint64_t pos[16] = {0};
        bitr_t br2 = {cids, cids + cbytes, 0, 0};
        for (uint32_t j = 0; j < count; j++) {
            uint32_t k = 0;
            if (cb)
                bitr_get(&br2, (int)cb, &k);
            float s = fsgd_le_getf32(scales + 4 * (sbase[k] + pos[k]++ / B));
            out->vals[j] = (signs[j >> 3] >> (j & 7)) & 1 ? -s : s;
        }
        out->n = count;
        return 0;
    }
    /* one key block per class: decode them in the order they travel, then
     * merge the C increasing lists into key order; a key in two classes is
     * malformed (the merged keys must be strictly increasing) */
    uint32_t *tk = malloc(((size_t)count + 1) * (sizeof *tk + sizeof(float)));
    if (!tk)
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "decode: out of memory for %u entries", count);
    float *tv = (float *)(void *)(tk + count + 1);
    uint64_t at = 0, head[16], end[16];
    for (uint32_t k = 0; k < C; k++) {
        uint32_t kn = 0;
        int rc = fsgd_keys_decode(p + EFSIGN_FIXED + kat[k], kat[k + 1] - kat[k], dim, tk + at, (size_t)nc[k], &kn,
                                  kerr, sizeof kerr);
        if (rc < 0) {
            free(tk);
            return fsgd_err_fmt(err, errsz, rc, "field efsign.keys at offset %zu: class %u: %s", koff + kat[k], k,
                                kerr);
        }
        for (uint64_t q = 0; q < nc[k]; q++) {
            uint64_t t = at + q;
            float s = fsgd_le_getf32(scales + 4 * (sbase[k] + q / B));
            tv[t] = (signs[t >> 3] >> (t & 7)) & 1 ? -s : s;
        }
        head[k] = at;
        at += nc[k];
        end[k] = at;
    }
    for (uint32_t j = 0; j < count; j++) {
        uint32_t best = C;
        for (uint32_t k = 0; k < C; k++)
            if (head[k] < end[k] && (best == C || tk[head[k]] < tk[head[best]]))
                best = k;
        uint32_t key = tk[head[best]];
        if (j && key <= out->keys[j - 1]) {
            free(tk);
            return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "field efsign.keys at offset %zu: key %u in two classes",
                                koff, key);
        }
        out->keys[j] = key;
        out->vals[j] = tv[head[best]++];
    }
    free(tk);
    out->n = count;
    return 0;
}

const fsgd_codec_vt_t fsgd_codec_vt_efsign = {
    .name = "efsign",
    .id = CODEC_ID_EFSIGN,
    .lossy = 1,
    .ef_default = 0,
    .params = efsign_params,
    .n_params = 3,
    .bound = efsign_bound,
    .encode = efsign_encode,
    .decode = efsign_decode,
};
