/* fsgd serve's versions (trainer/serve/slot.h): a swap publishes the new
 * version at once, and frees the old one on the swapping thread (the
 * watcher) once the requests in flight on it are done, never on a request
 * thread: unmapping a model-sized array there stalled that thread's other
 * connections during every swap under load. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "fsgd/model.h"
#include "slot.h"
#include "testlib.h"

static serve_version_t *version(void)
{
    fsgd_model_t m;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, 1000, 1, 1.0f), 0);
    serve_version_t *v = serve_version_new(&m, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    return v;
}

typedef struct request {
    serve_slot_t *slot;
    serve_version_t *held; /* acquired before the swap */
    atomic_int released;   /* 1 once it let go of it */
} request_t;

/* A request in flight on the old version: it finishes once it sees the
 * new one published (so the swap has happened, and is waiting for it). */
static void *in_flight(void *arg)
{
    request_t *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->slot->lock);
        int swapped = r->slot->cur != r->held;
        pthread_mutex_unlock(&r->slot->lock);
        if (swapped)
            break;
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    CU_ASSERT_EQUAL(atomic_load(&r->held->refs), 2); /* its own and the swapper's: not freed under it */
    atomic_store(&r->released, 1);
    serve_version_release(r->held);
    return NULL;
}

static void test_swap_frees_on_the_swapper(void)
{
    serve_slot_t slot = {0};
    pthread_mutex_init(&slot.lock, NULL);
    serve_slot_swap(&slot, version());
    CU_ASSERT_EQUAL(slot.cur->number, 1);
    request_t r = {.slot = &slot};
    r.held = serve_slot_acquire(&slot);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, in_flight, &r), 0);
    serve_slot_swap(&slot, version());
    /* the swap returned after the request let go: the last reference, and
     * the free, were the swapper's */
    CU_ASSERT_EQUAL(atomic_load(&r.released), 1);
    CU_ASSERT_EQUAL(slot.cur->number, 2);
    pthread_join(t, NULL);
    /* no request in flight: the old version goes at once */
    serve_slot_swap(&slot, version());
    CU_ASSERT_EQUAL(slot.cur->number, 3);
    serve_version_release(slot.cur);
    pthread_mutex_destroy(&slot.lock);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"a swap frees the old version on the swapping thread, after the requests on it", test_swap_frees_on_the_swapper},
        {NULL, NULL},
    };
    fsgd_test_suite("serve_slot", cases);
}
