/* Private to strategy/: GradiVeQ's PCA compressor (Yu et al., sec. 2 and 3,
 * "Compressor dimension d", eq. (6)), computed with LAPACK. */
#ifndef FSGD_GRADIVEQ_PCA_H
#define FSGD_GRADIVEQ_PCA_H

#include <stddef.h>

/* From L samples of a K-vector (row-major, samples[l*K + i]): the mean mu
 * (K doubles), the covariance's eigenvalues in decreasing order (eig, K
 * doubles), and the compressor: the d eigenvectors of the largest
 * eigenvalues as the columns of U (float, column-major, U[i + K*j]), each
 * with its largest-magnitude entry positive (so the result is one matrix, not
 * one up to signs). d is the smallest with Σ_{k<d} s_k / Σ s_k >= 1 - lambda
 * (eq. 6), at least 1 and at most dmax (0: no cap). Returns 0, FSGD_E_NOMEM,
 * or FSGD_E_STATE with err when LAPACK fails. */
int fsgd_gv_pca(const double *samples, size_t L, size_t K, double lambda, size_t dmax, double *mu, double *eig,
                float *U, size_t *d, char *err, size_t errsz);

#endif
