/* Fuzz target: fsgd_codec_decode on arbitrary bytes, every codec through the
 * codec id byte (checks: codec_fuzz.h). */
#include "codec_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return codec_fuzz_input(data, size, -1); }
