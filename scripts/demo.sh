#!/usr/bin/env bash
# demo.sh - the main job: a pccl master on loopback and 4 peers training a
# 784-128-10 MLP on Fashion-MNIST with DiLoCo. Mid-run one peer is SIGKILLed
# and a new one joins through the accept phase and receives the shared state.
# At the end: test accuracy and every surviving peer's shared-state hash.
#
# Environment: STEPS (outer steps, default 60), INNER (inner steps, default 25),
# PEERS (default 4), QUANTIZE (pccl join --quantize, e.g. minmax:uint2; default none), SPARSIFY
# (pccl join --sparsify, e.g. topk:0.015:2; default none; with it the peers take SparseLoCo's outer step:
# decayed error feedback, plain outer SGD, docs/workload.md), FRAGMENTS (pccl join --fragments: Streaming DiLoCo
# with that many fragments; default 1, DiLoCo),
# KEEP_LOGS=1 to keep the logs; BIN=DIR uses DIR/pccl as built (no install, no build).
# PYTHON=1 (or diloco) runs the same with the Python example peers of examples/python/
# (PyTorch over the pccl package) instead of `pccl join`; PYTHON=ddp runs data-parallel
# training instead of DiLoCo. STEPS, INNER (DiLoCo), PEERS and KEEP_LOGS apply.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
    ./scripts/deps.sh
    ./scripts/build.sh build
fi
if [ "${PYTHON:-0}" != 0 ]; then
    case $PYTHON in
    1 | diloco) example=diloco ;;
    ddp) example=ddp ;;
    *) echo "demo.sh: PYTHON must be 1, diloco or ddp" >&2; exit 2 ;;
    esac
    args=(--example "$example" --bin "${BIN:-$PWD/build/bin}" --peers "${PEERS:-4}")
    [ -n "${STEPS:-}" ] && args+=(--steps "$STEPS")
    [ "${KEEP_LOGS:-0}" = 1 ] && args+=(--keep-logs)
    [ -n "${INNER:-}" ] && [ "$example" = diloco ] && args+=(-- --inner-steps "$INNER")
    # Debian's interpreter: apt installs torch for it, not for a python3 earlier on PATH.
    exec /usr/bin/python3 examples/python/run_examples.py "${args[@]}"
fi
PCCL=${BIN:-$PWD/build/bin}/pccl
STEPS=${STEPS:-60}
INNER=${INNER:-25}
PEERS=${PEERS:-4}
QUANTIZE=${QUANTIZE:-none}
SPARSIFY=${SPARSIFY:-}
FRAGMENTS=${FRAGMENTS:-1}
case $FRAGMENTS in '' | *[!0-9]*) echo "demo.sh: FRAGMENTS must be a positive number, got '$FRAGMENTS'" >&2; exit 2 ;; esac
EXTRA=()
# SparseLoCo (arXiv 2508.15706, section 3): error feedback decayed by 0.9 and plain outer SGD at lr 4 keep a
# top-k run within a point of dense DiLoCo (docs/benchmarks.md, section 4d).
[ -n "$SPARSIFY" ] && EXTRA+=(--sparsify "$SPARSIFY" --sparse-decay 0.9 --outer-momentum 0 --outer-lr 4)
[ "$FRAGMENTS" != 1 ] && EXTRA+=(--fragments "$FRAGMENTS")
LOGS=$(mktemp -d /tmp/pccl-demo.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "${KEEP_LOGS:-0}" = 1 ] && echo "logs: $LOGS" || rm -rf "$LOGS"
}
trap cleanup EXIT

"$PCCL" master --listen 127.0.0.1:0 --admin 127.0.0.1:0 > "$LOGS/master.log" 2>&1 &
MASTER=$!; PIDS+=("$MASTER")
PORT=""
for _ in $(seq 1 100); do
    PORT=$(grep -o 'listening on [0-9.]*:[0-9]*' "$LOGS/master.log" | sed 's/.*://' || true)
    [ -n "$PORT" ] && break; sleep 0.05
done
[ -n "$PORT" ] || { echo "master did not start"; cat "$LOGS/master.log"; exit 1; }
echo "master on 127.0.0.1:$PORT; $PEERS peers, $STEPS outer steps of $INNER inner AdamW steps, quantization $QUANTIZE," \
    "sparsification ${SPARSIFY:-none}, $FRAGMENTS fragment(s)"

peer() { # peer NAME: starts `pccl join` in the background, sets LAST
    "$PCCL" join --master "127.0.0.1:$PORT" --workload fashion-mnist --steps "$STEPS" --inner-steps "$INNER" \
        --min-world "$PEERS" --seed "$RANDOM$RANDOM" --quantize "$QUANTIZE" ${EXTRA[@]+"${EXTRA[@]}"} --json > "$LOGS/$1.log" 2> "$LOGS/$1.err" &
    LAST=$!; PIDS+=("$LAST")
}
revision() { grep -o '"revision":[0-9]*' "$LOGS/$1.log" 2>/dev/null | tail -1 | cut -d: -f2 || true; }

declare -A PID_OF
for i in $(seq 1 "$PEERS"); do peer "peer$i"; PID_OF[peer$i]=$LAST; done
start=$(date +%s)
victim=peer$PEERS
# Kill one peer once a third of the run is done, then let a new one join.
until [ "$(revision peer1)" != "" ] && [ "$(revision peer1)" -ge $((STEPS / 3)) ]; do
    sleep 0.2
    for n in "${!PID_OF[@]}"; do   # a peer that ended early (a usage error, a missing dataset) ends the demo
        kill -0 "${PID_OF[$n]}" 2>/dev/null && continue
        rc=0; wait "${PID_OF[$n]}" || rc=$?
        echo "$n exited (status $rc) before the run got going:"; tail -5 "$LOGS/$n.err"; exit 1
    done
    [ $(( $(date +%s) - start )) -lt 600 ] || { echo "no progress"; exit 1; }
done
kill -9 "${PID_OF[$victim]}"
wait "${PID_OF[$victim]}" 2>/dev/null || true
echo "t=$(( $(date +%s) - start ))s revision $(revision peer1): SIGKILLed $victim"
sleep 1
peer newcomer; PID_OF[newcomer]=$LAST
echo "t=$(( $(date +%s) - start ))s started newcomer"

survivors=()
for n in "${!PID_OF[@]}"; do [ "$n" = "$victim" ] || survivors+=("$n"); done
fail=0
for n in "${survivors[@]}"; do
    [ "$n" = newcomer ] && continue
    if ! wait "${PID_OF[$n]}"; then echo "$n exited with an error:"; tail -5 "$LOGS/$n.err"; fail=1; fi
done
# The newcomer finishes with the others unless the run ended before it was accepted (tiny STEPS):
# then it would wait for peers forever, so it gets 30 s.
for _ in $(seq 1 300); do kill -0 "${PID_OF[newcomer]}" 2>/dev/null || break; sleep 0.1; done
if kill -0 "${PID_OF[newcomer]}" 2>/dev/null; then
    echo "the newcomer was not accepted before the run ended (STEPS=$STEPS is too short); stopping it"
    kill -9 "${PID_OF[newcomer]}"; wait "${PID_OF[newcomer]}" 2>/dev/null || true
    fail=1
elif ! wait "${PID_OF[newcomer]}"; then
    echo "newcomer exited with an error:"; tail -5 "$LOGS/newcomer.err"; fail=1
fi
echo "finished in $(( $(date +%s) - start ))s"
python3 - "$LOGS" "${survivors[@]}" <<'PY' || fail=1
import json, sys
logs, names = sys.argv[1], sorted(sys.argv[2:])
rows, hashes = [], set()
for n in names:
    done, first, rx = None, None, 0
    for line in open(f"{logs}/{n}.log"):
        if not line.startswith("{"): continue
        o = json.loads(line)
        if o.get("event") == "step":
            first = first if first is not None else o["revision"]
            rx += o.get("ss_rx_bytes", 0)
        if o.get("event") == "done": done = o
    if not done:
        print(f"{n}: no final report"); sys.exit(1)
    hashes.add((done["hash"], done["momentum_hash"]))
    ar = done.get("allreduce_tx_bytes", 0)  # what this peer sent for collectives
    rows.append((n, first, done["revision"], rx, done["test_accuracy"], done["hash"], done["momentum_hash"], ar))
print(f"{'peer':10} {'first rev':>9} {'final rev':>9} {'state rx B':>10} {'reduce B':>11} {'test acc':>8}  shared-state hash (params / momentum)")
for r in rows:
    print(f"{r[0]:10} {r[1]:>9} {r[2]:>9} {r[3]:>10} {int(r[7]):>11} {r[4]:>8.4f}  {r[5]} / {r[6]}")
acc = rows[0][4]
print(f"test accuracy: {acc:.4f}")
print("shared-state hashes equal on all surviving peers:", "yes" if len(hashes) == 1 else "NO")
sys.exit(0 if len(hashes) == 1 and acc >= 0.80 else 1)
PY
kill -INT "$MASTER"; wait "$MASTER" || true
exit $fail
