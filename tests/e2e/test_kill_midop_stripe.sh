#!/usr/bin/env bash
# test_kill_midop.sh with every op striped over a pool of 8 connections per ring edge: the
# killed peer breaks all 8 stripes, the survivors' stripes fail (or finish and are put back from
# the backup), every buffer is restored and the retry's exact results and equal hashes prove it.
PCCL_STRIPE_LOCAL=1 PCCL_TEST_POOL=8 PCCL_TEST_STRIPES=0xff exec bash "$(dirname "$0")/test_kill_midop.sh" "$@"
