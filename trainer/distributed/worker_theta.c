/* The worker's θ and the backend made over it (worker_internal.h): the
 * whole model for a full replica, the largest step's values for a
 * working-set worker. */
#include <stdlib.h>

#include "fsgd/hugepages.h"
#include "worker_internal.h"

int worker_theta_reserve(worker_t *w, uint64_t n)
{
    if (n < 1)
        n = 1;
    if (w->theta && n <= w->theta_cap)
        return 0;
    if (w->theta && w->pull.on && n < 2 * w->theta_cap)
        n = 2 * w->theta_cap; /* a few regrowths at most */
    fsgd_backend_destroy(w->be);
    w->be = NULL;
    free(w->theta);
    w->theta_cap = 0;
    w->theta = calloc(n, sizeof *w->theta);
    if (!w->theta)
        return fsgd_err_fmt(w->err, w->errsz, FSGD_E_NOMEM, "worker: out of memory for %llu weights",
                            (unsigned long long)n);
    /* the replica takes every step's update at random keys (fsgd/hugepages.h) */
    fsgd_hugepages_advise(w->theta, n * sizeof *w->theta);
    w->theta_cap = n;
    /* a worker's share of a step (a fraction of the data: unknown here) */
    double share = w->job->train->batch >= 1       ? w->job->train->batch / (w->job->dist->workers > 0 ? w->job->dist->workers : 1)
                   : w->job->train->batch == FSGD_JOB_AUTO ? FSGD_TRAIN_BATCH_AUTO
                                                    : 0;
    w->be = fsgd_backend_new(fsgd_train_backend(w->job->train, share), n, w->theta, w->err, w->errsz);
    return w->be ? 0 : FSGD_E_DEVICE;
}

