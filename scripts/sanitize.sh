#!/usr/bin/env bash
# sanitize.sh [asan|tsan]... - builds pccl with AddressSanitizer+UBSan and with
# ThreadSanitizer (build-asan/, build-tsan/) and, under each, runs the unit and
# end-to-end tests (all but those labelled heavy or training; under TSan also the
# number-crunching ones labelled compute and those of the master's single-threaded
# loop, labelled master_loop, and the variants labelled asan_only) and then a chaos stress run (scripts/stress.sh,
# PCCL_SAN_STRESS_MINUTES, default 0.5; 0 skips it).
# Any sanitizer report fails the run: a process that reports aborts (ASan,
# UBSan) or exits 66 (TSan), and the stress orchestrator also fails on a report
# in any process's log, printing it and keeping the logs.
# Under TSan, OpenMP runs one thread: libgomp is not instrumented, so its
# worker threads produce false reports (the OpenMP kernels are checked
# against their serial versions by the unit tests).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
configs=("$@"); [ ${#configs[@]} -eq 0 ] && configs=(asan tsan)
stress_minutes=${PCCL_SAN_STRESS_MINUTES:-0.5}
status=0
# Instrumented code is slow, so smaller buffers still keep the mid-operation kills inside an operation, and fewer
# inner steps keep test_join_stop's computing peer busy for seconds, not minutes;
# the multi-source join with a source killed works the same at 256 MiB as at 1 GiB (four instrumented
# peers holding 1 GiB each would need most of the machine's memory and minutes). Set per configuration.
for cfg in "${configs[@]}"; do
    case $cfg in
        asan) flags=address,undefined; skip='heavy|training'
              export PCCL_TEST_MIDOP_BYTES=48000000 PCCL_SS_KILLED_MIB=256 PCCL_TEST_LONG_INNER_STEPS=100
              # abort_on_error also for UBSan: its default is exit 1, which the stress test accepts
              # from a peer that was stopped or cut off
              export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
              # The master's VmRSS must stay within 10% between the middle and the end of the run.
              # ASan keeps freed blocks in a quarantine (256 MB by default) to catch use after
              # free; while it fills, RSS climbs whether or not anything leaks (69 -> 112 MB in
              # the second half of a 1-minute run). A 4 MB one fills within seconds (25.0 -> 25.5
              # MB), so the check measures the master again. The peers keep the default quarantine.
              stress_args=(--master-env "ASAN_OPTIONS=$ASAN_OPTIONS:quarantine_size_mb=4:thread_local_quarantine_size_kb=64") ;;
        tsan) flags=thread; skip='heavy|compute|training|master_loop|asan_only'
              # TSan runs a peer's ring several times slower than ASan: a third of ASan's mid-operation
              # buffer, half its killed-source join, 80 leave steps instead of 150, a peer computing 40 inner steps, not 300
              export PCCL_TEST_MIDOP_BYTES=16000000 PCCL_SS_KILLED_MIB=128 PCCL_TEST_LEAVE_STEPS=80 PCCL_TEST_LONG_INNER_STEPS=40
              export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 OMP_NUM_THREADS=1
              # TSan makes every step about 7x slower (median 0.3 s instead of 0.04 s; a step that
              # also accepts newcomers up to 2.5 s). The progress limit (timeout + one step, one step
              # = max(1 s, 2 x median)) does not cover the slow steps of a ring rebuild: 1-minute runs
              # stalled up to 3.6 s once a peer was stopped or cut, against limits of 3.0-3.6 s.
              # 2 s more on the limit; the timeout itself (kick and stop durations) stays 2 s.
              stress_args=(--stall-slack 2) ;;
        *) echo "unknown config $cfg (asan, tsan)"; exit 2 ;;
    esac
    echo "== $cfg: building"
    ./scripts/build.sh "build-$cfg" -DPCCL_SANITIZE=$flags -DCMAKE_BUILD_TYPE=Debug -DPCCL_WITH_CUDA=OFF
    echo "== $cfg: testing"
    ctest --test-dir "build-$cfg" --output-on-failure -j2 -LE "$skip" || status=1
    if [ "$stress_minutes" != 0 ]; then
        echo "== $cfg: stress run ($stress_minutes min)"
        ./scripts/stress.sh --bin "build-$cfg/bin" --minutes "$stress_minutes" --seed 1 "${stress_args[@]}" || status=1
    fi
    unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS OMP_NUM_THREADS PCCL_TEST_LEAVE_STEPS PCCL_TEST_MIDOP_BYTES PCCL_SS_KILLED_MIB PCCL_TEST_LONG_INNER_STEPS
done
exit $status
