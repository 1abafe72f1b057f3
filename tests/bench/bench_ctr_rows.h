/* The generated CTR rows the aggregator benches share (bench_agg_capacity,
 * bench_scale_inputs): fsgd gen's, 40 nonzeros a row, Zipf 1.1, seed 1, the
 * rows tests/bench/dist_vs_local.sh trains on. */
#ifndef FSGD_BENCH_CTR_ROWS_H
#define FSGD_BENCH_CTR_ROWS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/csr.h"
#include "fsgd/gen.h"

static int bench_ctr_rows(fsgd_csr_t *m, size_t rows, uint64_t dim, char *err, size_t errsz)
{
    fsgd_gen_opts_t o;
    fsgd_gen_opts_default(&o);
    o.dim = dim, o.nnz = 40, o.zipf = 1.1, o.seed = 1;
    fsgd_gen_t *g = fsgd_gen_new(&o, err, errsz);
    if (!g)
        return -1;
    size_t maxr = fsgd_gen_max_row(g);
    uint32_t *col = malloc(sizeof *col * maxr);
    float *val = malloc(sizeof *val * maxr);
    memset(m, 0, sizeof *m);
    int rc = col && val ? 0 : -1;
    for (size_t r = 0; r < rows && !rc; r++) {
        double label, margin;
        size_t n = fsgd_gen_next(g, col, val, &label, &margin);
        rc = fsgd_csr_append_row(m, label, col, val, n);
    }
    free(col), free(val);
    fsgd_gen_destroy(g);
    if (rc)
        snprintf(err, errsz, "out of memory");
    return rc;
}

#endif
