#!/usr/bin/env bash
# test_algo_rhd_kill.sh for the all-reduce by recursive doubling (PCCL_ALGO=rd), quantized (min-max uint8) and
# striped over a pool of 4 connections per partner in a keyed, encrypted run: the kill breaks every stripe, the
# master aborts the op on every member, the survivors restore their buffers and retry in a world of 3 (which
# folds); equal final hashes prove the retry started from the input.
PCCL_TEST_ALGO=rd PCCL_STRIPE_LOCAL=1 PCCL_TEST_QUANTIZE=minmax:uint8 PCCL_TEST_POOL=4 PCCL_TEST_STRIPES=0xf \
    exec bash "$(dirname "$0")/test_algo_rhd_kill.sh" "$@"
