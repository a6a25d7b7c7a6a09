#!/usr/bin/env bash
# test_kill_midop.sh out of place: no backup is taken, so the retry after the abort is
# only right if the failed attempt left the input untouched (the exact result checks and
# the survivors' equal hashes prove it). Its sends are copied (the in-place test splices).
PCCL_ZEROCOPY_MIN_BYTES=${PCCL_ZEROCOPY_MIN_BYTES:--1} PCCL_TEST_OOP=1 exec bash "$(dirname "$0")/test_kill_midop.sh" "$@"
