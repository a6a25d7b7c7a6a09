#!/usr/bin/env bash
# strangers.sh BIN_DIR: the floods of tests/e2e/test_flood.sh without its assertions, against the
# build in BIN_DIR (a run of two `pccl join` peers on loopback), printing tests/e2e/flood.py's JSON
# lines: A ring, B bench, S shared state, C pre-HELLO hold, D oversize RESUME. Numbers: bench/strangers.md.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/e2e/lib.sh"
FLOOD="$ROOT/tests/e2e/flood.py"
start_master
start_peer p1 --workload synthetic --steps 100000 --size 65536 --step-delay 20; P1=$LAST_PID
start_peer p2 --workload synthetic --steps 100000 --size 65536 --step-delay 20
wait_events "$WORK/p1.log" step 3 60
P1PORT=$(python3 "$FLOOD" listen "$P1" | head -1)
echo "A: $(timeout 120 python3 "$FLOOD" ring "$P1PORT" "$P1" 3000)"
sleep 6 # streams the floods left behind close (or stay: that is what A measures)
echo "B: $(timeout 60 python3 "$FLOOD" bench "$P1PORT" "$P1" 16)"
echo "S: $(timeout 60 python3 "$FLOOD" ss "$P1PORT" "$P1" 8)"
echo "C: $(timeout 60 python3 "$FLOOD" hold "$PORT" "$MASTER_PID" 2000)"
sleep 1
echo "D: $(timeout 60 python3 "$FLOOD" oversize "$PORT" "$MASTER_PID" 60)"
echo "steps taken by p1 meanwhile: $(count_events "$WORK/p1.log" step)"
