/* The spin-then-futex barrier (fsgd/barrier.h): no thread leaves a round
 * before every party has arrived, round after round, both when the waiters
 * spin and when they sleep; and lowered parties release those that started. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "fsgd/barrier.h"
#include "testlib.h"

#define THREADS 4
#define ROUNDS 2000

typedef struct {
    fsgd_barrier_t b;
    atomic_int arrived; /* arrivals in all rounds so far */
    atomic_int early;   /* a thread that saw a round incomplete after the barrier */
    int sleepy;         /* thread 1 dawdles now and then, so the others sleep */
} shared_t;

typedef struct {
    shared_t *s;
    int id;
} arg_t;

static void *party(void *p)
{
    arg_t *a = p;
    shared_t *s = a->s;
    for (int round = 1; round <= ROUNDS; round++) {
        if (s->sleepy && a->id == 1 && round % 200 == 0)
            usleep(2000);
        atomic_fetch_add(&s->arrived, 1);
        fsgd_barrier_wait(&s->b);
        if (atomic_load(&s->arrived) < round * THREADS)
            atomic_store(&s->early, 1);
        fsgd_barrier_wait(&s->b); /* nobody starts the next round before all checked */
    }
    return NULL;
}

static void run_rounds(int sleepy)
{
    shared_t s = {.sleepy = sleepy};
    fsgd_barrier_init(&s.b, THREADS);
    atomic_init(&s.arrived, 0);
    atomic_init(&s.early, 0);
    pthread_t tid[THREADS];
    arg_t args[THREADS];
    for (int i = 1; i < THREADS; i++) {
        args[i] = (arg_t){&s, i};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&tid[i], NULL, party, &args[i]), 0);
    }
    args[0] = (arg_t){&s, 0};
    party(&args[0]);
    for (int i = 1; i < THREADS; i++)
        pthread_join(tid[i], NULL);
    CU_ASSERT_EQUAL(atomic_load(&s.arrived), ROUNDS * THREADS);
    CU_ASSERT_EQUAL(atomic_load(&s.early), 0);
}

static void test_rounds_spinning(void)
{
    run_rounds(0);
}

static void test_rounds_sleeping(void)
{
    run_rounds(1);
}

static void *wait_once(void *p)
{
    fsgd_barrier_wait(p);
    return NULL;
}

/* Four parties planned, two started: lowered to two, one wait each frees both. */
static void test_fewer_parties(void)
{
    fsgd_barrier_t b;
    fsgd_barrier_init(&b, 4);
    fsgd_barrier_set_parties(&b, 2);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, wait_once, &b), 0);
    fsgd_barrier_wait(&b);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(atomic_load(&b.gen), 1);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"rounds while spinning", test_rounds_spinning},
        {"rounds with sleepers", test_rounds_sleeping},
        {"lowered parties release the started", test_fewer_parties},
        {NULL, NULL},
    };
    fsgd_test_suite("barrier", cases);
}
