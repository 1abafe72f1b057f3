/* Golden messages of both directions of one step (tests/golden/kafka/v1):
 * a worker's gradient frame (kind 1, a fastsgd codec message inside) and
 * the aggregator's model frame that closes the step (kind 5, coded delta,
 * with a strategy feedback section). The encoders must keep producing these
 * exact bytes, and the decoders must keep reading them to the same values;
 * a change to either is a new format version.
 * FSGD_GOLDEN_WRITE=1 build/unit/test_wire_golden regenerates the files
 * (only ever for a new version). */
#include <stdlib.h>

#include "fsgd/codec.h"
#include "fsgd/dist.h"
#include "fsgd/kbus.h"
#include "fsgd/le.h"
#include "testlib.h"
#include "wire.h"

#define GOLDEN_DIR "tests/golden/kafka/v1"
#define DIM 5000

static const uint8_t section[] = {1, 0xA5, 0x5A, 7}; /* opaque to the frame layer */
static const uint32_t applied[] = {1, 3};

/* A fixed sparse vector: 40 keys, values of mixed magnitude and sign. */
static void fixed_vector(uint32_t *k, float *v, size_t n, uint32_t salt)
{
    uint32_t key = 3 + salt;
    for (size_t i = 0; i < n; i++) {
        k[i] = key;
        key += 1 + (uint32_t)((i * 37 + salt) % 97);
        v[i] = (float)((i % 3 ? 1.0 : -1.0) * (0.001 + (double)((i * 13 + salt) % 50) / 40.0));
    }
}

static void state(fsgd_wire_state_t *s)
{
    CU_ASSERT_FATAL(fsgd_wire_state_alloc(s, 2) == 0);
    s->epoch = 2;
    s->adam_t = 17;
    for (uint32_t p = 0; p < 2; p++) {
        s->start[p] = 0;
        s->pos[p] = 100 + p;
        s->end[p] = 1000;
        s->quota[p] = 50;
    }
}

/* The two golden messages, built with the encoders. */
static void build(fsgd_wire_buf_t *up, fsgd_wire_buf_t *down)
{
    char err[256];
    uint32_t k[40];
    float v[40];
    uint8_t msg[4096];
    size_t len;
    fixed_vector(k, v, 40, 0);
    fsgd_codec_t *c = fsgd_codec_new("fastsgd:b=1.1,tau=128,l=2,ef=0", DIM, err, sizeof err);
    CU_ASSERT_FATAL(c != NULL);
    fsgd_outbuf_t ob = {msg, sizeof msg, 0};
    CU_ASSERT_FATAL(fsgd_codec_encode(c, k, v, 40, &ob, err, sizeof err) == 0);
    len = ob.len;
    fsgd_wire_range_t r = {.part = 1, .start = 101, .end = 151};
    fsgd_wire_grad_t g = {.epoch = 2, .nranges = 1, .rows = 50, .loss_sum = 31.25, .t_grad = 0.5, .t_encode = 0.25,
                          .raw_entries = 40, .ranges = &r, .codec = msg, .codec_len = (uint32_t)len};
    fsgd_wire_buf_t body = {0};
    CU_ASSERT_FATAL(fsgd_wire_grad_put(&body, &g) == 0);
    fsgd_kframe_t f = {.kind = FSGD_KMSG_GRAD, .gen = 9, .sender = 3, .step = 18, .nchunks = 1, .body = body.p,
                       .body_len = (uint32_t)body.n};
    up->p = malloc(body.n + FSGD_KFRAME_OVERHEAD);
    up->n = fsgd_kframe_write(up->p, &f, NULL);

    fixed_vector(k, v, 40, 5);
    ob = (fsgd_outbuf_t){msg, sizeof msg, 0};
    CU_ASSERT_FATAL(fsgd_codec_encode(c, k, v, 40, &ob, err, sizeof err) == 0);
    len = ob.len;
    fsgd_wire_state_t s = {0};
    state(&s);
    body.n = 0;
    CU_ASSERT_FATAL(fsgd_wire_state_put(&body, &s) == 0);
    CU_ASSERT_FATAL(fsgd_wire_u32(&body, sizeof section) == 0 && fsgd_wire_put(&body, section, sizeof section) == 0);
    CU_ASSERT_FATAL(fsgd_wire_cdelta_put(&body, FSGD_WIRE_CDELTA_CHECK, 0xC0FFEEu, applied, 2, msg, (uint32_t)len) == 0);
    fsgd_kframe_t m = {.kind = FSGD_KMSG_DELTA_CODED, .flags = FSGD_KFLAG_SECTION, .gen = 9, .step = 18,
                       .nchunks = 1, .body = body.p, .body_len = (uint32_t)body.n};
    down->p = malloc(body.n + FSGD_KFRAME_OVERHEAD);
    down->n = fsgd_kframe_write(down->p, &m, NULL);
    fsgd_wire_state_free(&s);
    free(body.p);
    fsgd_codec_destroy(c);
}

static void test_encoders_match(void)
{
    fsgd_wire_buf_t up = {0}, down = {0};
    build(&up, &down);
    const char *names[2] = {GOLDEN_DIR "/grad_fastsgd.bin", GOLDEN_DIR "/model_cdelta_section.bin"};
    fsgd_wire_buf_t *bufs[2] = {&up, &down};
    for (int i = 0; i < 2; i++) {
        if (getenv("FSGD_GOLDEN_WRITE"))
            CU_ASSERT(fsgd_test_write_file(names[i], bufs[i]->p, bufs[i]->n) == 0);
        size_t len = 0;
        uint8_t *want = fsgd_test_read_file(names[i], &len);
        CU_ASSERT_FATAL(want != NULL);
        CU_ASSERT_EQUAL(len, bufs[i]->n);
        CU_ASSERT(len == bufs[i]->n && memcmp(want, bufs[i]->p, len) == 0);
        free(want);
        free(bufs[i]->p);
    }
}

static void test_decoders_read(void)
{
    char err[256];
    size_t len = 0;
    uint32_t k[40];
    float v[40];
    fsgd_sparse_t dec = {0};
    fsgd_kframe_t f;
    /* uplink */
    uint8_t *p = fsgd_test_read_file(GOLDEN_DIR "/grad_fastsgd.bin", &len);
    CU_ASSERT_FATAL(p != NULL);
    CU_ASSERT_EQUAL_FATAL(fsgd_kframe_parse(p, len, &f, NULL, NULL, err, sizeof err), 0);
    CU_ASSERT(f.kind == FSGD_KMSG_GRAD && f.gen == 9 && f.sender == 3 && f.step == 18 && f.flags == 0);
    fsgd_wire_grad_t g;
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_grad_get(f.body, f.body_len, 2, &g, err, sizeof err), 0);
    CU_ASSERT(g.epoch == 2 && g.rows == 50 && g.loss_sum == 31.25 && g.nranges == 1 && g.ranges[0].part == 1 &&
              g.ranges[0].start == 101 && g.ranges[0].end == 151 && g.raw_entries == 40);
    CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(g.codec, g.codec_len, DIM, &dec, err, sizeof err), 0);
    fixed_vector(k, v, 40, 0);
    CU_ASSERT_EQUAL(dec.n, 40);
    for (size_t i = 0; i < dec.n && i < 40; i++) {
        CU_ASSERT_EQUAL(dec.keys[i], k[i]);
        CU_ASSERT((dec.vals[i] < 0) == (v[i] < 0)); /* logarithmic levels keep the sign */
    }
    free(g.ranges);
    free(p);
    /* downlink */
    p = fsgd_test_read_file(GOLDEN_DIR "/model_cdelta_section.bin", &len);
    CU_ASSERT_FATAL(p != NULL);
    CU_ASSERT_EQUAL_FATAL(fsgd_kframe_parse(p, len, &f, NULL, NULL, err, sizeof err), 0);
    CU_ASSERT(f.kind == FSGD_KMSG_DELTA_CODED && f.flags == FSGD_KFLAG_SECTION && f.step == 18);
    fsgd_wire_state_t s = {0};
    size_t off = 0;
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_state_get(f.body, f.body_len, &off, &s, err, sizeof err), 0);
    CU_ASSERT(s.epoch == 2 && s.nparts == 2 && s.adam_t == 17 && s.pos[1] == 101 && s.quota[0] == 50);
    const uint8_t *sec;
    size_t slen;
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_section_get(f.body, f.body_len, &off, &sec, &slen, err, sizeof err), 0);
    CU_ASSERT(slen == sizeof section && memcmp(sec, section, slen) == 0);
    fsgd_wire_cdelta_t cd;
    CU_ASSERT_EQUAL_FATAL(fsgd_wire_cdelta_get(f.body, f.body_len, &off, &cd, err, sizeof err), 0);
    CU_ASSERT(cd.check == 0xC0FFEEu && cd.n_applied == 2 && fsgd_wire_cdelta_applied(&cd, 3) &&
              !fsgd_wire_cdelta_applied(&cd, 2));
    CU_ASSERT_EQUAL_FATAL(fsgd_codec_decode(cd.msg, cd.msg_len, DIM, &dec, err, sizeof err), 0);
    fixed_vector(k, v, 40, 5);
    CU_ASSERT(dec.n == 40 && dec.keys[39] == k[39]);
    /* a section length past the end is refused, naming the field */
    fsgd_le_put32((uint8_t *)f.body + (sec - f.body) - 4, 1u << 20);
    off = 0;
    CU_ASSERT_EQUAL(fsgd_wire_state_get(f.body, f.body_len, &off, &s, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_wire_section_get(f.body, f.body_len, &off, &sec, &slen, err, sizeof err), FSGD_E_FORMAT);
    FSGD_ASSERT_CONTAINS(err, "section: length");
    fsgd_wire_state_free(&s);
    fsgd_sparse_free(&dec);
    free(p);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"encoders reproduce the golden messages of both directions", test_encoders_match},
        {"decoders read the golden messages of both directions", test_decoders_read},
        {NULL, NULL},
    };
    fsgd_test_suite("wire golden", cases);
}
