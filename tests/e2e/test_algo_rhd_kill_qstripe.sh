#!/usr/bin/env bash
# test_algo_rhd_kill.sh with min-max uint8 quantized all-reduces striped over a pool of 4 connections per partner
# (keyed and encrypted, as that test is): the kill breaks every stripe, the master aborts the op on every member,
# the survivors restore their buffers and retry; equal final hashes prove the retry started from the input.
PCCL_STRIPE_LOCAL=1 PCCL_TEST_QUANTIZE=minmax:uint8 PCCL_TEST_POOL=4 PCCL_TEST_STRIPES=0xf \
    exec bash "$(dirname "$0")/test_algo_rhd_kill.sh" "$@"
