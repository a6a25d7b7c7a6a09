#!/usr/bin/env bash
# Streaming DiLoCo (pccl join --fragments 2 --overlap-steps 2) on Fashion-MNIST with 3 peers, one SIGKILLed mid-run:
# the survivors finish with equal shared-state hashes, having synced both fragments in each outer step (one fragment's
# bytes per sync) and learned something. Then 2 peers with --quantize minmax:uint8: fewer bytes per fragment sync on the wire.
. "$(dirname "$0")/lib.sh"
COMMON=(--workload fashion-mnist --inner-steps 10 --fragments 2 --overlap-steps 2)
check_done() { # check_done NAME...: prints "accuracy distinct-hashes median-tx-bytes-per-sync-at-world-2"
    python3 - "$WORK" "$@" <<'PY'
import json, sys, statistics
work, names = sys.argv[1], sys.argv[2:]
done, tx, frags = [], [], set()
for n in names:
    for line in open(f"{work}/{n}.log"):
        if not line.startswith("{"): continue
        o = json.loads(line)
        if o["event"] == "done": done.append(o)
        if o["event"] == "step":
            frags.add(o["fragments_applied"])
            if o["world_size"] == 2 and o["fragments_applied"] == 2: tx.append(o["tx_bytes"] / 2)
assert len(done) == len(names), f"{len(done)} of {len(names)} peers finished"
assert 2 in frags, f"fragments applied per outer step: {sorted(frags)}"
assert all(d["fragments"] == 2 and d["overlap_steps"] == 2 for d in done)
print(f"{min(d['test_accuracy'] for d in done):.4f} {len({(d['hash'], d['momentum_hash']) for d in done})} "
      f"{int(statistics.median(tx)) if tx else 0}")
PY
}
start_master
pids=()
for r in 1 2 3; do
    start_peer "peer$r" "${COMMON[@]}" --steps 12 --min-world 3 --seed "$r"
    pids+=("$LAST_PID")
done
for _ in $(seq 1 1200); do [ "$(count_events "$WORK/peer1.log" step)" -ge 3 ] && break; sleep 0.05; done
[ "$(count_events "$WORK/peer1.log" step)" -ge 3 ] || fail "no progress before the kill"
kill -9 "${pids[2]}"
for r in 0 1; do wait_pid "${pids[$r]}" 120 || fail "peer $((r + 1)) failed: $(tail -3 "$WORK/peer$((r + 1)).err")"; done
read -r acc hashes tx_full <<< "$(check_done peer1 peer2)" || fail "the streaming run is incomplete"
[ "$hashes" = 1 ] || fail "survivors ended with $hashes different shared states"
python3 -c "import sys; sys.exit(0 if $acc >= 0.6 else 1)" || fail "test accuracy $acc < 0.6"
# One fragment is half of the 101,770 parameters; a 2-peer ring sends each element once, 4 bytes each.
python3 -c "import sys; sys.exit(0 if 190000 <= $tx_full <= 220000 else 1)" || fail "fp32 fragment sync sent $tx_full B"
kill "$MASTER_PID" 2>/dev/null; wait_pid "$MASTER_PID" 30 >/dev/null # its last lines must not land in the next log
start_master
pids=()
for r in 1 2; do
    start_peer "quant$r" "${COMMON[@]}" --steps 3 --min-world 2 --seed "$r" --quantize minmax:uint8
    pids+=("$LAST_PID")
done
for r in 0 1; do wait_pid "${pids[$r]}" 120 || fail "quantized peer $((r + 1)) failed"; done
read -r acc_q hashes_q tx_q <<< "$(check_done quant1 quant2)" || fail "the quantized streaming run is incomplete"
[ "$hashes_q" = 1 ] || fail "quantized peers ended with $hashes_q different shared states"
python3 -c "import sys; sys.exit(0 if 0 < $tx_q <= 0.3 * $tx_full else 1)" ||
    fail "uint8 fragment sync sent $tx_q B against $tx_full B in fp32"
echo "ok: streaming survivors agree (accuracy $acc); bytes per fragment sync fp32 $tx_full, uint8 $tx_q"
