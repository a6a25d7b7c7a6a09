#!/usr/bin/env bash
# test_orchestrator_reports.sh - the stress orchestrator (scripts/stress/orchestrator.py) fails a run
# and prints the report when a peer or the master writes a sanitizer report: a peer that exits 66
# (TSan's halt_on_error), one that aborts (ASan's abort_on_error), one that only prints a report and
# goes on, a master that exits 23 at SIGTERM (LeakSanitizer); and it passes a clean run. Uses a
# stand-in pccl (orchestrator_fake_pccl.py): the five short runs go side by side in a few seconds.
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/pccl-orch-reports.XXXXXX)
trap 'rm -rf "$work"' EXIT
modes=(clean peer-exit66 peer-abort peer-report master-leak)
pids=()
for mode in "${modes[@]}"; do
    mkdir -p "$work/$mode"
    FAKE_PCCL_MODE=$mode FAKE_PCCL_DIR="$work/$mode" python3 "$here/../../scripts/stress/orchestrator.py" \
        --pccl "$here/orchestrator_fake_pccl.py" --minutes 0.2 --warmup 1 --netcut off --timeout-ms 1000 \
        > "$work/$mode.out" 2>&1 &
    pids+=($!)
done
status=0
check() {  # check MODE EXPECTED_RC PATTERN...
    local mode=$1 want=$2 rc; shift 2
    wait "${pids[$n]}"; rc=$?; n=$((n + 1))
    kept=$(sed -n 's/^logs kept in //p' "$work/$mode.out")
    case $kept in /tmp/pccl-stress.*) rm -rf "$kept" ;; esac
    if [ "$rc" != "$want" ]; then
        echo "FAIL: $mode: exit $rc, expected $want"; cat "$work/$mode.out"; status=1; return
    fi
    for pat in "$@"; do
        grep -q -- "$pat" "$work/$mode.out" || { echo "FAIL: $mode: no '$pat' in:"; cat "$work/$mode.out"; status=1; return; }
    done
    echo "ok: $mode"
}
n=0
check clean 0 "RESULT: PASS"
check peer-exit66 1 "RESULT: FAIL" "WARNING: ThreadSanitizer: data race" "exit 66" "logs kept in"
check peer-abort 1 "RESULT: FAIL" "ERROR: AddressSanitizer: heap-use-after-free" "SIGABRT" "logs kept in"
check peer-report 1 "RESULT: FAIL" "peer[0-9]* wrote a sanitizer report" "runtime error: signed integer overflow"
check master-leak 1 "RESULT: FAIL" "ERROR: LeakSanitizer: detected memory leaks" "exit 23"
exit $status
