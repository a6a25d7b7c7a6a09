#!/usr/bin/env bash
# bench/nat.sh BIN_DIR [ROUNDS] - what NAT traversal costs (root; docs/nat.md "Benchmarks", docs/benchmarks.md).
#
# The topology of the NAT tests (tests/e2e/nat_lib.sh) with its public network under the WAN emulation (bench/wanemu:
# WAN_DELAY ms one way, default 20; WAN_RATE Mbit/s per link and direction, default 1000): the master and `pccl
# relay` on the public network, public hosts h1..h3 and a peer n1 behind a NAT router that randomises source ports
# (MASQUERADE --random-fully), so no punch can reach it and every connection dialled to it goes through the relay.
# ROUNDS (default 2) interleaved rounds of two runs of `pccl join --workload synthetic` (3 peers, NAT_BYTES per
# all-reduce, default 4 MiB, NAT_STEPS steps, default 12; NAT_OPTIMIZE=1 adds --optimize, so the bandwidth probe
# measures every edge):
#   direct   h1 h2 h3: every ring edge dialled directly;
#   relayed  h1 h2 n1: the ring edge into n1 goes through the relay (3 peers: every ring order has one such edge).
# Printed: the median step time of each run (steps after the first 3), and (NAT_OPTIMIZE=1) the bandwidth that
# optimize topology's probe measured per edge (`pccl bench-bandwidth --admin`) in the relayed run: edges into n1
# (relayed) against the public hosts' edges (direct); then the ratios, medians over the rounds. The machine may be
# shared: compare only the ratios of one run.
set -u
BIN=$(cd "${1:?usage: bench/nat.sh BIN_DIR [ROUNDS]}" && pwd)
ROUNDS=${2:-2}
BYTES=${NAT_BYTES:-4194304}
STEPS=${NAT_STEPS:-12}
OPT=()
[ "${NAT_OPTIMIZE:-0}" = 1 ] && OPT=(--optimize)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/e2e/lib.sh" "$BIN"
. "$HERE/../tests/e2e/nat_lib.sh"
nat_skip_unless_usable
[ -c /dev/net/tun ] && [ -x "$BIN/wanemu" ] || { echo "bench/nat.sh: needs /dev/net/tun and $BIN/wanemu" >&2; exit 1; }
nat_wan 198.18.0.2 198.18.0.11 198.18.0.12 198.18.0.13 198.18.0.101
nat_public
for i in 1 2 3; do nat_host "h$i" "198.18.0.1$i"; done
nat_router n1 1 random
nat_relay

# one_run NAME HOST...: a fresh master and 3 peers; RUN_MS: the median step time; keeps the run's matrix and edges
one_run() {
    local name=$1 h pids=() k=0; shift
    nat_start_master --relay "$NAT_RELAY"
    for h in "$@"; do
        k=$((k + 1))
        nat_peer "$name-$k" "$h" --workload synthetic --steps "$STEPS" --size "$BYTES" --min-world 3 \
            ${OPT[@]+"${OPT[@]}"}
        pids+=("$LAST_PID")
    done
    wait_events "$WORK/$name-1.log" step 4 120
    : > "$WORK/$name.edges.txt"
    for _ in $(seq 1 40); do # the edge kinds, and the edges optimize topology's probe measured
        nat_status_json > "$WORK/$name.status.json" && nat_edges < "$WORK/$name.status.json" >> "$WORK/$name.edges.txt"
        "$PCCL_PUB" bench-bandwidth --admin "127.0.0.1:$APORT" --json > "$WORK/$name.bw.json" 2> /dev/null
        { [ ${#OPT[@]} = 0 ] ||
            python3 -c 'import json,sys; sys.exit(len(json.load(open(sys.argv[1])).get("bandwidth") or []) < 6)' \
                "$WORK/$name.bw.json" 2> /dev/null; } && [ -s "$WORK/$name.edges.txt" ] && break
        sleep 0.5
    done
    for h in "${pids[@]}"; do wait_pid "$h" 300 || fail "$name: a peer exited with $?"; done
    kill -INT "$MASTER_PID"
    wait_pid "$MASTER_PID" 10 > /dev/null
    RUN_MS=$(python3 - "$WORK" "$name" <<'PY'
import json, statistics, sys
work, name = sys.argv[1:]
ms = []
for k in (1, 2, 3):
    steps = [json.loads(l) for l in open(f"{work}/{name}-{k}.log") if '"event":"step"' in l]
    ms += [s["ms"] for s in steps[3:]]
print(f"{statistics.median(ms):.1f}")
PY
)
}

# edge_mbps NAME: "RELAYED_MBPS DIRECT_MBPS" from the run's measured matrix (edges into n1's peer against the rest)
edge_mbps() {
    python3 - "$WORK/$1.bw.json" "$WORK/$1.status.json" <<'PY'
import json, statistics, sys
bw, st = (json.load(open(p)) for p in sys.argv[1:])
name = {p["uuid"]: p.get("name", "") for p in st["peers"]}
into, rest = [], []
for e in bw.get("bandwidth") or []:
    (into if name.get(e["to"], "").endswith("-3") else rest).append(e["mbps"])
print(f"{statistics.mean(into):.0f} {statistics.mean(rest):.0f}" if into and rest else "- -")
PY
}

printf '%-8s %-6s %14s %18s %18s\n' run round "step ms (med)" "relayed Mbit/s" "direct Mbit/s" > "$WORK/table"
for r in $(seq 1 "$ROUNDS"); do
    one_run "direct$r" h1 h2 h3
    d=$RUN_MS
    printf '%-8s %-6s %14s %18s %18s\n' direct "$r" "$d" - - >> "$WORK/table"
    one_run "relayed$r" h1 h2 n1
    x=$RUN_MS
    grep -q relayed "$WORK/relayed$r.edges.txt" || fail "round $r: /v1/status shows no relayed edge"
    read -r rel dir <<< "$(edge_mbps "relayed$r")"
    printf '%-8s %-6s %14s %18s %18s\n' relayed "$r" "$x" "$rel" "$dir" >> "$WORK/table"
    echo "$d $x $rel $dir" >> "$WORK/ratios"
done
echo "NAT traversal under the WAN emulation (wanemu: ${WAN_DELAY:-20} ms one way, ${WAN_RATE:-1000} Mbit/s per link)," \
    "3 peers, $BYTES B all-reduces"
cat "$WORK/table"
python3 - "$WORK/ratios" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
step = statistics.median(float(x) / float(d) for d, x, _, _ in rows)
bw = [float(r) / float(d) for _, _, r, d in rows if r != "-"]
print(f"all-reduce step time, one relayed edge / none: {step:.2f}x (median over {len(rows)} rounds)")
print(f"probe bandwidth, relayed edge / direct edge: {statistics.median(bw):.2f}x" if bw else "no bandwidth measured")
PY
