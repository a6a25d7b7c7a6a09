#!/usr/bin/env bash
# gpu_check.sh BIN_DIR - the CUDA checks, for a machine with a GPU (CI has
# none, so there these checks print SKIP). Unlike CI, a SKIP here is a failure:
# every GPU path must have run. Prints the SimpleHash GPU benchmark at the end.
#   BIN_DIR  the build's bin folder (build/bin)
#   PYTHON   the interpreter whose torch has CUDA (default python3)
# Exit status: 0 when every check ran on the device and passed.
set -u
BIN=${1:?usage: $0 BIN_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d /tmp/pccl-gpu.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
failed=0

check() { # check NAME CMD...: runs CMD, fails on a non-zero exit or a SKIP line
    local name=$1; shift
    if "$@" > "$TMP/out" 2>&1 && ! grep -q SKIP "$TMP/out"; then
        echo "PASS  $name"
    else
        echo "FAIL  $name"; sed 's/^/      /' "$TMP/out" | tail -n 20; failed=1
    fi
}

nvidia-smi -L 2>/dev/null || echo "(nvidia-smi not found)"
check "SimpleHash CUDA == CPU (unit)" "$BIN/test_simplehash"
check "shared-state device checks (unit)" "$BIN/test_ss_device"
check "CUDA shared state GPU/CPU placements (e2e)" bash "$ROOT/tests/e2e/test_ss_cuda.sh" "$BIN"

# The CLI hashes a file on either device to the same value.
hash_both() {
    python3 - "$TMP/w.npy" <<'PY' || return 1
import sys, numpy as np
np.save(sys.argv[1], np.random.default_rng(1).standard_normal(25_000_003).astype(np.float32))
PY
    local cpu gpu
    cpu=$("$BIN/pccl" hash-tensor "$TMP/w.npy") || return 1
    gpu=$("$BIN/pccl" hash-tensor "$TMP/w.npy" --device cuda) || return 1
    echo "cpu $cpu / cuda $gpu"
    [ -n "$cpu" ] && [ "$cpu" = "$gpu" ]
}
check "pccl hash-tensor --device cuda == cpu (100 MB npy)" hash_both

# The Python package with torch CUDA tensors: all-reduces staged through host memory (every op, in and out of
# place, float32/float16/bfloat16/int64) and one shared state holding a GPU and a CPU tensor.
# PYTHON: the interpreter whose torch has CUDA (default python3); PCCL_LIBRARY: default BIN_DIR/../lib/libpccl.so.
check "Python: torch CUDA tensors (pytest test_two_threads -k cuda)" \
    env PCCL_LIBRARY="${PCCL_LIBRARY:-$BIN/../lib/libpccl.so}" "${PYTHON:-python3}" -m pytest -p no:cacheprovider \
    -q -rs "$ROOT/python/tests/test_two_threads.py" -k cuda

if command -v compute-sanitizer > /dev/null; then
    check "compute-sanitizer memcheck: test_simplehash" \
        compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_simplehash"
    check "compute-sanitizer racecheck: test_simplehash" \
        compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/test_simplehash"
fi

"$BIN/bench_hash_cuda" 64 256 1024 4096 || failed=1
exit $failed
