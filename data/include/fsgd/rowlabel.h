/* What a training row's label carries beside its class: its importance
 * weight (VW's importance, --class-weight), and any two label values mapped
 * onto the two classes.
 *
 * Encoding: a classification row's label is +w (positive class) or -w
 * (negative class) with w > 0 its weight; unweighted rows keep +1 and -1 (or
 * 0 for a 0/1 negative, weight 1). The loss's label is the sign
 * (fsgd_loss_label), the gradient and loss of a row are scaled by
 * fsgd_rowlabel_weight; so weights travel wherever labels travel (batches,
 * shards, caches, spills) with no array of their own. Regression labels
 * (--model linear) are values, never weights. */
#ifndef FSGD_ROWLABEL_H
#define FSGD_ROWLABEL_H

#include <math.h>
#include <stddef.h>

#include "fsgd/csr.h"

/* The importance weight a classification label carries (1 for 0 and ±1). */
static inline double fsgd_rowlabel_weight(double label) { return label == 0 ? 1.0 : fabs(label); }

/* Weighs rows [first, m->n_rows) of m: row r's label becomes ±(weight[r - first]
 * · pos or neg), its class kept (label > 0 positive); weight may be NULL (1
 * each). Rows of weight 0 are dropped (they would teach nothing, and a label
 * of 0 reads as weight 1). Returns the rows dropped. */
size_t fsgd_rowlabel_weigh(fsgd_csr_t *m, size_t first, const double *weight, double pos, double neg);

/* Reads "POS,NEG" (s[0..n): two finite numbers > 0, the weights of the
 * positive and the negative class's rows) into *pos and *neg. Returns 0,
 * or -1 when s is not that. */
int fsgd_rowlabel_class_weight_parse(const char *s, size_t n, double *pos, double *neg);

/* Any two distinct label values lo < hi, as LIBLINEAR takes them: when the
 * labels of m are exactly two values other than {0, 1} and {-1, 1}, maps hi
 * to +1 and lo to -1 and returns 1 with *lo, *hi set; 0 when there was
 * nothing to map (already 0/1 or ±1, one value, or more than two). */
int fsgd_rowlabel_map_two(double *label, size_t n, double *lo, double *hi);

#endif
