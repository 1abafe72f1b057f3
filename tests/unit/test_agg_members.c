/* The aggregator's parts on their own (agg_members.h, agg_early.h): no
 * agg_t, no bus. Membership from NAME.ctl reports (made, updated, left, a
 * repeat is no change), the settled-group check, who a step waits for, who
 * it drops, orphaned rows; and the frames held for later steps (a repeat
 * rejected and counted, taken in arrival order when their step opens). */
#include <stdlib.h>
#include <string.h>

#include "agg_early.h"
#include "agg_members.h"
#include "testlib.h"

#define P 4

/* A step state of P partitions, rows left in each: pos 0, end 10. */
static void state_init(fsgd_wire_state_t *st)
{
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_state_alloc(st, P), 0);
    for (uint32_t p = 0; p < P; p++) {
        st->start[p] = st->pos[p] = 0;
        st->end[p] = 10;
    }
}

static void test_reports(void)
{
    agg_members_t m = {0};
    fsgd_wire_state_t st = {0};
    state_init(&st);
    uint32_t owners[P + 1];
    const uint32_t a[] = {0, 1, 7 /* >= P: ignored */}, b[] = {2, 3}, all[] = {0, 1, 2, 3};
    agg_members_report(&m, P, 5, 0, a, 3);
    CU_ASSERT_EQUAL(m.nmem, 1);
    CU_ASSERT_FALSE(agg_members_cover(&m, &st, owners)); /* partitions 2 and 3 have rows and no owner */
    agg_members_report(&m, P, 9, 0, b, 2);
    CU_ASSERT_EQUAL(m.changes, 2);
    CU_ASSERT_TRUE(agg_members_cover(&m, &st, owners));
    member_t *w = agg_member_find(&m, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT(w->own[0] && w->own[1] && !w->own[2] && !w->own[3]);
    uint64_t seq = w->seq;
    agg_members_report(&m, P, 5, 0, a, 3); /* the same report again: no change */
    CU_ASSERT_EQUAL(m.changes, 2);
    CU_ASSERT_EQUAL(agg_member_find(&m, 5)->seq, seq);
    /* mid-rebalance: 9 took everything, 5 has not been told: overlapping sets */
    agg_members_report(&m, P, 9, 0, all, 4);
    CU_ASSERT_EQUAL(m.changes, 3);
    CU_ASSERT_FALSE(agg_members_cover(&m, &st, owners));
    agg_members_report(&m, P, 5, 1, NULL, 0); /* 5 leaves */
    CU_ASSERT_EQUAL(m.nmem, 1);
    CU_ASSERT_PTR_NULL(agg_member_find(&m, 5));
    CU_ASSERT_EQUAL(m.changes, 4);
    CU_ASSERT_TRUE(agg_members_cover(&m, &st, owners));
    agg_members_report(&m, P, 77, 1, NULL, 0); /* an unknown worker's leave changes nothing */
    CU_ASSERT_EQUAL(m.changes, 4);
    /* a partition without rows needs no owner */
    agg_members_report(&m, P, 9, 0, b, 2);
    CU_ASSERT_FALSE(agg_members_cover(&m, &st, owners));
    st.pos[0] = st.pos[1] = 10;
    CU_ASSERT_TRUE(agg_members_cover(&m, &st, owners));
    agg_members_free(&m);
    CU_ASSERT_EQUAL(m.nmem, 0);
    fsgd_wire_state_free(&st);
}

static void test_barrier(void)
{
    agg_members_t m = {0};
    fsgd_wire_state_t st = {0};
    state_init(&st);
    const uint32_t a[] = {0, 1}, b[] = {2, 3};
    agg_members_report(&m, P, 1, 0, a, 2);
    agg_members_report(&m, P, 2, 0, b, 2);
    char text[64];
    CU_ASSERT_EQUAL(agg_awaited(&m, P, text, sizeof text), 2);
    CU_ASSERT_STRING_EQUAL(text, "1, 2");
    CU_ASSERT_FALSE(agg_members_all_answered(&m)); /* no answer yet */
    CU_ASSERT_EQUAL(agg_add_set(&m.got, &m.ngot, &m.cap_got, 2), 0);
    CU_ASSERT_EQUAL(agg_add_set(&m.got, &m.ngot, &m.cap_got, 2), 0); /* a set: once */
    CU_ASSERT_EQUAL(m.ngot, 1);
    CU_ASSERT_EQUAL(agg_awaited(&m, P, text, sizeof text), 1);
    CU_ASSERT_STRING_EQUAL(text, "1");
    /* step 1 complete with who answered: 2 alone is live */
    agg_members_live_from_got(&m);
    CU_ASSERT_EQUAL(m.nlive, 1);
    CU_ASSERT_TRUE(agg_members_all_answered(&m));
    /* partitions 0 and 1 belong to 1, which is not live: orphaned only once 2's are done */
    CU_ASSERT_FALSE(agg_members_orphaned(&m, &st));
    st.pos[2] = st.pos[3] = 10;
    CU_ASSERT_TRUE(agg_members_orphaned(&m, &st));
    /* 1 reports again, later than anyone: its partitions' latest owner */
    agg_members_report(&m, P, 2, 0, a, 2);
    CU_ASSERT_FALSE(agg_members_orphaned(&m, &st)); /* 2 now reports 0 and 1, and is live */
    /* a later step: 3 joins the live set; only 2 answers */
    CU_ASSERT_EQUAL(agg_add_set(&m.live, &m.nlive, &m.cap_live, 3), 0);
    CU_ASSERT_EQUAL(agg_add_set(&m.live, &m.nlive, &m.cap_live, 4), 0);
    CU_ASSERT_FALSE(agg_members_all_answered(&m));
    CU_ASSERT_EQUAL(agg_members_silent(&m, text, sizeof text), 2);
    CU_ASSERT_STRING_EQUAL(text, "3, 4");
    uint32_t dropped[1];
    CU_ASSERT_EQUAL(agg_members_drop_silent(&m, dropped, 1), 2); /* both counted, the first kept */
    CU_ASSERT_EQUAL(dropped[0], 3);
    CU_ASSERT_EQUAL(m.nlive, 1);
    CU_ASSERT_EQUAL(m.live[0], 2);
    CU_ASSERT_TRUE(agg_members_all_answered(&m));
    agg_members_free(&m);
    fsgd_wire_state_free(&st);
}

static void test_early(void)
{
    fsgd_agg_stats_t s = {0};
    uint8_t logged[FSGD_AGG_REJ_COUNT] = {0};
    char err[128];
    const agg_env_t e = {.err = err, .errsz = sizeof err, .s = &s, .logged = logged, .grads_topic = "t.grads"};
    agg_early_set_t h = {0};
    const uint8_t body[3] = {1, 2, 3};
    /* steps 4, 3, 5, 3 (another sender), 4 again (a repeat) */
    const fsgd_kframe_t f[] = {{.step = 4, .sender = 1, .nchunks = 1},
                               {.step = 3, .sender = 1, .nchunks = 1},
                               {.step = 5, .sender = 1, .nchunks = 1},
                               {.step = 3, .sender = 2, .nchunks = 1},
                               {.step = 4, .sender = 1, .nchunks = 1}};
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(agg_early_hold(&h, &e, &f[i], body, (size_t)i % 3 + 1, 100 + i), 0);
    CU_ASSERT_EQUAL(h.n, 4);
    CU_ASSERT_EQUAL(h.bytes, 1 + 2 + 3 + 1);
    CU_ASSERT_EQUAL(s.grads_early, 4);
    CU_ASSERT_EQUAL(s.rejected[FSGD_AGG_REJ_DUPLICATE], 1);
    CU_ASSERT_EQUAL(logged[FSGD_AGG_REJ_DUPLICATE], 1);
    agg_early_t *take;
    size_t n;
    CU_ASSERT_EQUAL(agg_early_due(&h, &e, 2, &take, &n), 0);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(take);
    /* step 4 opens: steps 4 and 3 (the older one is due too: it is rejected as stale when taken), in arrival order */
    CU_ASSERT_EQUAL_FATAL(agg_early_due(&h, &e, 4, &take, &n), 0);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT(take[0].step == 4 && take[0].offset == 100 && take[0].len == 1);
    CU_ASSERT(take[1].step == 3 && take[1].offset == 101 && take[1].len == 2);
    CU_ASSERT(take[2].step == 3 && take[2].sender == 2 && take[2].offset == 103);
    CU_ASSERT_EQUAL(memcmp(take[1].bytes, body, 2), 0);
    for (size_t i = 0; i < n; i++)
        free(take[i].bytes);
    free(take);
    CU_ASSERT_EQUAL(h.n, 1);
    CU_ASSERT_EQUAL(h.held[0].step, 5);
    CU_ASSERT_EQUAL(h.bytes, 3);
    agg_early_free(&h);
    CU_ASSERT_EQUAL(h.n, 0);
    CU_ASSERT_EQUAL(h.bytes, 0);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"membership from reports, the settled group", test_reports},
        {"who a step waits for, drops, and orphaned rows", test_barrier},
        {"frames held for later steps", test_early},
        {NULL, NULL},
    };
    fsgd_test_suite("agg_members", cases);
}
