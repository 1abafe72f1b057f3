/* The data_summary event (data_summary.h): written by the producer of
 * NAME.data, read by the aggregator instead of a scan of the whole topic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/auth.h"
#include "fsgd/clock.h"
#include "fsgd/error.h"
#include "fsgd/kbus.h"
#include "ctl.h"
#include "data_summary.h"

#define EVENT "data_summary"

void fsgd_data_summary_add(fsgd_data_summary_t *s, const fsgd_csr_t *rows)
{
    s->rows += rows->n_rows;
    s->nnz += rows->nnz;
    if (rows->max_col > s->max_col)
        s->max_col = rows->max_col;
    double sum = 0; /* Σ|x| in the same pass as the largest */
    for (size_t i = 0; i < rows->nnz; i++) {
        double x = fabs((double)rows->val[i]);
        sum += x;
        if (x > s->xmax)
            s->xmax = x;
    }
    s->xsum += sum;
    for (size_t r = 0; r < rows->n_rows; r++)
        if (fabs(rows->label[r]) > s->ymax)
            s->ymax = fabs(rows->label[r]);
    fsgd_label_set_add(&s->labels, rows->label, rows->n_rows);
}

int fsgd_data_summary_send(fsgd_bus_client_t *prod, const fsgd_dist_job_t *job, const fsgd_data_summary_t *s)
{
    char topic[160];
    fsgd_kbus_topic(topic, sizeof topic, job->dist->name, "ctl");
    fsgd_ctl_json_t j = {0};
    fsgd_cj_begin(&j, EVENT, job->dist->name);
    /* what the rows were parsed as: another format would count differently */
    fsgd_cj_str(&j, "format", job->train->format);
    fsgd_cj_i64(&j, "hash_bits", job->train->hash_bits);
    fsgd_cj_u64(&j, "rows", s->rows);
    fsgd_cj_u64(&j, "max_col", s->max_col);
    fsgd_cj_u64(&j, "nnz", s->nnz);
    fsgd_cj_f64(&j, "xmax", s->xmax);
    fsgd_cj_f64(&j, "ymax", s->ymax);
    fsgd_cj_f64(&j, "xsum", s->xsum);
    fsgd_cj_i64(&j, "labels_more", s->labels.more);
    fsgd_cj_i64(&j, "labels_n", s->labels.n);
    static const char *lk[FSGD_LABELS_KEPT] = {"label0", "label1", "label2", "label3"};
    for (int i = 0; i < s->labels.n && i < FSGD_LABELS_KEPT; i++)
        fsgd_cj_f64(&j, lk[i], s->labels.v[i]);
    fsgd_cj_u32s(&j, "ends", s->ends, s->nparts);
    fsgd_cj_u64(&j, "block_rows", s->block_rows);
    fsgd_cj_u32s(&j, "part_rows", s->part_rows, s->nparts);
    int rc = fsgd_cj_end(&j);
    if (!rc)
        rc = fsgd_ctl_send(prod, topic, job->dist->name, EVENT, &j);
    fsgd_cj_free(&j);
    return rc;
}

int fsgd_data_summary_parse(const char *json, size_t len, const fsgd_dist_job_t *job, fsgd_data_summary_t *s)
{
    char ev[32], name[sizeof job->dist->name], fmt[sizeof job->train->format];
    double hb, rows, max_col, more, n;
    if (!fsgd_ctl_get_str(json, len, "event", ev, sizeof ev) || strcmp(ev, EVENT) ||
        !fsgd_ctl_get_str(json, len, "job", name, sizeof name) || strcmp(name, job->dist->name) ||
        !fsgd_ctl_get_str(json, len, "format", fmt, sizeof fmt) || strcmp(fmt, job->train->format) ||
        !fsgd_ctl_get_num(json, len, "hash_bits", &hb) || hb != job->train->hash_bits ||
        !fsgd_ctl_get_num(json, len, "rows", &rows) || !fsgd_ctl_get_num(json, len, "max_col", &max_col) ||
        !fsgd_ctl_get_num(json, len, "xmax", &s->xmax) || !fsgd_ctl_get_num(json, len, "ymax", &s->ymax) ||
        !fsgd_ctl_get_num(json, len, "labels_more", &more) || !fsgd_ctl_get_num(json, len, "labels_n", &n) ||
        !(n >= 0 && n <= FSGD_LABELS_KEPT) || !(max_col >= 0 && max_col <= UINT32_MAX) || !(rows >= 0))
        return 0;
    static const char *lk[FSGD_LABELS_KEPT] = {"label0", "label1", "label2", "label3"};
    memset(&s->labels, 0, sizeof s->labels);
    for (int i = 0; i < (int)n; i++)
        if (!fsgd_ctl_get_num(json, len, lk[i], &s->labels.v[i]))
            return 0;
    s->labels.n = (int)n;
    s->labels.more = more != 0;
    size_t np = 0, nr = 0;
    double k;
    if (!fsgd_ctl_get_u32s(json, len, "ends", s->ends, FSGD_SUMMARY_MAX_PARTS, &np) || np == 0 ||
        !fsgd_ctl_get_u32s(json, len, "part_rows", s->part_rows, FSGD_SUMMARY_MAX_PARTS, &nr) || nr != np ||
        !fsgd_ctl_get_num(json, len, "block_rows", &k) || !(k >= 1 && k <= UINT32_MAX) || k != floor(k))
        return 0;
    s->block_rows = (uint32_t)k;
    uint64_t sum = 0;
    for (size_t p = 0; p < np; p++) {
        /* full blocks but for the last one of a partition */
        uint64_t msgs = ((uint64_t)s->part_rows[p] + s->block_rows - 1) / s->block_rows;
        if (msgs != s->ends[p])
            return 0;
        sum += s->part_rows[p];
    }
    if (sum != (uint64_t)rows || !(s->xmax >= 0) || !(s->ymax >= 0))
        return 0;
    s->nparts = (uint32_t)np;
    s->rows = sum;
    /* optional: an older producer's summary has no count (0: unknown) */
    double nnz = 0;
    s->nnz = fsgd_ctl_get_num(json, len, "nnz", &nnz) && nnz >= 0 && nnz < 1.8e19 ? (uint64_t)nnz : 0;
    s->max_col = (uint64_t)max_col;
    double xsum = 0; /* optional too */
    s->xsum = fsgd_ctl_get_num(json, len, "xsum", &xsum) && xsum >= 0 && isfinite(xsum) ? xsum : 0;
    return 1;
}

int fsgd_data_summary_read(fsgd_bus_client_t *c, const fsgd_dist_job_t *job, fsgd_data_summary_t *s, char *err,
                           size_t errsz)
{
    fsgd_auth_t *auth = fsgd_bus_client_auth(c);
    if (!fsgd_auth_enabled(auth))
        return 0;
    char topic[160];
    fsgd_kbus_topic(topic, sizeof topic, job->dist->name, "ctl");
    int64_t lo, hi;
    FSGD_TRY(fsgd_bus_watermarks(c, topic, 0, &lo, &hi, 10000, err, errsz));
    if (hi <= lo)
        return 0;
    fsgd_bus_tp_t tp = {topic, 0, lo};
    FSGD_TRY(fsgd_bus_assign(c, &tp, 1, err, errsz));
    fsgd_data_summary_t *tmp = malloc(sizeof *tmp);
    int found = 0;
    int64_t next = lo;
    /* the events are few and small; a topic that does not deliver them
     * soon only costs the scan this would have saved */
    double until = fsgd_clock_s() + 5;
    while (tmp && next < hi && fsgd_clock_s() < until) {
        fsgd_bus_msg_t *m = fsgd_bus_poll(c, 100);
        if (!m)
            continue;
        if (!m->err && m->offset >= next) {
            next = m->offset + 1;
            if (m->val && fsgd_ctl_verify(auth, m, NULL, 0) == 0 && fsgd_data_summary_parse(m->val, m->len, job, tmp)) {
                *s = *tmp;
                found = 1;
            }
        }
        fsgd_bus_msg_destroy(m);
    }
    free(tmp);
    fsgd_bus_assign(c, NULL, 0, NULL, 0);
    if (next < hi)
        return 0; /* the newest events were not all read: a summary seen may be stale */
    return found;
}
