/* The bindings' API (fsgd/api.h): its version, and a model file read into
 * an opaque handle whose accessors give back what was saved; a bad file is
 * an error with a message and no handle. */
#include <stdio.h>
#include <string.h>

#include "fsgd/api.h"
#include "fsgd/error.h"
#include "fsgd/loss.h"
#include "fsgd/model.h"
#include "testlib.h"

static void test_version(void)
{
    CU_ASSERT_EQUAL(fsgd_api_version(), FSGD_API_VERSION);
}

static void test_model_handle(void)
{
    fsgd_model_t m = {0};
    char err[256];
    CU_ASSERT_EQUAL_FATAL(fsgd_model_init(&m, FSGD_LOSS_SQUARED, 3, 1, 2.5f), 0);
    const float w[] = {0.5f, -1.25f, 3.0f, 0.75f};
    memcpy(m.w, w, sizeof w);
    snprintf(m.input, sizeof m.input, "tsv:label,num*3");
    const char *path = fsgd_test_tmp("api.fsgd");
    CU_ASSERT_EQUAL_FATAL(fsgd_model_save(&m, path, err, sizeof err), 0);
    fsgd_model_free(&m);

    fsgd_model_t *h = NULL;
    CU_ASSERT_EQUAL_FATAL(fsgd_api_model_load(path, &h, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(fsgd_api_model_kind(h), FSGD_LOSS_SQUARED);
    CU_ASSERT_EQUAL(fsgd_api_model_dim(h), 3);
    CU_ASSERT_EQUAL(fsgd_api_model_has_bias(h), 1);
    CU_ASSERT_EQUAL(fsgd_api_model_bias_value(h), 2.5f);
    CU_ASSERT_EQUAL(memcmp(fsgd_api_model_weights(h), w, sizeof w), 0);
    CU_ASSERT_STRING_EQUAL(fsgd_api_model_input(h), "tsv:label,num*3");
    fsgd_api_model_free(h);
    fsgd_api_model_free(NULL);
}

static void test_bad_file(void)
{
    const char *path = fsgd_test_tmp("not_a_model");
    CU_ASSERT_EQUAL_FATAL(fsgd_test_write_file(path, "hello\n", 6), 0);
    fsgd_model_t *h = (fsgd_model_t *)&h; /* set to NULL on failure */
    char err[256] = "";
    CU_ASSERT_TRUE(fsgd_api_model_load(path, &h, err, sizeof err) < 0);
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_TRUE(strstr(err, "not_a_model") != NULL);
    CU_ASSERT_TRUE(fsgd_api_model_load(fsgd_test_tmp("missing.fsgd"), &h, err, sizeof err) < 0);
    CU_ASSERT_PTR_NULL(h);
}

void fsgd_test_register(void)
{
    static const fsgd_test_case_t cases[] = {
        {"version", test_version},
        {"a model through its handle", test_model_handle},
        {"a bad or missing file: an error, no handle", test_bad_file},
        {NULL, NULL},
    };
    fsgd_test_suite("api", cases);
}
