/* Key caching for working-set pulls (trainer/distributed/pull_cache.h):
 * the shard's lists up to a byte budget, the worker's set of the lists a
 * shard keeps (removal included), and the by-id pull and the answers'
 * flags on the wire (pull.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/crc32c.h"
#include "fsgd/keys.h"
#include "pull.h"
#include "pull_cache.h"
#include "testlib.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A distinct block for each i. */
static void fill(uint8_t *block, size_t len, int i)
{
    for (size_t j = 0; j < len; j++)
        block[j] = (uint8_t)(j < 4 ? (unsigned)i >> (8 * j) : j);
}

/* Lists are kept until the budget is spent, then refused, never evicted:
 * every kept list is found with its bytes, count and CRC. */
static void test_cache_budget(void)
{
    pull_cache_t c = {.budget = 100 * (64 + sizeof(pull_cache_slot_t))};
    uint8_t block[64];
    int kept = 0, refused = 0;
    for (int i = 0; i < 1000; i++) {
        fill(block, sizeof block, i);
        uint64_t id = pull_list_id(block, sizeof block);
        int rc = pull_cache_put(&c, id, (uint32_t)i, fsgd_crc32c(0, block, sizeof block), block, sizeof block);
        CU_ASSERT_TRUE(rc == 0 || rc == 1);
        if (rc == 1) {
            kept++;
            CU_ASSERT_EQUAL(refused, 0); /* once full, full */
        } else {
            refused++;
        }
    }
    CU_ASSERT_EQUAL(kept, 100);
    CU_ASSERT_EQUAL(c.used, 100);
    CU_ASSERT_TRUE(c.bytes <= c.budget);
    for (int i = 0; i < 1000; i++) {
        fill(block, sizeof block, i);
        const pull_cache_slot_t *s = pull_cache_find(&c, pull_list_id(block, sizeof block));
        CU_ASSERT_EQUAL(s != NULL, i < 100);
        if (s && i < 100) {
            CU_ASSERT_EQUAL(s->n, (uint32_t)i);
            CU_ASSERT_EQUAL(s->len, sizeof block);
            CU_ASSERT_EQUAL(memcmp(s->block, block, sizeof block), 0);
        }
    }
    /* the same list again: held; another count under a held id: not this list */
    fill(block, sizeof block, 0);
    uint64_t id = pull_list_id(block, sizeof block);
    uint32_t crc = fsgd_crc32c(0, block, sizeof block);
    CU_ASSERT_EQUAL(pull_cache_put(&c, id, 0, crc, block, sizeof block), 1);
    CU_ASSERT_EQUAL(pull_cache_put(&c, id, 5, crc, block, sizeof block), 0);
    CU_ASSERT_PTR_NULL(pull_cache_find(&c, 0));
    pull_cache_free(&c);
}

/* The worker's set against a plain array, through adds and removals that
 * make long probe runs (backward-shift deletion must keep every member
 * findable). */
static void test_known_set(void)
{
    enum { N = 4000 };
    uint64_t *ids = malloc(N * sizeof *ids);
    int *in = calloc(N, sizeof *in);
    CU_ASSERT_FATAL(ids && in);
    pull_known_t k = {0};
    for (int i = 0; i < N; i++)
        ids[i] = next_u64() | 1;
    for (int round = 0; round < 20000; round++) {
        int i = (int)(next_u64() % N);
        if (next_u64() % 3) {
            CU_ASSERT_EQUAL(pull_known_add(&k, ids[i]), 0);
            in[i] = 1;
        } else {
            pull_known_remove(&k, ids[i]);
            in[i] = 0;
        }
    }
    size_t n = 0;
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        n += (size_t)in[i];
        wrong += pull_known_has(&k, ids[i]) != in[i];
    }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(k.n, n);
    CU_ASSERT_FALSE(pull_known_has(&k, 0));
    pull_known_free(&k);
    free(ids);
    free(in);
}

/* A by-id pull reads back; a miss carries no values and is not kept. */
static void test_wire(void)
{
    fsgd_wire_buf_t b = {0};
    const fsgd_pull_ref_t r = {.need = 41, .id = 0x1234567890abcdefull, .n = 77, .keys_crc = 0xdeadbeef};
    CU_ASSERT_EQUAL(fsgd_pull_ref_put(&b, &r), 0);
    CU_ASSERT_EQUAL(b.n, FSGD_PULL_BY_ID_LEN);
    fsgd_pull_ref_t back;
    char err[256];
    CU_ASSERT_EQUAL(fsgd_pull_ref_get(b.p, b.n, 1000, &back, err, sizeof err), 0);
    CU_ASSERT_TRUE(back.need == 41 && back.id == r.id && back.n == 77 && back.keys_crc == 0xdeadbeef);
    CU_ASSERT_EQUAL(fsgd_pull_ref_get(b.p, b.n, 10, &back, err, sizeof err), FSGD_E_RANGE); /* 77 keys of 10 */
    CU_ASSERT_EQUAL(fsgd_pull_ref_get(b.p, b.n - 1, 1000, &back, err, sizeof err), FSGD_E_TRUNCATED);
    b.n = 0;
    CU_ASSERT_EQUAL(fsgd_values_put(&b, 3, 9, 0xdeadbeef, NULL, 0, 0, FSGD_VALUES_MISS), 0);
    fsgd_values_t v;
    CU_ASSERT_EQUAL(fsgd_values_get(b.p, b.n, &v, err, sizeof err), 0);
    CU_ASSERT_TRUE(v.flags == FSGD_VALUES_MISS && v.n == 0 && v.keys_crc == 0xdeadbeef);
    b.p[21] = FSGD_VALUES_MISS | FSGD_VALUES_KEPT;
    CU_ASSERT_EQUAL(fsgd_values_get(b.p, b.n, &v, err, sizeof err), FSGD_E_FORMAT);
    b.p[21] = 0x80;
    CU_ASSERT_EQUAL(fsgd_values_get(b.p, b.n, &v, err, sizeof err), FSGD_E_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "byte 21"));
    const float vals[2] = {0.5f, -1.0f};
    b.n = 0;
    CU_ASSERT_EQUAL(fsgd_values_put(&b, 3, 9, 7, vals, 2, 0, FSGD_VALUES_KEPT), 0);
    CU_ASSERT_EQUAL(fsgd_values_get(b.p, b.n, &v, err, sizeof err), 0);
    CU_ASSERT_TRUE(v.flags == FSGD_VALUES_KEPT && v.n == 2 && fsgd_values_at(&v, 1) == -1.0f);
    free(b.p);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a shard keeps key lists up to its budget, then refuses, never evicts", test_cache_budget},
        {"a worker's set of kept lists: adds and removals against an array", test_known_set},
        {"a pull by id and the answers' kept and miss flags on the wire", test_wire},
        {NULL, NULL},
    };
    fsgd_test_suite("pull_cache", cases);
}
