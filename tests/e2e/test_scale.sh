#!/usr/bin/env bash
# 64 peers on one host join one run at once, train the synthetic workload, survive 3 SIGKILLs and 3 joins and
# end with one hash (tests/e2e/scale_lib.sh; 256 peers: test_scale_256.sh, label scale).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/scale_lib.sh"
run_scale 64 30 60
