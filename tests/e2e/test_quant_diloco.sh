#!/usr/bin/env bash
# DiLoCo on Fashion-MNIST with min-max uint8 pseudo-gradients against the same run
# unquantized: the quantized run must reach >= 0.78 test accuracy, end with the
# same shared-state hash on every peer and move at most 30% of the unquantized
# run's all-reduce bytes (tx + rx as reported by the library). Prints both.
. "$(dirname "$0")/lib.sh"
STEPS=${PCCL_TEST_DILOCO_STEPS:-40}
run() { # run NAME QUANTIZE: 3 peers, waits for them, prints "accuracy bytes hash-agreement"
    local name=$1 q=$2 pids=() r
    start_master
    for r in 1 2 3; do
        start_peer "$name$r" --workload fashion-mnist --steps "$STEPS" --inner-steps 20 --min-world 3 \
            --seed "$r" --quantize "$q"
        pids+=("$LAST_PID")
    done
    for r in 0 1 2; do wait_pid "${pids[$r]}" 300 || fail "$name peer $((r + 1)) failed"; done
    kill "$MASTER_PID" 2>/dev/null
}
summary() { # summary NAME: accuracy, total bytes, number of distinct hashes
    python3 - "$WORK" "$1" <<'PY'
import json, sys, glob
done = [json.loads(l) for f in sorted(glob.glob(f"{sys.argv[1]}/{sys.argv[2]}[123].log"))
        for l in open(f) if '"event":"done"' in l]
assert len(done) == 3, f"{len(done)} peers finished"
acc = min(d["test_accuracy"] for d in done)
b = sum(d["allreduce_tx_bytes"] + d["allreduce_rx_bytes"] for d in done)
print(f"{acc:.4f} {int(b)} {len({(d['hash'], d['momentum_hash']) for d in done})} {done[0]['quantize']}")
PY
}
run full none
read -r acc_f bytes_f hashes_f q_f <<< "$(summary full)" || fail "unquantized run incomplete"
run quant minmax:uint8
read -r acc_q bytes_q hashes_q q_q <<< "$(summary quant)" || fail "quantized run incomplete"
echo "unquantized ($q_f): accuracy $acc_f, all-reduce bytes $bytes_f"
echo "quantized   ($q_q): accuracy $acc_q, all-reduce bytes $bytes_q ($(python3 -c "print(f'{$bytes_q/$bytes_f:.1%}')") of unquantized)"
[ "$hashes_f" = 1 ] && [ "$hashes_q" = 1 ] || fail "peers ended with different shared state ($hashes_f / $hashes_q distinct)"
python3 -c "import sys; sys.exit(0 if $acc_q >= 0.78 else 1)" || fail "quantized accuracy $acc_q < 0.78"
python3 -c "import sys; sys.exit(0 if $bytes_q <= 0.30 * $bytes_f else 1)" || fail "quantized run moved more than 30% of the bytes"
echo "ok: quantized DiLoCo reached $acc_q with $bytes_q of $bytes_f bytes"
