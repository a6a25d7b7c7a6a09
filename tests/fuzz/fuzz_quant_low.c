/* fuzz_quant_low.c - libFuzzer entry point; the body is fuzz_quant_low_one in fuzz_targets.h
 * (built by scripts/fuzz.sh; crashes are replayed by tests/unit/test_fuzz_regressions.c). */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_quant_low_one(data, size); }
