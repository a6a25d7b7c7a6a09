#!/usr/bin/env bash
# fuzz.sh [--seconds N] [--build-dir DIR] [--parallel P] [HARNESS...] - builds the libFuzzer
# harnesses of tests/fuzz/ with clang (-fsanitize=fuzzer,address,undefined), compiling the library
# sources they need directly, and runs each for N seconds (default 60) starting from the seed corpus
# tests/fuzz/corpus/<harness>/ (copied; new inputs stay in the build dir). Runs P harnesses at a time
# (default 1). Prints executions and crashes per harness; crashing inputs are left in
# DIR/crashes/<harness>/ - copy each to tests/fuzz/regressions/<harness>/ so that the ctest
# unit.test_fuzz_regressions replays it. Exit status 1 when any harness crashed.
# Harnesses: fuzz_wire_decode fuzz_master_sm fuzz_p2p_hello fuzz_quant_block fuzz_quant_low fuzz_sec_handshake (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60 dir=build-fuzz parallel=1 harnesses=()
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) seconds=${2:?}; shift 2 ;;
        --build-dir) dir=${2:?}; shift 2 ;;
        --parallel) parallel=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        fuzz_*) harnesses+=("$1"); shift ;;
        *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ ${#harnesses[@]} -eq 0 ] && harnesses=(fuzz_wire_decode fuzz_master_sm fuzz_p2p_hello fuzz_quant_block fuzz_quant_low fuzz_sec_handshake)
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }

CC=${CC:-clang}
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Werror
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
        -Ilibpccl/include -Ilibpccl/src -Imaster -Ikernels -Itests/fuzz)
mkdir -p "$dir"
srcs_for() {
    case $1 in
        fuzz_master_sm) echo libpccl/src/base/wire.c libpccl/src/base/wire_spec.c libpccl/src/base/log.c master/sm/master_sm.c master/sm/msm_*.c master/topology/topology_*.c libpccl/src/sec/identity.c libpccl/src/base/addr.c libpccl/src/sec/sec_key.c kernels/dtype.c -lcrypto ;;
        fuzz_quant_block|fuzz_quant_low) echo libpccl/src/base/wire.c libpccl/src/base/wire_spec.c libpccl/src/base/log.c kernels/quantize.c kernels/quant_low.c kernels/reduce.c kernels/dtype.c -fopenmp ;;
        fuzz_sec_handshake) echo libpccl/src/base/wire.c libpccl/src/base/wire_spec.c libpccl/src/base/log.c libpccl/src/sec/sec_hs.c libpccl/src/sec/sec_frame.c libpccl/src/sec/sec_key.c -lsodium -lcrypto ;;
        *) echo libpccl/src/base/wire.c libpccl/src/base/wire_spec.c libpccl/src/base/log.c ;;
    esac
}
for h in "${harnesses[@]}"; do
    [ -f "tests/fuzz/$h.c" ] || { echo "fuzz.sh: no harness tests/fuzz/$h.c" >&2; exit 2; }
    # shellcheck disable=SC2046
    $CC "${CFLAGS[@]}" -o "$dir/$h" "tests/fuzz/$h.c" $(srcs_for "$h") -lsodium -lcjson -lm -lpthread
done
echo "fuzz.sh: built ${harnesses[*]} in $dir/"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
run_one() {
    local h=$1 corpus="$dir/corpus/$h" crashes="$dir/crashes/$h"
    mkdir -p "$corpus" "$crashes"
    cp -n tests/fuzz/corpus/"$h"/* "$corpus"/ 2>/dev/null || true
    # -fork keeps fuzzing after a crash (each crash is saved); -ignore_crashes goes on after one.
    timeout -k 10 $((seconds + 60)) "$dir/$h" "$corpus" -max_total_time="$seconds" -print_final_stats=1 \
        -max_len=4096 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$crashes/" \
        > "$dir/$h.log" 2>&1 || true
}
pids=()
for h in "${harnesses[@]}"; do
    run_one "$h" &
    pids+=($!)
    if [ ${#pids[@]} -ge "$parallel" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done

status=0
printf '%-18s %14s %10s %8s %s\n' harness executions exec/s crashes corpus
for h in "${harnesses[@]}"; do
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/$h.log" | tail -1 | grep -o '[0-9]*$' || true)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$dir/$h.log" | tail -1 | grep -o '[0-9]*$' || true)
    ncrash=$(find "$dir/crashes/$h" -type f | wc -l)
    ncorp=$(find "$dir/corpus/$h" -type f | wc -l)
    if [ -z "$execs" ]; then
        # libFuzzer stopped before printing its final stats (a crash, leak or timeout)
        execs=$(grep -o '^#[0-9]*' "$dir/$h.log" | tail -1 | tr -d '#' || true)
        grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz invariant' "$dir/$h.log" && [ "$ncrash" -eq 0 ] && ncrash=1
    fi
    printf '%-18s %14s %10s %8s %s\n' "$h" "${execs:-?}" "${rate:-?}" "$ncrash" "$ncorp"
    if [ "$ncrash" -gt 0 ]; then
        status=1
        echo "  crash log: $dir/$h.log; inputs: $dir/crashes/$h/" >&2
        grep -m3 -E 'ERROR|runtime error|fuzz invariant|#[0-9]+ 0x' "$dir/$h.log" | sed 's/^/  /' >&2 || true
    fi
done
exit $status
