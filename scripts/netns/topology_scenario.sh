#!/usr/bin/env bash
# topology_scenario.sh - WAN scenario for pcclOptimizeTopology in network namespaces.
#
# usage: scripts/netns/topology_scenario.sh [BIN_DIR]      (root; BIN_DIR holds pccl, default build/bin)
#
# Six peers, each in its own namespace, hang off a bridge in a seventh namespace that also runs
# the master. Every peer's egress is shaped per destination (HTB + u32 filter on the destination
# IP) to the bandwidth matrix below, so the join order 1->2->3->4->5->6->1 runs through slow links
# while exactly one ring (1->3->5->2->6->4->1) uses only fast ones. Each peer runs
# bench/topology/ring_driver.c: times an all-reduce, calls pcclOptimizeTopology, times it again.
#
# Checks: (1) the optimized all-reduce is >= MIN_SPEEDUP (1.5) times faster (median over peers);
# (2) the ring the master chose (its "topology solved" log line) equals, up to rotation, the exact
# optimum of the logged matrix computed by `pccl solve-topology --json`; (3) the master's initial
# ring was the join order. Also reported: whether the chosen ring is the designed fast ring.
#
# Environment: MIB (all-reduce size, default 256), REPS (timed all-reduces per phase, median;
# default 1), FAST / MED / SLOW (Mbit/s, default 800 / 300 / 100), MIN_SPEEDUP (1.5),
# KEEP_WORK=1 keeps the logs, OUT_JSON=FILE writes the summary as JSON.
# Exit 0 when every check passes, 1 otherwise.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${1:-${PCCL_BIN:-$ROOT/build/bin}}
PCCL="$BIN/pccl"
LIB="$(cd "$BIN/.." && pwd)/lib"
MIB=${MIB:-256}
REPS=${REPS:-1}
FAST=${FAST:-800}
MED=${MED:-300}
SLOW=${SLOW:-100}
MIN_SPEEDUP=${MIN_SPEEDUP:-1.5}
N=6
. "$HERE/netns_lib.sh"
WORK=$(mktemp -d /tmp/pcclt-scenario.XXXXXX)

on_exit() {
    netns_cleanup
    if [ "${KEEP_WORK:-0}" = 1 ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap on_exit EXIT
trap 'exit 1' INT TERM

die() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 8 "$f"; } >&2; done
    exit 1
}

[ -x "$PCCL" ] || die "no pccl binary at $PCCL"
[ -e "$LIB/libpccl.so" ] || die "no libpccl.so in $LIB"

# The driver links against the build's shared library (works with and without the CUDA kernels).
DRIVER="$WORK/ring_driver"
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$DRIVER" "$ROOT/bench/topology/ring_driver.c" \
    -I "$ROOT/libpccl/include" -L "$LIB" -lpccl -Wl,-rpath,"$LIB" -lm -lpthread || die "cannot build ring_driver"

# Directed bandwidth (Mbit/s) between join-order indices 0..5 (peer i+1, IP 10.66.0.(i+1)).
# Default MED. The fast ring 0->2->4->1->5->3->0 is FAST and its reverse hops are SLOW
# (asymmetric: 0->2 fast, 2->0 slow). Join-order hops: 0->1, 2->3, 4->5 FAST (decoys),
# 1->2, 3->4, 5->0 SLOW, so the initial ring's bottleneck is SLOW.
rate() {
    local i=$1 j=$2
    case "$i$j" in
        02|24|41|15|53|30) echo "$FAST" ;;
        20|42|14|51|35|03) echo "$SLOW" ;;
        01|23|45) echo "$FAST" ;;
        12|34|50) echo "$SLOW" ;;
        *) echo "$MED" ;;
    esac
}

BR="pcclt${NETNS_TAG}br"
netns_star "$BR" "$N" || die "cannot build the namespaces"
for i in $(seq 0 $((N - 1))); do
    ns="pcclt${NETNS_TAG}p$((i + 1))"
    netns_shape "$ns" eth0 || die "tc htb in $ns"
    for j in $(seq 0 $((N - 1))); do
        [ "$i" = "$j" ] && continue
        netns_rate "$ns" eth0 "$NETNS_SUBNET.$((j + 1))" "$(rate "$i" "$j")" $((j + 10)) || die "tc class $i->$j"
    done
done
{
    echo "# shaped egress rates (Mbit/s), row = sender, column = receiver, join order"
    for i in $(seq 0 $((N - 1))); do
        row=""
        for j in $(seq 0 $((N - 1))); do
            if [ "$i" = "$j" ]; then v=0; else v=$(rate "$i" "$j"); fi
            row="${row:+$row,}$v"
        done
        echo "$row"
    done
} > "$WORK/designed.csv"

ip netns exec "$BR" env PCCL_LOG_LEVEL=info "$PCCL" master --listen "$NETNS_SUBNET.254:0" --no-admin \
    > "$WORK/master.log" 2>&1 &
NETNS_PIDS+=($!)
PORT=$(netns_master_port "$WORK/master.log") || die "master did not start"

# Join order: peer i starts only after the master logged peer i-1's registration.
T0=$(date +%s.%N)
for i in $(seq 1 "$N"); do
    ip netns exec "pcclt${NETNS_TAG}p$i" env PCCL_LOG_LEVEL=info "$DRIVER" "$NETNS_SUBNET.254" "$PORT" "$N" \
        "$MIB" "$REPS" > "$WORK/p$i.out" 2> "$WORK/p$i.log" &
    NETNS_PIDS+=($!)
    ok=0
    for _ in $(seq 1 200); do
        [ "$(grep -c ' registered (group' "$WORK/master.log")" -ge "$i" ] && { ok=1; break; }
        sleep 0.05
    done
    [ "$ok" = 1 ] || die "peer $i did not register"
done
LIMIT=${SCENARIO_TIMEOUT:-900}
rc_all=0
for k in $(seq 1 "$N"); do
    pid=${NETNS_PIDS[$k]}
    for _ in $(seq 1 $((LIMIT * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && die "peer $k still running after ${LIMIT}s"
    wait "$pid" || { echo "peer $k exited with $?" >&2; rc_all=1; }
done
T1=$(date +%s.%N)
[ "$rc_all" = 0 ] || die "a peer failed"

# TCP loss counters of every peer namespace after the run (the probes' and the all-reduces' retransmits).
for i in $(seq 1 "$N"); do
    printf 'p%s ' "$i"
    ip netns exec "pcclt${NETNS_TAG}p$i" cat /proc/net/snmp /proc/net/netstat 2>/dev/null | awk '
        /^Tcp: [A-Z]/ {for (k = 2; k <= NF; k++) h[k] = $k; getline; for (k = 2; k <= NF; k++) if (h[k] == "RetransSegs") printf "RetransSegs=%s ", $k}
        /^TcpExt: [A-Z]/ {for (k = 2; k <= NF; k++) h[k] = $k; getline; for (k = 2; k <= NF; k++) if (h[k] == "TCPTimeouts" || h[k] == "TCPLossProbes") printf "%s=%s ", h[k], $k}'
    echo
done > "$WORK/tcp_counters.txt"

# Ground truth (GROUND_TRUTH=1, default): every directed link measured alone, one after the other,
# with `pccl bench-bandwidth` (the same probe code, PROBE_SECONDS each), to compare with the
# master's concurrent 300 ms probes and to get the true optimum.
if [ "${GROUND_TRUTH:-1}" = 1 ]; then
    for i in $(seq 1 "$N"); do
        ip netns exec "pcclt${NETNS_TAG}p$i" "$PCCL" bench-bandwidth --server --listen "$NETNS_SUBNET.$i:48150" \
            > "$WORK/bw_server$i.log" 2>&1 &
        NETNS_PIDS+=($!)
    done
    sleep 0.3
    : > "$WORK/truth.txt"
    for i in $(seq 1 "$N"); do
        for j in $(seq $((i + 1)) "$N"); do
            ip netns exec "pcclt${NETNS_TAG}p$i" "$PCCL" bench-bandwidth --connect "$NETNS_SUBNET.$j:48150" \
                --seconds "${PROBE_SECONDS:-1}" --json 2> /dev/null | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], o["upload"]["mbps"]); print(sys.argv[2], sys.argv[1], o["download"]["mbps"])' \
                "$((i - 1))" "$((j - 1))" >> "$WORK/truth.txt" || die "bench-bandwidth $i <-> $j failed"
        done
    done
    # The master's probe duration (300 ms) with the library's probe code, each link alone: separates
    # the effect of the short duration from that of the master's concurrent probes.
    PROBE="$WORK/probe_once"
    if cc -std=c11 -O2 -o "$PROBE" "$ROOT/bench/topology/probe_once.c" -I "$ROOT/libpccl/include" -I "$ROOT/libpccl/src" \
          "$LIB/libpccl.a" -luv -lcjson -lz -lm -fopenmp -lpthread 2> /dev/null ||
       cc -std=c11 -O2 -o "$PROBE" "$ROOT/bench/topology/probe_once.c" -I "$ROOT/libpccl/include" -I "$ROOT/libpccl/src" \
          "$LIB/libpccl.a" -L/usr/local/cuda/lib64 -lcudart -lstdc++ -luv -lcjson -lz -lm -fopenmp -lpthread 2> /dev/null; then
        : > "$WORK/alone300.txt"
        for i in $(seq 1 "$N"); do
            for j in $(seq 1 "$N"); do
                [ "$i" = "$j" ] && continue
                v=$(ip netns exec "pcclt${NETNS_TAG}p$i" "$PROBE" "$NETNS_SUBNET.$j" 48150 300) || die "probe $i -> $j failed"
                echo "$((i - 1)) $((j - 1)) $v" >> "$WORK/alone300.txt"
            done
        done
    fi
fi

grep 'topology solved: ' "$WORK/master.log" | tail -n 1 | sed 's/.*topology solved: //' > "$WORK/solved.json"
[ -s "$WORK/solved.json" ] || die "no 'topology solved' line in the master log"
python3 -c 'import json,sys; print("\n".join(",".join(repr(float(x)) for x in r) for r in json.load(open(sys.argv[1]))["matrix_mbps"]))' \
    "$WORK/solved.json" > "$WORK/measured.csv" || die "cannot parse the solved line"
"$PCCL" solve-topology --matrix "$WORK/measured.csv" --json > "$WORK/exact.json" || die "solve-topology failed"

if [ -s "$WORK/truth.txt" ]; then
    python3 - "$WORK" "$N" <<'PY' || die "cannot build the ground-truth matrix"
import sys
work, n = sys.argv[1], int(sys.argv[2])
m = [[0.0] * n for _ in range(n)]
for line in open(f"{work}/truth.txt"):
    i, j, v = line.split()
    m[int(i)][int(j)] = float(v)
open(f"{work}/truth.csv", "w").write("\n".join(",".join(repr(x) for x in r) for r in m) + "\n")
PY
    "$PCCL" solve-topology --matrix "$WORK/truth.csv" --json > "$WORK/truth_exact.json" || die "solve-topology (truth) failed"
fi

python3 - "$WORK" "$N" "$MIN_SPEEDUP" "$MIB" "$REPS" "$FAST" "$MED" "$SLOW" "$T0" "$T1" "${OUT_JSON:-}" <<'PY'
import json, os, re, statistics, sys
work, n, min_speedup = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
mib, reps, fast, med, slow, t0, t1, out_json = sys.argv[4:12]
solved = json.load(open(f"{work}/solved.json"))
exact = json.load(open(f"{work}/exact.json"))
# uuid prefix -> join index from each peer's "[peer:xxxxxxxx]" log prefix
join = {}
for k in range(n):
    m = re.search(r"peer:([0-9a-f]{8})", open(f"{work}/p{k+1}.log").read())
    if m: join[m.group(1)] = k
runs = [json.loads(open(f"{work}/p{k+1}.out").read().strip().splitlines()[-1]) for k in range(n)]
before = statistics.median(r["before_s"] for r in runs)
after = statistics.median(r["after_s"] for r in runs)
speedup = before / after
peers = solved["peers"]
initial = [join.get(p, -1) for p in peers]          # join index of each matrix row
chosen = [initial[i] for i in solved["ring"]]        # master's ring, as join indices
exact_ring = [initial[i] for i in exact["ring"]]

def canon(r):
    k = r.index(min(r))
    return r[k:] + r[:k]

def hops(r):
    return " -> ".join(str(x + 1) for x in r + r[:1])

designed = [0, 2, 4, 1, 5, 3]
checks = {
    "initial_ring_is_join_order": canon(initial) == list(range(n)),
    "speedup_ge_%g" % min_speedup: speedup >= min_speedup,
    "chosen_ring_is_exact_optimum": canon(solved["ring"]) == canon(exact["ring"]),
}
mat = solved["matrix_mbps"]
print(f"WAN scenario: {n} peers, all-reduce {mib} MiB float32 sum, {reps} timed rep(s) per phase, "
      f"shaped FAST={fast} MED={med} SLOW={slow} Mbit/s")
print("measured matrix (Mbit/s, master's 300 ms probes; rows/cols = peers in join order 1..6):")
order = sorted(range(n), key=lambda i: initial[i])
for i in order:
    print("  " + " ".join(f"{(mat[i][j] if i != j else 0):7.0f}" for j in order))
print(f"initial ring (join order): {hops(initial)}")
print(f"master's ring: {hops(chosen)}  bottleneck {solved['bottleneck_mbps']:.0f} Mbit/s, optimal={solved['optimal']}")
print(f"exact optimum (pccl solve-topology): {hops(exact_ring)}  bottleneck {exact['bottleneck_mbps']:.0f} Mbit/s")
print(f"designed fast ring: {hops(designed)}  (chosen == designed: {canon(chosen) == designed})")
print("per-peer before/after s: " + ", ".join(f"{r['before_s']:.2f}/{r['after_s']:.2f}" for r in runs))
print(f"all-reduce before {before:.3f} s, after {after:.3f} s, speedup {speedup:.2f}x; "
      f"optimize took {statistics.median(r['optimize_s'] for r in runs):.2f} s "
      f"({max(r['optimize_tries'] for r in runs)} tries); scenario {float(t1) - float(t0):.0f} s")
truth = None
if os.path.exists(f"{work}/truth.csv"):
    truth = [[float(x) for x in l.split(",")] for l in open(f"{work}/truth.csv")]
    tex = json.load(open(f"{work}/truth_exact.json"))
    def bneck(r): return min(truth[r[k]][r[(k + 1) % n]] for k in range(n))
    print("ground truth (each link alone, pccl bench-bandwidth, join order):")
    for i in range(n):
        print("  " + " ".join(f"{truth[i][j]:7.0f}" for j in range(n)))
    err = [(abs(mat[a][b] - truth[initial[a]][initial[b]]) / truth[initial[a]][initial[b]], initial[a] + 1, initial[b] + 1,
            mat[a][b], truth[initial[a]][initial[b]]) for a in range(n) for b in range(n) if a != b]
    err.sort(reverse=True)
    print("worst probe errors (master probe vs alone): " + ", ".join(
        f"{a}->{b} {m:.0f} vs {t:.0f} ({e * 100:.0f}%)" for e, a, b, m, t in err[:4]))
    print(f"true bottleneck of the master's ring: {bneck(chosen):.0f} Mbit/s; of the initial ring: {bneck(list(range(n))):.0f}; "
          f"true optimum {hops(tex['ring'])} bottleneck {tex['bottleneck_mbps']:.0f} Mbit/s "
          f"(master's ring == true optimum: {canon(chosen) == canon(tex['ring'])})")
if truth is not None and os.path.exists(f"{work}/alone300.txt"):
    a3 = [[0.0] * n for _ in range(n)]
    for line in open(f"{work}/alone300.txt"):
        i, j, v = line.split()
        a3[int(i)][int(j)] = float(v)
    print("300 ms probes, each link alone (join order):")
    for i in range(n):
        print("  " + " ".join(f"{a3[i][j]:7.0f}" for j in range(n)))
    e_master = [abs(mat[a][b] - truth[initial[a]][initial[b]]) / truth[initial[a]][initial[b]] for a in range(n) for b in range(n) if a != b]
    e_alone = [abs(a3[i][j] - truth[i][j]) / truth[i][j] for i in range(n) for j in range(n) if i != j]
    print(f"relative error vs the 1 s alone measurement: master's concurrent 300 ms probes median {statistics.median(e_master) * 100:.1f}% "
          f"max {max(e_master) * 100:.0f}%; 300 ms alone median {statistics.median(e_alone) * 100:.1f}% max {max(e_alone) * 100:.0f}%")
print("TCP counters after the run: " + " | ".join(l.strip() for l in open(f"{work}/tcp_counters.txt")))
for k, v in checks.items():
    print(f"check {k}: {'PASS' if v else 'FAIL'}")
ok = all(checks.values())
print("RESULT: " + ("PASS" if ok else "FAIL"))
if out_json:
    json.dump({"mib": float(mib), "reps": int(reps), "rates_mbps": [float(fast), float(med), float(slow)],
               "before_s": before, "after_s": after, "speedup": speedup,
               "matrix_join_order": [[mat[i][j] if i != j else 0 for j in order] for i in order],
               "initial_ring": [x + 1 for x in initial], "chosen_ring": [x + 1 for x in chosen],
               "exact_ring": [x + 1 for x in exact_ring], "bottleneck_mbps": solved["bottleneck_mbps"],
               "truth_join_order": truth, "runs": runs, "checks": checks, "ok": ok}, open(out_json, "w"))
sys.exit(0 if ok else 1)
PY
