/* Reference-counted model versions and the slot that publishes them (slot.h). */
#include "slot.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/error.h"
#include "fsgd/loss.h"

double serve_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

serve_slot_t *serve_slots_find(serve_slot_t *const *slots, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(slots[i]->name) == len && !memcmp(slots[i]->name, name, len))
            return slots[i];
    return NULL;
}

serve_version_t *serve_version_new(fsgd_model_t *m, char *err, size_t errsz)
{
    serve_version_t *v = calloc(1, sizeof *v);
    if (!v) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory");
        fsgd_model_free(m);
        return NULL;
    }
    /* The row format fsgd predict reads for this model (skip_bad off: a bad
     * row is a 400, never skipped). */
    char why[512];
    if (fsgd_rowfmt_init(&v->fmt, m->input, 0, 0, why, sizeof why) < 0) {
        fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "the model's input '%s': %s", m->input, why);
        fsgd_model_free(m);
        free(v);
        return NULL;
    }
    v->model = *m;
    memset(m, 0, sizeof *m);
    atomic_init(&v->refs, 1);
    v->loaded_at = serve_now();
    v->step = v->model.state.kind != FSGD_MODEL_STATE_NONE ? v->model.state.step : 0;
    return v;
}

void serve_version_release(serve_version_t *v)
{
    if (v && atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1) {
        fsgd_model_free(&v->model);
        free(v);
    }
}

serve_version_t *serve_slot_acquire(serve_slot_t *s)
{
    pthread_mutex_lock(&s->lock);
    serve_version_t *v = s->cur;
    atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
    return v;
}

void serve_slot_swap(serve_slot_t *s, serve_version_t *v)
{
    pthread_mutex_lock(&s->lock);
    serve_version_t *old = s->cur;
    v->number = old ? old->number + 1 : 1;
    s->cur = v;
    pthread_mutex_unlock(&s->lock);
    serve_version_release(old);
}

int serve_version_compatible(const serve_version_t *cur, const serve_version_t *next, char *err, size_t errsz)
{
    const fsgd_model_t *a = &cur->model, *b = &next->model;
    if (a->kind != b->kind)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "loss %s, the model serving has %s", fsgd_loss_name(b->kind),
                            fsgd_loss_name(a->kind));
    if (a->dim != b->dim)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "dimension %llu, the model serving has %llu",
                            (unsigned long long)b->dim, (unsigned long long)a->dim);
    if (a->has_bias != b->has_bias)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "%s, the model serving %s", b->has_bias ? "an intercept" : "no intercept",
                            a->has_bias ? "has one" : "has none");
    if (strcmp(a->input, b->input) != 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_FORMAT, "hashing '%s', the model serving hashes '%s'",
                            b->input[0] ? b->input : "none (LIBSVM)", a->input[0] ? a->input : "none (LIBSVM)");
    return 0;
}
