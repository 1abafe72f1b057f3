/* Fuzz target for the compressed-input source (fsgd/zsource.h): any bytes as
 * a file. Checks invariants, not just "no crash": the bytes read back are
 * the file itself when its magic is neither gzip nor zstd; a compressed file
 * either reads to its end or stops with a corrupt/truncated error that names
 * the file and a byte offset within it, the same error on every later read;
 * the check pass agrees with the read pass, and its size with the bytes read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsgd/error.h"
#include "fsgd/zsource.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fsgd-fuzz-zsource.%ld", (long)getpid());
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
    char err[512] = "", again[512] = "";
    fsgd_zsource_t *z = fsgd_zsource_open(path, err, sizeof err);
    CHECK(z != NULL);
    const fsgd_zsource_codec_t codec = fsgd_zsource_codec(z);
    /* small pieces walk the decoders through their buffer edges */
    const size_t piece = 1 + (size ? data[size - 1] % 61 : 0);
    uint8_t *buf = malloc(piece);
    CHECK(buf != NULL);
    uint64_t total = 0;
    ssize_t got;
    const uint64_t cap = (uint64_t)64 << 20; /* a decompression bomb is read only this far */
    while (total < cap && (got = fsgd_zsource_read(z, buf, piece, err, sizeof err)) > 0) {
        CHECK((size_t)got <= piece);
        if (codec == FSGD_ZSOURCE_PLAIN)
            CHECK(total + (uint64_t)got <= size && !memcmp(buf, data + total, (size_t)got));
        total += (uint64_t)got;
    }
    if (total < cap) {
        if (got < 0) {
            CHECK(codec != FSGD_ZSOURCE_PLAIN);
            CHECK(got == FSGD_E_FORMAT || got == FSGD_E_TRUNCATED || got == FSGD_E_NOMEM);
            CHECK(strstr(err, path) != NULL && strstr(err, "byte") != NULL);
            CHECK(fsgd_zsource_read(z, buf, piece, again, sizeof again) == got && !strcmp(err, again));
        } else if (codec == FSGD_ZSOURCE_PLAIN) {
            CHECK(total == size);
        }
        uint64_t text = 0;
        int rc = fsgd_zsource_check(path, &text, again, sizeof again);
        CHECK(rc == (got < 0 ? (int)got : 0));
        if (rc == 0 && codec != FSGD_ZSOURCE_PLAIN)
            CHECK(text == total);
    }
    free(buf);
    fsgd_zsource_close(z);
    unlink(path);
    return 0;
}
