#!/usr/bin/env bash
# examples/python/ (DDP and DiLoCo over the pccl Python package), short runs of
# 3 peers through run_examples.py: one peer SIGKILLed a third of the way in, a
# newcomer joins through the accept phase and receives the state. Checks that
# every survivor's final shared state has the same SimpleHash (pccl
# hash-tensor), that the newcomer received it, and the test accuracy floor.
# Prints "SKIP: ..." and passes without Debian's python3-torch/numpy/cffi, or
# when libpccl is sanitizer-instrumented (Python itself is not).
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
LIB="$BIN/../lib/libpccl.so"
if ! "$PY" -c 'import torch, numpy, cffi' 2>/dev/null; then
    echo "SKIP: $PY lacks torch, numpy or cffi (apt-get install python3-torch python3-numpy python3-cffi)"; exit 0
fi
[ -e "$LIB" ] || fail "no $LIB"
if nm -D "$LIB" 2>/dev/null | grep -q '__[at]san_init'; then
    echo "SKIP: $LIB is sanitizer-instrumented"; exit 0
fi

# check NAME ARGS...: one driver run (120 s at most: a deadline for a shared 2-core machine), its report in
# $WORK/NAME.out
check() {
    local name=$1; shift
    local t0=$SECONDS
    timeout 150 "$PY" "$ROOT/examples/python/run_examples.py" --bin "$BIN" --peers 3 --timeout 120 "$@" \
        > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out" >&2; fail "$name: run_examples.py exited with $?"; }
    grep -q '^shared-state hashes equal on all surviving peers: yes$' "$WORK/$name.out" ||
        { cat "$WORK/$name.out" >&2; fail "$name: hashes not reported equal"; }
    grep -Eq '^newcomer +[1-9][0-9]* ' "$WORK/$name.out" ||
        { cat "$WORK/$name.out" >&2; fail "$name: the newcomer did not join mid-run"; }
    echo "ok: $name in $((SECONDS - t0)) s, $(grep '^test accuracy' "$WORK/$name.out")"
}

check diloco --example diloco --steps 80 --min-accuracy 0.75 -- --inner-steps 10
check ddp --example ddp --steps 500 --min-accuracy 0.75
