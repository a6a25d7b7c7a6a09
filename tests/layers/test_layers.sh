#!/usr/bin/env bash
# test_layers.sh - the tree's folders keep their one-way layers (check_layers.py passes on it), and the
# checker can fail: a copy with an include that points down-up (base/ -> api/), one that skips a folder's
# header, a CLI file that reaches into the master, and one that reaches into the library (not through the public
# headers) are each reported.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
check=$root/tests/layers/check_layers.py
python3 "$check" "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect_violation() { # NAME PATTERN: the copy in $tmp/NAME fails with a line matching PATTERN
    local out rc=0
    out=$(python3 "$check" "$tmp/$1") || rc=$?
    [ "$rc" = 1 ] || { echo "FAIL: $1: checker exited $rc"; echo "$out"; exit 1; }
    grep -q "$2" <<<"$out" || { echo "FAIL: $1: no violation matching '$2'"; echo "$out"; exit 1; }
    echo "ok: $1 reported"
}
copy() { mkdir -p "$tmp/$1/libpccl"; cp -r "$root/libpccl/src" "$tmp/$1/libpccl/"; cp -r "$root/master" "$root/cli" "$tmp/$1/"; }
copy cycle
echo '#include "api/api.h"' >> "$tmp/cycle/libpccl/src/base/log.c"
expect_violation cycle 'folders include each other in a cycle: .*api.*base\|folders include each other in a cycle: .*base.*api'
copy skip
echo '#include "comm/comm.h"' >> "$tmp/skip/libpccl/src/op/allreduce.c"
echo '#include "ring/ring_quant.h"' >> "$tmp/skip/libpccl/src/op/allreduce.c"
: > "$tmp/skip/libpccl/src/ring/ring_quant.h"
expect_violation skip 'op/allreduce.c includes ring/ring_quant.h: another folder is reached through its header'
copy cli
echo '#include "sm/msm_internal.h"' >> "$tmp/cli/cli/cmd_status.c"
expect_violation cli 'cli/cmd_status.c includes sm/msm_internal.h'
copy cli_lib
echo '#include "base/base.h"' >> "$tmp/cli_lib/cli/flags.c"
expect_violation cli_lib 'cli/flags.c includes base/base.h, not one of the headers the command may use'
copy master
echo '#include "op/op.h"' >> "$tmp/master/master/sm/msm_ops.c"
expect_violation master 'the master shares only'
