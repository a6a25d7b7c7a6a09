#!/usr/bin/env bash
# test_house_rules.sh - the tree keeps two rules its checkers derive from the code, and each checker can fail:
#  - scripts/check_function_length.py: no function in libpccl/, master/ or cli/ longer than 120 lines;
#  - scripts/check_conventions.py: internal functions return 0 or -PERR_<NAME> (libpccl/src/base/err.h), no
#    private result enum, no bare negative result, and only API entry points and *_result mappings return
#    pcclResult_t; a deadline wait goes through pwait_cond_sleep (no pthread_cond_timedwait elsewhere).
# A copy with a 130-line function, one with a private result enum and a `return -2;`, and one with an internal
# function returning pcclResult_t, is each reported.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$root/scripts/check_function_length.py" "$root/libpccl" "$root/master" "$root/cli"
python3 "$root/scripts/check_conventions.py" "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/libpccl/src/base" "$tmp/master"
{
    echo 'int too_long(int x) {'
    for i in $(seq 1 130); do echo "    x += $i;"; done
    echo '    return x;'
    echo '}'
} > "$tmp/libpccl/src/base/long.c"
rc=0; out=$(python3 "$root/scripts/check_function_length.py" "$tmp/libpccl") || rc=$?
[ "$rc" = 1 ] && grep -q 'too_long 13[0-9] lines' <<<"$out" || { echo "FAIL: a 130-line function passed: $out"; exit 1; }
echo "ok: a 130-line function is reported"
printf 'enum { FOO_OK = 0, FOO_BAD = -1 };\nint foo(int x) {\n    if (x) return -2;\n    return 0;\n}\n' \
    > "$tmp/libpccl/src/base/conv.c"
rc=0; out=$(python3 "$root/scripts/check_conventions.py" "$tmp") || rc=$?
[ "$rc" = 1 ] && grep -q 'result-enum' <<<"$out" && grep -q 'magic-return' <<<"$out" ||
    { echo "FAIL: a private result enum and return -2 passed: $out"; exit 1; }
echo "ok: a private result enum and a bare negative return are reported"
printf '%s\n' '#include <pthread.h>' \
    'int wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *t) {' \
    '    return pthread_cond_timedwait(cv, mu, t) ? -PERR_TIMEOUT : 0;' '}' > "$tmp/master/timed.c"
rc=0; out=$(python3 "$root/scripts/check_conventions.py" "$tmp" master) || rc=$?
[ "$rc" = 1 ] && grep -q 'timed.c:3: raw-timedwait' <<<"$out" ||
    { echo "FAIL: a pthread_cond_timedwait outside base/wait.c passed: $out"; exit 1; }
echo "ok: a pthread_cond_timedwait outside base/wait.c is reported"
mkdir -p "$tmp/edge/libpccl/include" "$tmp/edge/libpccl/src/api" "$tmp/edge/libpccl/src/op"
printf '#define PCCL_EXPORT\ntypedef int pcclResult_t;\nPCCL_EXPORT pcclResult_t pcclFoo(int x);\n' \
    > "$tmp/edge/libpccl/include/pccl.h"
printf '%s\n' 'static pcclResult_t foo_helper(int x) { return (pcclResult_t)x; }' \
    'static pcclResult_t foo_result(int rc) { return (pcclResult_t)-rc; }' \
    'pcclResult_t pcclFoo(int x) { return foo_result(foo_helper(x)); }' > "$tmp/edge/libpccl/src/api/foo.c"
printf '%s\n' 'static pcclResult_t op_helper(int x) { return (pcclResult_t)x; }' > "$tmp/edge/libpccl/src/op/op.c"
rc=0; out=$(python3 "$root/scripts/check_conventions.py" "$tmp/edge") || rc=$?
[ "$rc" = 1 ] && grep -q 'foo.c:1: internal-result: foo_helper' <<<"$out" && grep -q 'op.c:1: internal-result: op_helper' <<<"$out" &&
    [ "$(grep -c internal-result <<<"$out")" = 2 ] ||
    { echo "FAIL: an internal function returning pcclResult_t passed (in api/ or op/), or an entry point or a *_result mapping was reported: $out"; exit 1; }
echo "ok: an internal function returning pcclResult_t is reported; entry points and *_result mappings are not"
