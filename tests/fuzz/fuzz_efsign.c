/* Fuzz target: the efsign decoder (codec id 5), the id forced so the fuzzer
 * stays in its body checks (codec_fuzz.h; corpus from
 * tests/golden/codec/v1/efsign_*.bin). */
#include "codec_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return codec_fuzz_input(data, size, 5); }
