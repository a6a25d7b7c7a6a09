#!/usr/bin/env bash
# bench/profile.sh - where a pccl all-reduce spends its time (called by run.sh; usable alone).
#
# usage: bench/profile.sh BIN_DIR PEERS BYTES REPS      (root; needs perf, strace)
#
# Runs `pccl_allreduce ar PEERS BYTES REPS 2` three times and prints markdown:
#  1. time split per op from uprobes (perf probe) on pcclAllReduce entry/return,
#     ring_allreduce entry/return and pccl_reduce_into entry/return:
#     launch -> ring start (thread start, backup copy, INIT/COMMENCE round trip
#     through the master, p2p connection lookup), ring (of which reduce kernel),
#     ring end -> return (DONE/COMPLETE round trip, thread join);
#  2. perf top symbols (all processes, sampled);
#  3. syscalls per op per peer (strace -f -c).
# Probes and temporary files are removed on exit.
set -uo pipefail
BIN=$1 PEERS=$2 BYTES=$3 REPS=$4
EXE=$BIN/pccl_allreduce
W=$(mktemp -d /tmp/pcclb-prof-XXXXXX)
cleanup() { perf probe -q -d 'probe_pccl_allreduce:*' 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
WARM=2
OPS=$((REPS + WARM + 2)) # + the two barriers do not count; all-reduces per peer = REPS + WARM

echo "#### $PEERS peers, $BYTES B: profile"
echo ""
if perf probe -q -x "$EXE" -a pcclAllReduce -a 'pcclAllReduce%return' -a ring_allreduce \
    -a 'ring_allreduce%return' -a pccl_reduce_into -a 'pccl_reduce_into%return' 2>"$W/probe.err"; then
    res=$(perf record -q -e 'probe_pccl_allreduce:*' -o "$W/probe.data" -- "$EXE" ar "$PEERS" "$BYTES" "$REPS" "$WARM" 2>/dev/null | grep RESULT)
    perf script -i "$W/probe.data" -F pid,tid,time,event 2>/dev/null >"$W/probe.txt"
    python3 - "$W/probe.txt" <<'EOF'
import re, statistics, sys
ev = []
for l in open(sys.argv[1]):
    m = re.search(r'(\d+)/(\d+)\s+([\d.]+):\s+probe_pccl_allreduce:(\w+)', l)
    if m:
        ev.append((float(m.group(3)), int(m.group(1)), int(m.group(2)), m.group(4)))
ev.sort()
cur, red0, res = {}, {}, []
for t, pid, tid, n in ev:
    o = cur.get(pid)
    if n == 'pcclAllReduce':
        cur[pid] = {'t0': t, 'red': 0.0}
    elif o is None:
        continue
    elif n == 'ring_allreduce':
        o['rs'] = t
    elif n == 'ring_allreduce__return':
        o['re'] = t
    elif n == 'pccl_reduce_into':
        red0[tid] = t
    elif n == 'pccl_reduce_into__return' and tid in red0:
        o['red'] += t - red0.pop(tid)
    elif n == 'pcclAllReduce__return' and 'rs' in o and 're' in o:
        res.append((t - o['t0'], o['rs'] - o['t0'], o['re'] - o['rs'], o['red'], t - o['re']))
        del cur[pid]
if not res:
    print("(no complete ops traced)")
    sys.exit(0)
med = lambda i: statistics.median(r[i] for r in res) * 1e3
tot = med(0)
print(f"Time split (uprobes, median over {len(res)} op x peer; the probes add a few us per event):")
print("")
print("| part | ms | share |")
print("|---|---|---|")
for name, i in (("launch -> ring start (thread, backup copy, INIT/COMMENCE via master, p2p lookup)", 1),
                ("ring data movement (poll/send/recv + reduce)", 2),
                ("  of which reduce kernel (pccl_reduce_into)", 3),
                ("ring end -> return (DONE/COMPLETE via master, join)", 4)):
    print(f"| {name} | {med(i):.3f} | {med(i) / tot * 100:.0f}% |")
print(f"| total pcclAllReduce | {tot:.3f} | |")
EOF
    echo ""
    echo "(traced run: $res)"
    perf probe -q -d 'probe_pccl_allreduce:*' 2>/dev/null
else
    echo "(perf probe unavailable: $(head -1 "$W/probe.err"))"
fi
echo ""
echo "perf top symbols (all processes, 1999 Hz):"
echo ""
echo '```'
perf record -q -F 1999 -o "$W/perf.data" -- "$EXE" ar "$PEERS" "$BYTES" "$REPS" "$WARM" >/dev/null 2>&1
# awk reads to the end, so perf report never meets a closed pipe (pipefail).
perf report -i "$W/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null | awk '/^ +[0-9]/ && n++ < 12' |
    sed -E 's/ +- +- *$//; s/ +$//'
echo '```'
echo ""
if command -v strace >/dev/null; then
    strace -f -c -o "$W/strace.txt" "$EXE" ar "$PEERS" "$BYTES" "$REPS" "$WARM" >/dev/null 2>&1
    echo "syscalls per all-reduce per peer (strace -f -c, $((REPS + WARM)) all-reduces + 2 barriers per peer; includes the master):"
    echo ""
    awk -v d=$((PEERS * (REPS + WARM))) '$NF ~ /^(recvfrom|sendto|poll|futex|clone3|mmap|munmap|epoll_wait|read|write)$/ {
        c = ($5 ~ /^[0-9]+$/ && NF == 6) ? $4 : $4; printf "%s %.1f, ", $NF, c / d }' "$W/strace.txt" | sed 's/, $/\n/'
fi
