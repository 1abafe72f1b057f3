/* Fuzz target: one NAME.ctl event read as a version record of job "j"
 * (fsgd_ctl_version_parse, trainer/distributed/ctl_versions.h), any bytes: it reads only
 * inside them; a record has its event named, a test AUC in [0, 1] with test
 * rows or NAN without, a logloss NAN or >= 0; a restart its generation. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsgd/dist.h"
#include "ctl_versions.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the bytes in a buffer of their own size, so reads past them are caught */
    char *buf = malloc(size ? size : 1);
    CHECK(buf);
    memcpy(buf, data, size);
    fsgd_ctl_version_t v;
    int kind = fsgd_ctl_version_parse(buf, size, "j", &v);
    CHECK(kind == FSGD_CTL_VERSION_NONE || kind == FSGD_CTL_VERSION_RECORD || kind == FSGD_CTL_VERSION_RESTART);
    if (kind == FSGD_CTL_VERSION_RECORD) {
        CHECK(!strcmp(v.event, "model_version") || !strcmp(v.event, "epoch_end") || !strcmp(v.event, "job_end"));
        CHECK(v.test_rows > 0 ? v.test_auc >= 0 && v.test_auc <= 1 : isnan(v.test_auc));
        CHECK(isnan(v.test_logloss) || v.test_logloss >= 0);
        CHECK(v.offset == -1);
    }
    free(buf);
    return 0;
}
