/* fsgd_train_split_test (fsgd/train.h): fsgd train's test split without
 * --test, in the library so that rows given as arrays (fsgd/api.h) are
 * split as the same rows read from a file are. */
#include "train_split.h"
#include "fsgd/train.h"

#include "fsgd/error.h"

int fsgd_train_split_test(fsgd_csr_t *data, double fraction, uint64_t seed, fsgd_csr_t *test)
{
    fsgd_csr_t keep = {0};
    /* binary rows stay binary (fsgd/csr.h) */
    if (!data->val && (fsgd_csr_init_binary(&keep, 0, 0) < 0 || (!test->col && fsgd_csr_init_binary(test, 0, 0) < 0))) {
        fsgd_csr_free(&keep);
        return FSGD_E_NOMEM;
    }
    uint64_t s = seed ^ 0x5DEECE66DULL;
    for (size_t r = 0; r < data->n_rows; r++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        int rc = fsgd_csr_append_rows(u < fraction ? test : &keep, data, r, 1);
        if (rc < 0) {
            fsgd_csr_free(&keep);
            return rc;
        }
    }
    fsgd_csr_free(data);
    *data = keep;
    return 0;
}
