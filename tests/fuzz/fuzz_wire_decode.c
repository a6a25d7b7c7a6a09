/* fuzz_wire_decode.c - libFuzzer entry point; the body is fuzz_wire_decode_one in fuzz_targets.h
 * (built by scripts/fuzz.sh; crashes are replayed by tests/unit/test_fuzz_regressions.c). */
#include "fuzz_targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_wire_decode_one(data, size); }
