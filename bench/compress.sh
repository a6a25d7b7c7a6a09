#!/usr/bin/env bash
# bench/compress.sh - Fashion-MNIST DiLoCo (pccl join --workload fashion-mnist) with N peers and the same seeds,
# one run per configuration: dense fp32, int8, 4-bit, 2-bit and top-k 3% + 2-bit pseudo-gradients, each with and
# without Streaming DiLoCo. Per run: the collective bytes each peer sent per outer step (H inner steps), the test
# accuracy, whether every peer ended with the same shared state, and with --wan the compute utilisation (the
# share of wall time the peers spent in inner steps, the done event's compute_utilization, averaged over the
# peers) under the WAN emulation of bench/wan_env.sh (root).
#
# usage: bench/compress.sh [--bin DIR] [--configs LIST] [--streaming off|on|both] [--local] [--wan]
#                          [--steps N] [--wan-steps N] [--inner H] [--fragments K] [--overlap TAU] [--peers N]
#                          [--join-flags "FLAGS"] [--seed-base S]
#   --configs   comma list of fp32,int8,uint4,uint2,topk3 (default), topk15 (top-k 1.5% + 2-bit) and topk1 (top-k 1%
#               + 2-bit), or any --sparsify value (topk:0.02:2)
#   --streaming off: DiLoCo only, on: Streaming DiLoCo only, both (default)
#   --local     loopback runs (bytes, accuracy); --wan: runs under the emulation (utilisation, bytes, accuracy);
#               neither: --local. --wan-steps (default --steps) keeps the emulated runs short.
#   --steps     outer steps (default 30), each of H inner steps with K fragment syncs
#   --inner     H, inner steps per outer step (default 25); --fragments K (default 4); --overlap TAU (default: the
#               workload's, half of H/K); --join-flags: more pccl join flags for every run (e.g. --outer-lr 1)
#   --seed-base peer I's data-order seed is S + I (default 1)
# env: WAN_RATE (100mbit), WAN_DELAY (the emulation's default: 40 ms RTT on either path), WAN_MTU (1500),
#      WAN_PREFIX (pcclc), as in bench/wan.sh.
# Prints one RESULT line per run, then a Markdown table of all of them.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/build/bin CONFIGS=fp32,int8,uint4,uint2,topk3 STREAMING=both LOCAL=0 WAN=0
STEPS=30 WAN_STEPS= INNER=25 FRAGMENTS=4 OVERLAP= NPEERS=4 JOIN_FLAGS= SEED_BASE=1
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=$2; shift ;;
    --configs) CONFIGS=$2; shift ;;
    --streaming) STREAMING=$2; shift ;;
    --local) LOCAL=1 ;;
    --wan) WAN=1 ;;
    --steps) STEPS=$2; shift ;;
    --wan-steps) WAN_STEPS=$2; shift ;;
    --inner) INNER=$2; shift ;;
    --fragments) FRAGMENTS=$2; shift ;;
    --overlap) OVERLAP=$2; shift ;;
    --peers) NPEERS=$2; shift ;;
    --join-flags) JOIN_FLAGS=$2; shift ;;
    --seed-base) SEED_BASE=$2; shift ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
    esac
    shift
done
[ "$LOCAL$WAN" = 00 ] && LOCAL=1
WAN_STEPS=${WAN_STEPS:-$STEPS}
case $STREAMING in off) KS=1 ;; on) KS=$FRAGMENTS ;; both) KS="1 $FRAGMENTS" ;; *) echo "bad --streaming" >&2; exit 2 ;; esac
PCCL=$BIN/pccl
RESULTS=$(mktemp /tmp/pccl-compress-XXXXXX.txt)

flags_of() { # flags_of CONFIG: the pccl join flags of a configuration
    case $1 in
    fp32) echo "--quantize none" ;;
    int8) echo "--quantize minmax:uint8" ;;
    uint4) echo "--quantize minmax:uint4" ;;
    uint2) echo "--quantize minmax:uint2" ;;
    topk3) echo "--sparsify topk:0.03:2" ;;
    topk15) echo "--sparsify topk:0.015:2" ;;
    topk1) echo "--sparsify topk:0.01:2" ;;
    topk:*) echo "--sparsify $1" ;;
    *) echo "compress.sh: unknown configuration $1" >&2; return 1 ;;
    esac
}

# summarize DIR CONFIG K MODE OUTER: a RESULT line from the peers' done events
summarize() {
    python3 - "$@" <<'PY'
import glob, json, sys
d, config, k, mode, outer = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
done = []
for f in sorted(glob.glob(f"{d}/peer*.log")):
    ev = [json.loads(l) for l in open(f) if l.startswith("{")]
    done += [e for e in ev if e["event"] == "done"]
if not done:
    print(f"RESULT config={config} fragments={k} mode={mode} status=FAILED"); sys.exit(0)
tx = sum(e["allreduce_tx_bytes"] for e in done) / len(done) / outer
util = sum(e["compute_utilization"] for e in done) / len(done)
print(f"RESULT config={config} fragments={k} overlap={done[0]['overlap_steps']} mode={mode} peers={len(done)} "
      f"outer_steps={outer} tx_bytes_per_outer_step={tx:.0f} test_accuracy={min(e['test_accuracy'] for e in done):.4f} "
      f"same_state={len({(e['hash'], e['momentum_hash']) for e in done}) == 1} compute_utilization={util:.3f} "
      f"prologue_share={sum(e['prologue_ms'] / e['wall_ms'] for e in done) / len(done):.3f} "
      f"wait_share={sum(e['allreduce_wait_ms'] / e['wall_ms'] for e in done) / len(done):.3f} "
      f"wall_s={max(e['wall_ms'] for e in done) / 1e3:.1f}")
PY
}

# run_one CONFIG K MODE OUTER MASTER_HOST [PEER_PREFIX...]: one run of NPEERS peers against a fresh master
run_one() {
    local config=$1 k=$2 mode=$3 outer=$4 host=$5 pids=() i port=
    shift 5
    local d
    d=$(mktemp -d /tmp/pccl-compress-run-XXXXXX)
    local extra
    extra="$(flags_of "$config") $JOIN_FLAGS"
    [ "$k" != 1 ] && extra+=" --fragments $k${OVERLAP:+ --overlap-steps $OVERLAP}"
    "${MASTER_NS[@]}" "$PCCL" master --listen "$host:0" --admin 127.0.0.1:0 >"$d/master.log" 2>&1 &
    MPID=$!
    for _ in $(seq 1 100); do
        port=$(grep -o 'listening on [0-9.]*:[0-9]*' "$d/master.log" | sed 's/.*://' || true)
        [ -n "$port" ] && break; sleep 0.05
    done
    [ -n "$port" ] || { echo "compress.sh: the master did not start" >&2; cat "$d/master.log" >&2; exit 1; }
    echo "[$(date -u +%H:%M:%S)] $mode: $config, $k fragment(s), $outer outer steps" >&2
    for i in $(seq 0 $((NPEERS - 1))); do
        # shellcheck disable=SC2086 # extra is a list of flags
        timeout 1800 "$@" ${NSP:+"$NSP-p$i"} "$PCCL" join --master "$host:$port" --workload fashion-mnist \
            --steps "$outer" --inner-steps "$INNER" --min-world "$NPEERS" --seed $((i + SEED_BASE)) $extra --json \
            >"$d/peer$i.log" 2>"$d/peer$i.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || tail -n 2 "$d"/peer*.err >&2; done
    kill -TERM "$MPID" 2>/dev/null || true
    wait "$MPID" 2>/dev/null || true
    MPID=
    summarize "$d" "$config" "$k" "$mode" "$outer" | tee -a "$RESULTS"
    rm -rf "$d"
}

IFS=, read -r -a CONFIG_LIST <<<"$CONFIGS"
trap 'jobs -p | xargs -r kill -9 2>/dev/null || true' EXIT # the wan path replaces it with its own cleanup
if [ "$LOCAL" = 1 ]; then
    MASTER_NS=() NSP=
    for c in "${CONFIG_LIST[@]}"; do for k in $KS; do run_one "$c" "$k" local "$STEPS" 127.0.0.1; done; done
fi
if [ "$WAN" = 1 ]; then
    NSP=${WAN_PREFIX:-pcclc} PEERS=$NPEERS RATE=${WAN_RATE:-100mbit} LOSS=0% MTU=${WAN_MTU:-1500}
    CC=$(sysctl -n net.ipv4.tcp_congestion_control)
    . "$ROOT/bench/wan_env.sh"
    echo "RESULT mode=wanenv emu=${EMU// /_}" | tee -a "$RESULTS"
    for c in "${CONFIG_LIST[@]}"; do
        for k in $KS; do run_one "$c" "$k" wan "$WAN_STEPS" "$MASTER_IP" ip netns exec; done
    done
fi
python3 - "$RESULTS" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(p.split("=", 1) for p in line.split()[1:])
    if "config" in kv: rows.setdefault((kv["config"], int(kv["fragments"])), {})[kv["mode"]] = kv
names = {"fp32": "dense fp32", "int8": "int8 (minmax:uint8)", "uint4": "4-bit (minmax:uint4)",
         "uint2": "2-bit (minmax:uint2)", "topk3": "top-k 3% + 2-bit (topk:0.03:2)",
         "topk15": "top-k 1.5% + 2-bit (topk:0.015:2)", "topk1": "top-k 1% + 2-bit (topk:0.01:2)"}
base = rows.get(("fp32", 1), {}).get("local") or rows.get(("fp32", 1), {}).get("wan")
print("| configuration | fragments | B sent / peer / outer step | vs dense fp32 | test accuracy | same state "
      "| compute utilisation (WAN) |")
print("|---|---|---|---|---|---|---|")
for (c, k), m in rows.items():
    r = m.get("local") or m.get("wan")
    if r.get("status") == "FAILED":
        print(f"| {names.get(c, c)} | {k} | failed | | | | |"); continue
    ratio = f"{float(base['tx_bytes_per_outer_step']) / float(r['tx_bytes_per_outer_step']):.1f}x fewer" \
        if base and base.get("status") != "FAILED" else ""
    w = m.get("wan")
    util = f"{float(w['compute_utilization']):.1%}" if w and w.get("status") != "FAILED" else "not run"
    print(f"| {names.get(c, c)} | {k} | {r['tx_bytes_per_outer_step']} | {ratio} | {r['test_accuracy']} "
          f"| {r['same_state']} | {util} |")
PY
echo "results: $RESULTS" >&2
