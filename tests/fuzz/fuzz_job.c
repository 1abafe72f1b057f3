/* Fuzz target: YAML job files. Any bytes either load into a job whose fields
 * pass their own range checks, or fail with a message; never a crash, a hang
 * or a read past the input. */
#include <stdint.h>
#include <string.h>

#include "fsgd/job.h"
#include "job_testing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fsgd_job_t job;
    fsgd_job_defaults(&job);
    char err[512];
    err[0] = '\0';
    int rc = fsgd_job_load_yaml_text(&job, "fuzz.yaml", (const char *)data, size, err, sizeof err);
    if (rc < 0 && (err[0] == '\0' || strncmp(err, "fuzz.yaml", 9) != 0))
        __builtin_trap(); /* every YAML error names the source */
    if (rc == 0) {
        /* whatever was accepted respects the table's bounds; "auto" (fsgd
         * train picks the value) stores epochs 0, lr and beta1 FSGD_JOB_AUTO */
        if (job.train.epochs < 0 || (job.train.lr <= 0 && job.train.lr != FSGD_JOB_AUTO) || job.train.batch <= 0 || job.train.threads < 1 ||
            (job.train.beta1 < 0 && job.train.beta1 != FSGD_JOB_AUTO))
            __builtin_trap();
        if (memchr(job.train.data, '\0', sizeof job.train.data) == NULL || memchr(job.train.codec, '\0', sizeof job.train.codec) == NULL)
            __builtin_trap();
        /* the optimizer is one of the two; alpha > 0 or auto; l1 >= 0 */
        if ((job.train.optimizer != FSGD_OPTIMIZER_ADAM && job.train.optimizer != FSGD_OPTIMIZER_FTRL) ||
            (job.train.alpha <= 0 && job.train.alpha != FSGD_JOB_AUTO) || job.train.l1 < 0 || memchr(job.train.init, '\0', sizeof job.train.init) == NULL)
            __builtin_trap();
    }
    return 0;
}
