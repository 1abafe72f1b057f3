/* GradiVeQ's PCA (Yu et al., sec. 2): mu is the mean of the L samples, C
 * their covariance (1/(L-1) normalization), U the eigenvectors of C by
 * decreasing eigenvalue (LAPACKE_dsyevr, OpenBLAS underneath), d from the
 * loss threshold lambda (eq. 6). */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "gradiveq_pca.h"

int fsgd_gv_pca(const double *samples, size_t L, size_t K, double lambda, size_t dmax, double *mu, double *eig,
                float *U, size_t *d, char *err, size_t errsz)
{
    *d = 0;
    if (L < 2 || K < 1)
        return fsgd_err_fmt(err, errsz, FSGD_E_ARG, "gradiveq pca: %zu samples of %zu values", L, K);
    double *C = malloc(sizeof(double) * K * K), *Z = malloc(sizeof(double) * K * K), *w = malloc(sizeof(double) * K);
    lapack_int *isuppz = malloc(sizeof(lapack_int) * 2 * K);
    if (!C || !Z || !w || !isuppz) {
        free(C), free(Z), free(w), free(isuppz);
        return fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "gradiveq pca: out of memory for K = %zu", K);
    }
    for (size_t i = 0; i < K; i++) {
        double s = 0;
        for (size_t l = 0; l < L; l++)
            s += samples[l * K + i];
        mu[i] = s / (double)L;
    }
    /* Upper triangle of C, column-major: C[i + K*j] for i <= j. */
    for (size_t j = 0; j < K; j++)
        for (size_t i = 0; i <= j; i++) {
            double s = 0;
            for (size_t l = 0; l < L; l++)
                s += (samples[l * K + i] - mu[i]) * (samples[l * K + j] - mu[j]);
            C[i + K * j] = s / (double)(L - 1);
        }
    lapack_int m = 0;
    lapack_int info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'A', 'U', (lapack_int)K, C, (lapack_int)K, 0, 0, 0, 0,
                                     0.0, &m, w, Z, (lapack_int)K, isuppz);
    if (info != 0 || (size_t)m != K) {
        free(C), free(Z), free(w), free(isuppz);
        return fsgd_err_fmt(err, errsz, FSGD_E_STATE, "gradiveq pca: LAPACKE_dsyevr info %d, %d of %zu eigenvalues",
                            (int)info, (int)m, K);
    }
    /* dsyevr returns ascending eigenvalues; round-off can make tiny ones negative. */
    double total = 0;
    for (size_t k = 0; k < K; k++) {
        eig[k] = w[K - 1 - k] > 0 ? w[K - 1 - k] : 0;
        total += eig[k];
    }
    size_t dd = 1;
    if (total > 0) {
        double acc = 0;
        for (dd = 0; dd < K;) {
            acc += eig[dd++];
            if (acc >= (1 - lambda) * total) /* eq. (6) */
                break;
        }
    }
    if (dmax && dd > dmax)
        dd = dmax;
    for (size_t j = 0; j < dd; j++) {
        const double *z = Z + K * (K - 1 - j);
        size_t arg = 0;
        for (size_t i = 1; i < K; i++)
            if (fabs(z[i]) > fabs(z[arg]))
                arg = i;
        double sign = z[arg] < 0 ? -1 : 1;
        for (size_t i = 0; i < K; i++)
            U[i + K * j] = (float)(sign * z[i]);
    }
    *d = dd;
    free(C), free(Z), free(w), free(isuppz);
    return 0;
}
