#!/usr/bin/env bash
# 256 peers on one host join one run at once (accepted within 60 s on a loaded 2-core machine), train the
# synthetic workload, survive 3 SIGKILLs and 3 joins and end with one hash (tests/e2e/scale_lib.sh). Label
# scale: `ctest -L scale`.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/scale_lib.sh"
run_scale 256 20 60
