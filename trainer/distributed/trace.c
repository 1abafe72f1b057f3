/* The run trace (trace.h; the types in fsgd/dist.h). */
#include "trace.h"

#include <math.h>

void fsgd_trace_add(fsgd_trace_t *t, const fsgd_trace_point_t *pt)
{
    if (t->stride == 0)
        t->stride = 1;
    t->last = *pt;
    if (t->seen++ % t->stride)
        return;
    if (t->n == FSGD_TRACE_MAX) {
        /* keep points 0, 2, 4, ...: offered indices that are multiples of
         * the doubled stride, so the spacing stays even */
        for (uint32_t i = 0; i < FSGD_TRACE_MAX / 2; i++)
            t->p[i] = t->p[2 * i];
        t->n = FSGD_TRACE_MAX / 2;
        t->stride *= 2;
        if ((t->seen - 1) % t->stride)
            return;
    }
    t->p[t->n++] = *pt;
}

static const fsgd_trace_point_t *point(const fsgd_trace_t *t, uint32_t i)
{
    return i < t->n ? &t->p[i] : &t->last;
}

static void real_or_null(FILE *f, const char *sep, double v)
{
    if (isfinite(v))
        fprintf(f, "%s%.6g", sep, v);
    else
        fprintf(f, "%snull", sep);
}

void fsgd_trace_write_json(FILE *f, const fsgd_trace_t *t, double t0)
{
    /* the last point is written too unless it is the last kept one */
    uint32_t n = t->n + (t->seen > 0 && (t->seen - 1) % t->stride != 0);
    static const char *const names[] = {"seconds_from_step1", "step", "rows", "loss",
                                        "bytes_up", "bytes_down", "bits", "energy"};
    fprintf(f, "\"trace\": {\"points\": %u", n);
    for (int c = 0; c < 8; c++) {
        fprintf(f, ", \"%s\": [", names[c]);
        for (uint32_t i = 0; i < n; i++) {
            const fsgd_trace_point_t *p = point(t, i);
            const char *sep = i ? ", " : "";
            switch (c) {
            case 0: fprintf(f, "%s%.4f", sep, p->seconds - t0); break;
            case 1: fprintf(f, "%s%llu", sep, (unsigned long long)p->step); break;
            case 2: fprintf(f, "%s%llu", sep, (unsigned long long)p->rows); break;
            case 3: real_or_null(f, sep, p->loss); break;
            case 4: fprintf(f, "%s%llu", sep, (unsigned long long)p->bytes_up); break;
            case 5: fprintf(f, "%s%llu", sep, (unsigned long long)p->bytes_down); break;
            case 6: real_or_null(f, sep, p->bits); break;
            default: real_or_null(f, sep, p->energy); break;
            }
        }
        fputc(']', f);
    }
    fputc('}', f);
}
