/* Fuzz target for fsgd serve's reader of a model's metrics JSON
 * (serve_metrics_parse, trainer/serve/version_metrics.h): any bytes, read
 * for a 123-column logistic model. A success describes that model (known,
 * AUC NAN or in [0, 1] as far as the file says, NAN without test rows); a
 * failure is a parse or format error naming the file, and leaves known 0. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/error.h"
#include "fsgd/model.h"
#include "fuzz_check.h"
#include "version_metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fsgd_model_t m = {.kind = FSGD_LOSS_LOGISTIC, .dim = 123};
    /* The bytes in a buffer of their own size, so reads past them are caught. */
    char *buf = malloc(size ? size : 1);
    CHECK(buf);
    memcpy(buf, data, size);
    serve_metrics_t mt;
    char err[512];
    err[0] = 0;
    int rc = serve_metrics_parse(buf, size, "m.json", &m, &mt, err, sizeof err);
    if (rc == 0) {
        CHECK(mt.known == 1);
        CHECK(mt.test_rows > 0 || (isnan(mt.test_auc) && isnan(mt.test_logloss)));
        /* --min-auc's check agrees with the AUC it read */
        int c = serve_metrics_check_auc(&mt, 0.5, err, sizeof err);
        CHECK(c == 0 ? mt.test_auc >= 0.5 : c == FSGD_E_RANGE ? mt.test_auc < 0.5 : isnan(mt.test_auc));
    } else {
        CHECK(rc == FSGD_E_PARSE || rc == FSGD_E_FORMAT);
        CHECK(mt.known == 0);
        CHECK(!strncmp(err, "m.json", 6));
    }
    free(buf);
    return 0;
}
