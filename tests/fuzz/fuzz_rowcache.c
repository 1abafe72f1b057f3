/* Fuzz target for the binary row cache reader (fsgd/rowcache.h): any bytes
 * as a cache file. Checks invariants, not just "no crash": open either
 * refuses with one of its documented reasons, naming the file, or gives a
 * header whose sections read back as well-formed rows (no more than the
 * header's count, columns below the section's max_col) or stop with an
 * error that names the file and the fault. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fsgd/csr.h"
#include "fsgd/error.h"
#include "fsgd/rowcache.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fsgd-fuzz-rowcache.%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
    char err[512] = "";
    int why = 0;
    fsgd_rowcache_info_t info;
    fsgd_rowcache_reader_t *r = fsgd_rowcache_open(path, &info, &why, err, sizeof err);
    if (!r) {
        CHECK(why == FSGD_E_FORMAT || why == FSGD_E_VERSION || why == FSGD_E_CRC || why == FSGD_E_TRUNCATED ||
              why == FSGD_E_NOMEM);
        CHECK(strstr(err, path) != NULL);
        unlink(path);
        return 0;
    }
    CHECK(info.meta != NULL);
    fsgd_csr_t m = {0};
    for (int s = 0; s < FSGD_ROWCACHE_SECTIONS; s++) {
        CHECK(fsgd_rowcache_seek(r, (fsgd_rowcache_section_t)s, err, sizeof err) == 0);
        uint64_t rows = 0;
        long got;
        while ((got = fsgd_rowcache_read(r, &m, 3, err, sizeof err)) > 0) {
            CHECK((size_t)got == m.n_rows && got <= 3);
            CHECK(m.row_ptr[0] == 0 && m.row_ptr[m.n_rows] == m.nnz);
            for (size_t j = 0; j < m.nnz; j++)
                CHECK(m.col[j] < info.max_col[s]);
            rows += (uint64_t)got;
            CHECK(rows <= info.rows[s]);
        }
        if (got < 0) {
            CHECK(got == FSGD_E_FORMAT || got == FSGD_E_CRC || got == FSGD_E_TRUNCATED || got == FSGD_E_NOMEM);
            CHECK(strstr(err, path) != NULL);
        } else {
            CHECK(rows == info.rows[s]);
        }
    }
    fsgd_csr_free(&m);
    fsgd_rowcache_free(r);
    unlink(path);
    return 0;
}
