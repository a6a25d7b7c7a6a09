#!/usr/bin/env bash
# test_kill_midop.sh with a min-max uint8 quantized all-reduce: abort, restore and
# retry must work exactly as unquantized (the survivors' hashes prove it).
PCCL_TEST_QUANTIZE=minmax:uint8 exec bash "$(dirname "$0")/test_kill_midop.sh" "$@"
