/* Random gradients for the codec tests (included by test_codec*.c only). */
#ifndef FSGD_CODEC_TESTUTIL_H
#define FSGD_CODEC_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "fsgd/keysort.h"
#include "fsgd/sparse.h"
#include "testlib.h"

static inline double tu_unif(uint64_t *s) { return (double)(fsgd_test_rand(s) >> 11) * 0x1p-53; }

/* n strictly increasing keys below dim (n <= dim) in one of several shapes,
 * and values with a wide range of magnitudes, zeros and -0.0. */
static inline void tu_gradient(uint64_t *s, uint64_t dim, size_t n, int shape, fsgd_sparse_t *g)
{
    if (n > dim)
        n = (size_t)dim;
    fsgd_sparse_reserve(g, n ? n : 1);
    g->n = 0;
    if (n == 0)
        return;
    uint64_t k = 0;
    switch (shape % 4) {
    case 0: /* uniform */
        if ((uint64_t)n * 2 > dim) { /* selection sampling */
            uint64_t need = n;
            for (uint64_t i = 0; i < dim && need; i++)
                if (tu_unif(s) * (double)(dim - i) < (double)need) {
                    g->keys[g->n++] = (uint32_t)i;
                    need--;
                }
        } else { /* draw, sort, drop repeats, top up */
            while (g->n < n) {
                while (g->n < n)
                    g->keys[g->n++] = (uint32_t)(fsgd_test_rand(s) % dim);
                fsgd_keysort(g->keys, g->n);
                size_t o = 1;
                for (size_t i = 1; i < g->n; i++)
                    if (g->keys[i] != g->keys[o - 1])
                        g->keys[o++] = g->keys[i];
                g->n = o;
            }
        }
        break;
    case 1: /* clustered, dense runs */
        k = fsgd_test_rand(s) % (dim - n + 1);
        for (size_t i = 0; i < n; i++) {
            g->keys[g->n++] = (uint32_t)k;
            uint64_t next = k + 1 + ((fsgd_test_rand(s) & 7) == 0 ? fsgd_test_rand(s) % 64 : 0);
            k = next <= dim - (n - i - 1) ? next : k + 1;
        }
        break;
    case 2: /* at the top of the key space */
        for (size_t i = 0; i < n; i++)
            g->keys[g->n++] = (uint32_t)(dim - n + i);
        if (n > 2 && dim > 2 * n)
            g->keys[0] = 0;
        break;
    default: /* power-of-two deltas */
        for (size_t i = 0; i < n; i++) {
            uint64_t delta = (uint64_t)1 << (fsgd_test_rand(s) % 20);
            if (i == 0 && (fsgd_test_rand(s) & 1))
                delta = 0;
            uint64_t kk = (i ? k : 0) + delta, maxk = dim - (n - i);
            if (kk > maxk)
                kk = i ? k + 1 : 0;
            g->keys[g->n++] = (uint32_t)kk;
            k = kk;
        }
        break;
    }
    for (size_t i = 0; i < g->n; i++) {
        uint64_t r = fsgd_test_rand(s);
        double mag = exp((tu_unif(s) - 0.7) * 30.0);
        float v = (float)((r & 1) ? -mag : mag);
        if ((r >> 8) % 50 == 0)
            v = 0.0f;
        if ((r >> 8) % 50 == 1)
            v = -0.0f;
        if ((r >> 8) % 97 == 2 && i > 0)
            v = g->vals[i - 1];
        g->vals[i] = v;
    }
}

#endif
