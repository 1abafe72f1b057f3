/* fsgd serve's library: request bodies parse to the rows the file readers
 * give for the same text (LIBSVM, JSON, hashed fields), errors name the
 * row and field; and a server in this process answers /score over a real
 * socket with the model's scores and version, swaps in a replaced file,
 * refuses a mismatched one, and drains. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fsgd/delim.h"
#include "fsgd/error.h"
#include "fsgd/libsvm.h"
#include "fsgd/model.h"
#include "fsgd/serve.h"
#include "fsgd/rowfmt.h"
#include "serve_rows.h"
#include "fsgd/vw.h"
#include "testlib.h"

static void assert_same_rows(const fsgd_csr_t *a, const fsgd_csr_t *b)
{
    CU_ASSERT_EQUAL_FATAL(a->n_rows, b->n_rows);
    CU_ASSERT_EQUAL_FATAL(a->nnz, b->nnz);
    CU_ASSERT(!memcmp(a->row_ptr, b->row_ptr, (a->n_rows + 1) * sizeof *a->row_ptr));
    CU_ASSERT(!memcmp(a->col, b->col, a->nnz * sizeof *a->col));
    CU_ASSERT(!memcmp(a->val, b->val, a->nnz * sizeof *a->val));
}

static void test_rows_libsvm_and_json(void)
{
    char err[512];
    const char text[] = "1 1:0.1 3:2.5e-1 7:1\n-1 2:3\n";
    fsgd_csr_t got = {0}, want = {0}, js = {0};
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(text, sizeof text - 1, FSGD_SERVE_BODY_TEXT, NULL, &got, NULL, err, sizeof err), 2);
    fsgd_libsvm_opts_t o = {0};
    CU_ASSERT_EQUAL(fsgd_libsvm_parse(text, sizeof text - 1, &o, FSGD_TEST_AT("f", NULL), &want, err, sizeof err), 2);
    assert_same_rows(&got, &want);
    const char json[] = "{\"rows\":[{\"indices\":[1,3,7],\"values\":[0.1,2.5e-1,1]},{\"indices\":[2],\"values\":[3]}]}";
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(json, sizeof json - 1, FSGD_SERVE_BODY_JSON, NULL, &js, NULL, err, sizeof err), 2);
    assert_same_rows(&js, &want);
    /* values omitted: every value 1 */
    fsgd_csr_free(&js);
    const char onehot[] = "{\"rows\":[{\"indices\":[4,9]}]}";
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(onehot, sizeof onehot - 1, FSGD_SERVE_BODY_JSON, NULL, &js, NULL, err, sizeof err), 1);
    CU_ASSERT(js.nnz == 2 && js.col[0] == 3 && js.col[1] == 8 && js.val[0] == 1.0f && js.val[1] == 1.0f);
    fsgd_csr_free(&got);
    fsgd_csr_free(&want);
    fsgd_csr_free(&js);
}

static void test_rows_hashed_fields(void)
{
    char err[512];
    fsgd_rowfmt_t spec;
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&spec, "csv:label,num,cat*2:bits=12", 0, 0, err, sizeof err), 0);
    const char line[] = "0,17,abc,\n";
    fsgd_csr_t want = {0}, got = {0}, js = {0};
    CU_ASSERT_EQUAL(fsgd_delim_parse_rows(line, sizeof line - 1, &spec.spec, "f", 1, &want, err, sizeof err), 1);
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(line, sizeof line - 1, FSGD_SERVE_BODY_TEXT, &spec, &got, NULL, err, sizeof err), 1);
    assert_same_rows(&got, &want);
    /* fields without the label */
    const char json[] = "{\"rows\":[{\"fields\":[\"17\",\"abc\",\"\"]}]}";
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(json, sizeof json - 1, FSGD_SERVE_BODY_JSON, &spec, &js, NULL, err, sizeof err), 1);
    assert_same_rows(&js, &want);
    fsgd_csr_free(&want);
    fsgd_csr_free(&got);
    fsgd_csr_free(&js);
}

/* A hashed LIBSVM model: text as the LIBSVM reader hashes it, JSON indices
 * hashed the same way (2 bits: entries share columns and are summed in
 * the row's order); a VW model: its text, and JSON {"line": ...}, with tags. */
static void test_rows_hashed_libsvm_and_vw(void)
{
    char err[512];
    fsgd_rowfmt_t fmt;
    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&fmt, "libsvm:bits=2", 0, 0, err, sizeof err), 0);
    const char text[] = "1 1:0.1 3:0.7 7:1e-3 9:2.5 400000:3\n0 2:1\n";
    fsgd_csr_t want = {0}, got = {0}, js = {0};
    fsgd_libsvm_opts_t o = {.hash_bits = 2};
    CU_ASSERT_EQUAL(fsgd_libsvm_parse(text, sizeof text - 1, &o, FSGD_TEST_AT("f", NULL), &want, err, sizeof err), 2);
    CU_ASSERT(want.nnz < 6); /* some columns shared */
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(text, sizeof text - 1, FSGD_SERVE_BODY_TEXT, &fmt, &got, NULL, err, sizeof err), 2);
    assert_same_rows(&got, &want);
    const char json[] = "{\"rows\":[{\"indices\":[1,3,7,9,400000],\"values\":[0.1,0.7,1e-3,2.5,3]},"
                        "{\"line\":\"0 2:1\"}]}";
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(json, sizeof json - 1, FSGD_SERVE_BODY_JSON, &fmt, &js, NULL, err, sizeof err), 2);
    assert_same_rows(&js, &want);
    fsgd_csr_free(&want);
    fsgd_csr_free(&got);
    fsgd_csr_free(&js);

    CU_ASSERT_EQUAL_FATAL(fsgd_rowfmt_init(&fmt, "vw:bits=12:interactions=ab", 0, 0, err, sizeof err), 0);
    const char vw[] = "1 'r1 |a x:2 y |b z\n-1 0.5 |a w\n";
    fsgd_vw_extra_t wtags = {0}, gtags = {0}, jtags = {0};
    CU_ASSERT_EQUAL(fsgd_vw_parse(vw, sizeof vw - 1, &fmt.vw_spec, FSGD_TEST_AT("f", NULL), &want, &wtags, err,
                                  sizeof err), 2);
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(vw, sizeof vw - 1, FSGD_SERVE_BODY_TEXT, &fmt, &got, &gtags, err, sizeof err), 2);
    assert_same_rows(&got, &want);
    CU_ASSERT(gtags.n == 2 && gtags.tag_end[0] == 2 && !memcmp(gtags.tags, "r1", 2));
    const char vjson[] = "{\"rows\":[{\"line\":\"1 'r1 |a x:2 y |b z\"},{\"line\":\"-1 0.5 |a w\"}]}";
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(vjson, sizeof vjson - 1, FSGD_SERVE_BODY_JSON, &fmt, &js, &jtags, err, sizeof err), 2);
    assert_same_rows(&js, &want);
    fsgd_csr_clear(&js);
    const char vbad[] = "{\"rows\":[{\"indices\":[1]}]}";
    CU_ASSERT(fsgd_serve_rows_parse(vbad, sizeof vbad - 1, FSGD_SERVE_BODY_JSON, &fmt, &js, NULL, err, sizeof err) < 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "a VW model reads {\"line\""));
    fsgd_vw_extra_free(&wtags);
    fsgd_vw_extra_free(&gtags);
    fsgd_vw_extra_free(&jtags);
    fsgd_csr_free(&want);
    fsgd_csr_free(&got);
    fsgd_csr_free(&js);
}

static void test_rows_errors(void)
{
    char err[512];
    fsgd_csr_t out = {0};
    const char bad[] = "1 1:1\n1 2:1 x\n";
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse(bad, sizeof bad - 1, FSGD_SERVE_BODY_TEXT, NULL, &out, NULL, err, sizeof err),
                    FSGD_E_PARSE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "body:2:"));
    fsgd_csr_clear(&out);
    CU_ASSERT_EQUAL(fsgd_serve_rows_parse("", 0, FSGD_SERVE_BODY_TEXT, NULL, &out, NULL, err, sizeof err), FSGD_E_ARG);
    const char *cases[][2] = {
        {"{\"rows\":[{\"indices\":[1]},{\"indices\":[3,2]}]}", "rows[1].indices[1]"},
        {"{\"rows\":[{\"indices\":[0]}]}", "rows[0].indices[0]"},
        {"{\"rows\":[{\"indices\":[1],\"values\":[\"a\"]}]}", "rows[0].values[0]"},
        {"{\"rows\":[{\"indices\":[1,2],\"values\":[1]}]}", "rows[0].values"},
        {"{\"rows\":[3]}", "rows[0]"},
        {"{\"rows\":[]}", "no rows"},
        {"[1,2]", "expected an object"},
        {"{\"rows\":[", "not JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fsgd_csr_clear(&out);
        err[0] = 0;
        long rc = fsgd_serve_rows_parse(cases[i][0], strlen(cases[i][0]), FSGD_SERVE_BODY_JSON, NULL, &out, NULL, err,
                                        sizeof err);
        CU_ASSERT(rc < 0);
        if (!strstr(err, cases[i][1]))
            printf("\n%s: '%s' lacks '%s'\n", cases[i][0], err, cases[i][1]);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i][1]));
    }
    fsgd_csr_free(&out);
}

/* One HTTP/1.0 exchange on 127.0.0.1:port; the whole answer in buf. */
static size_t http(int port, const char *req, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_EQUAL_FATAL(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    CU_ASSERT_EQUAL((size_t)write(fd, req, strlen(req)), strlen(req));
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)got;
    buf[n] = 0;
    close(fd);
    return n;
}

static int save_model(const char *path, uint64_t dim, float w1)
{
    fsgd_model_t m;
    char err[256];
    if (fsgd_model_init(&m, FSGD_LOSS_LOGISTIC, dim, 1, 1.0f) < 0)
        return -1;
    m.w[0] = w1;
    m.w[dim] = -0.25f;
    int rc = fsgd_model_save(&m, path, err, sizeof err);
    fsgd_model_free(&m);
    return rc;
}

/* Polls GET /model until it holds want (the watcher runs every 10 ms). */
static int wait_model(int port, const char *want)
{
    char buf[8192];
    for (int i = 0; i < 3000; i++) {
        http(port, "GET /model HTTP/1.0\r\n\r\n", buf, sizeof buf);
        if (strstr(buf, want))
            return 1;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    printf("\nGET /model never held '%s': %s\n", want, buf);
    return 0;
}

static void test_server(void)
{
    char err[1024], buf[8192], want[64];
    const char *path = fsgd_test_tmp("serve.model");
    const char *next = fsgd_test_tmp("next.model");
    CU_ASSERT_EQUAL_FATAL(save_model(path, 10, 2.0f), 0);
    fsgd_serve_conf_t conf;
    fsgd_serve_conf_defaults(&conf);
    conf.port = 0;
    conf.threads = 2;
    conf.poll_ms = 10;
    fsgd_serve_t *s = fsgd_serve_new(&conf, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(fsgd_serve_add_file(s, "m", path, NULL, err, sizeof err), 0);
    CU_ASSERT_EQUAL(fsgd_serve_add_file(s, "m", path, NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL(fsgd_serve_add_file(s, "bad name", path, NULL, err, sizeof err), FSGD_E_ARG);
    CU_ASSERT_EQUAL_FATAL(fsgd_serve_start(s, err, sizeof err), 0);
    int port = fsgd_serve_port(s);
    CU_ASSERT(port > 0);
    /* margin 2 * 0.5 - 0.25 = 0.75 */
    http(port, "POST /score/m?output=margin HTTP/1.0\r\nContent-Length: 8\r\n\r\n1 1:0.5\n", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "200 OK"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "X-Fsgd-Model-Version: 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\n\r\n0.75\n"));
    /* A new file by rename: version 2, margin 4 * 0.5 - 0.25 */
    CU_ASSERT_EQUAL_FATAL(save_model(next, 10, 4.0f), 0);
    CU_ASSERT_EQUAL_FATAL(rename(next, path), 0);
    CU_ASSERT_FATAL(wait_model(port, "\"version\": 2"));
    http(port, "POST /score?output=margin HTTP/1.0\r\nContent-Length: 8\r\n\r\n1 1:0.5\n", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "X-Fsgd-Model-Version: 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\n\r\n1.75\n"));
    /* Another dimension: refused, version 2 serves on */
    CU_ASSERT_EQUAL_FATAL(save_model(next, 11, 8.0f), 0);
    CU_ASSERT_EQUAL_FATAL(rename(next, path), 0);
    CU_ASSERT_FATAL(wait_model(port, "\"refused\": 1"));
    snprintf(want, sizeof want, "\r\n\r\n1.75\n");
    http(port, "POST /score?output=margin HTTP/1.0\r\nContent-Length: 8\r\n\r\n1 1:0.5\n", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "X-Fsgd-Model-Version: 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
    CU_ASSERT_EQUAL(fsgd_serve_drain(s, 5000), 0);
    fsgd_serve_destroy(s);
    fsgd_serve_destroy(NULL);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t rows[] = {{"libsvm and json", test_rows_libsvm_and_json},
                                            {"hashed fields", test_rows_hashed_fields},
                                            {"hashed libsvm and vw", test_rows_hashed_libsvm_and_vw},
                                            {"errors", test_rows_errors},
                                            {NULL, NULL}};
    static const fsgd_test_case_t server[] = {{"score, reload, refuse, drain", test_server}, {NULL, NULL}};
    fsgd_test_suite("serve rows", rows);
    fsgd_test_suite("serve server", server);
}
