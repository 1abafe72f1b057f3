/* The checkpoint's follow section (agg_ckpt.h), kept apart from
 * agg_checkpoint.c: agg_follow.c's functions for it take agg_t, so each
 * call goes through a stand-in agg_t holding only what they read and write.
 * Once the follow state is a part of its own, agg_checkpoint.c calls
 * agg_follow.c directly and this file goes. */
#include <stdlib.h>

#include "aggregator_internal.h"

/* A zeroed agg_t with f as its follow state (agg_t is ~70 KB: not on the
 * stack). */
static agg_t *stand_in(struct agg_follow *f)
{
    agg_t *a = calloc(1, sizeof *a);
    if (a)
        a->follow = f;
    return a;
}

int agg_ckpt_follow_put(const struct agg_follow *f, fsgd_wire_buf_t *b)
{
    agg_t *a = stand_in((struct agg_follow *)f);
    int rc = a ? agg_follow_ckpt_put(a, b) : FSGD_E_NOMEM;
    free(a);
    return rc;
}

int agg_ckpt_follow_get(struct agg_follow **f, const agg_env_t *e, const fsgd_wire_state_t *st, const char *path,
                        const uint8_t *p, size_t len, size_t *off)
{
    agg_t *a = stand_in(*f);
    if (!a)
        return fsgd_err_fmt(e->err, e->errsz, FSGD_E_NOMEM, "checkpoint '%s': out of memory", path);
    a->err = e->err;
    a->errsz = e->errsz;
    a->s = e->s;
    a->st = *st; /* read, not owned: the section's partition count is the state's */
    int rc = agg_follow_ckpt_get(a, path, p, len, off);
    *f = a->follow;
    free(a);
    return rc;
}

void agg_ckpt_follow_free(struct agg_follow **f)
{
    if (!*f)
        return;
    /* on the stack this once: freeing must not fail for want of memory */
    agg_t a = {.follow = *f};
    agg_follow_free(&a);
    *f = NULL;
}
