/* Cost of authenticated frames (fsgd/auth.h, issue 27): writing and parsing
 * a frame with a job key (CRC32C + a nonce and Poly1305 tag under a per-message key) against without
 * (CRC32C only), per frame size from a small gradient to a full 512 KiB
 * chunk, and what that makes per step of a 2^22-weight job: each step every
 * worker signs its gradient and verifies the model message, the aggregator
 * verifies W gradients and signs one model message, and every
 * snapshot_every steps a snapshot of 4 * 2^22 bytes is signed once and
 * verified by every worker (amortized over the steps between snapshots).
 * Prints: bench auth bytes=N plain_us=... keyed_us=... tag_us=... tag_mb_s=...
 *         bench auth_step dim=... workers=... grad_bytes=... delta_bytes=...
 *               snapshot_every=... mac_ms_per_step=... (the busiest process: a worker)
 *
 * bench_auth STEP_MS UP_B MODEL_B_PER_STEP WORKERS: the same for a job whose
 * figures were measured (tests/kafka/big_model.sh passes its own: step p50,
 * gradient bytes per worker-step, model topic bytes per step with the
 * snapshots), with each message's fixed cost, and the share of the step:
 *         bench auth_job ... mac_ms_per_step=... mac_pct_of_step=... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fsgd/auth.h"
#include "fsgd/kbus.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds per write+parse of one frame of len body bytes (best of 5). */
static double time_frame(uint8_t *buf, const uint8_t *body, uint32_t len, fsgd_auth_t *auth)
{
    fsgd_kframe_t f = {.kind = FSGD_KMSG_DELTA_PACKED, .gen = 1, .step = 1, .nchunks = 1, .body = body,
                       .body_len = len};
    int reps = (int)(64e6 / (len + 64)) + 1;
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        for (int i = 0; i < reps; i++) {
            size_t n = fsgd_kframe_write(buf, &f, auth);
            fsgd_kframe_t g;
            if (fsgd_kframe_parse(buf, n, &g, NULL, auth, NULL, 0) != 0)
                abort();
        }
        double t = (now_s() - t0) / reps;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const uint32_t sizes[] = {4096, 65536, 524288};
    uint8_t *body = malloc(FSGD_KBUS_CHUNK_MAX), *buf = malloc(FSGD_KBUS_CHUNK_MAX + 128);
    if (!body || !buf)
        return 1;
    for (uint32_t i = 0; i < FSGD_KBUS_CHUNK_MAX; i++)
        body[i] = (uint8_t)(i * 2654435761u >> 24);
    uint8_t key[FSGD_AUTH_KEY_BYTES] = {1, 2, 3};
    double tag_s_per_byte = 0, tag_s[3] = {0};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        double plain = time_frame(buf, body, sizes[s], NULL);
        /* tags bound to a job name (issue 42) */
        fsgd_auth_t *auth = fsgd_auth_new(key, getenv("BENCH_AUTH_JOB"));
        if (!auth)
            return 1;
        double keyed = time_frame(buf, body, sizes[s], auth);
        fsgd_auth_destroy(auth);
        double tag = keyed - plain; /* one tag made and one checked */
        tag_s_per_byte = tag / 2 / sizes[s];
        tag_s[s] = tag / 2;
        printf("bench auth bytes=%u plain_us=%.2f keyed_us=%.2f tag_us=%.2f tag_mb_s=%.0f\n", sizes[s], plain * 1e6,
               keyed * 1e6, tag / 2 * 1e6, sizes[s] / (tag / 2) / 1e6);
    }
    /* A 2^22-weight step as tests/kafka/big_model.sh measured it (DIM=2^22,
     * fastsgd, batch 1000, 2 workers): 17013 B up and 16770 B down per
     * worker-step; a 16 MiB snapshot every 100 steps. */
    const double dim = 4194304, workers = 2, grad = 17013, delta = 16770, snapshot_every = 100;
    double snap = 4 * dim;
    double worker_bytes = grad + delta + snap / snapshot_every;
    double agg_bytes = workers * grad + delta + snap / snapshot_every;
    double busiest = worker_bytes > agg_bytes ? worker_bytes : agg_bytes;
    printf("bench auth_step dim=%.0f workers=%.0f grad_bytes=%.0f delta_bytes=%.0f snapshot_every=%.0f "
           "mac_ms_per_step=%.3f\n",
           dim, workers, grad, delta, snapshot_every, busiest * tag_s_per_byte * 1e3);
    if (argc == 5) {
        /* one tag = fixed + per_byte * bytes, through the smallest and largest sizes measured */
        double per_byte = (tag_s[2] - tag_s[0]) / (sizes[2] - sizes[0]);
        double fixed = tag_s[0] - per_byte * sizes[0];
        if (fixed < 0)
            fixed = 0;
        double step_ms = atof(argv[1]), up = atof(argv[2]), model = atof(argv[3]), w = atof(argv[4]);
        /* messages a step: a worker signs its gradient and checks the model
         * message (one per chunk); the aggregator checks W gradients and
         * signs the model message */
        double model_msgs = 1 + model / FSGD_KBUS_CHUNK_MAX;
        double worker_s = fixed * (1 + model_msgs) + per_byte * (up + model);
        double agg_s = fixed * (w + model_msgs) + per_byte * (w * up + model);
        double job_busiest = worker_s > agg_s ? worker_s : agg_s;
        printf("bench auth_job step_ms=%.3f up_bytes=%.0f model_bytes_per_step=%.0f workers=%.0f tag_fixed_us=%.2f "
               "tag_ns_per_byte=%.3f mac_ms_per_step=%.4f mac_pct_of_step=%.2f\n",
               step_ms, up, model, w, fixed * 1e6, per_byte * 1e9, job_busiest * 1e3,
               step_ms > 0 ? 100 * job_busiest * 1e3 / step_ms : 0);
    } else if (argc != 1) {
        fprintf(stderr, "usage: bench_auth [STEP_MS UP_B MODEL_B_PER_STEP WORKERS]\n");
        return 2;
    }
    free(body);
    free(buf);
    return 0;
}
