#!/usr/bin/env bash
# sanitize.sh [asan|tsan]... - builds pccl with AddressSanitizer+UBSan and with
# ThreadSanitizer (build-asan/, build-tsan/) and runs the unit and end-to-end
# tests under each (all but those labelled heavy; under TSan also the pure
# number-crunching ones labelled compute); any sanitizer report fails the run.
# Under TSan, OpenMP runs one thread: libgomp is not instrumented, so its
# worker threads produce false reports (the OpenMP kernels are checked
# against their serial versions by the unit tests).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
configs=("$@"); [ ${#configs[@]} -eq 0 ] && configs=(asan tsan)
status=0
export PCCL_TEST_MIDOP_BYTES=48000000 # instrumented code is slow enough for the mid-operation kill
for cfg in "${configs[@]}"; do
    case $cfg in
        asan) flags=address,undefined; skip=heavy; export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ;;
        tsan) flags=thread; skip='heavy|compute'; export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 OMP_NUM_THREADS=1 ;;
        *) echo "unknown config $cfg (asan, tsan)"; exit 2 ;;
    esac
    echo "== $cfg: building"
    ./scripts/build.sh "build-$cfg" -DPCCL_SANITIZE=$flags -DCMAKE_BUILD_TYPE=Debug -DPCCL_WITH_CUDA=OFF
    echo "== $cfg: testing"
    ctest --test-dir "build-$cfg" --output-on-failure -j2 -LE "$skip" || status=1
    unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS OMP_NUM_THREADS
done
exit $status
