#!/usr/bin/env bash
# examples/async_diloco.c: two peers start, a third and a fourth join mid-run.
# Checks bit parity (every peer logs the same shared-state hash at the same
# revision), that all reach the final revision, that newcomers received the
# state while old peers never did, and that the regression loss went down.
. "$(dirname "$0")/lib.sh"
EX="$BIN/example_async_diloco"
[ -x "$EX" ] || EX="$BIN/../bin/example_async_diloco"
STEPS=80
start_master
run() { "$EX" 127.0.0.1 "$PORT" $STEPS "$2" 25 > "$WORK/$1.log" 2> "$WORK/$1.err" & LAST_PID=$!; PIDS+=($!); }
run p1 1; P1=$LAST_PID
run p2 2; P2=$LAST_PID
wait_events "$WORK/p1.log" step 15 30
run p3 3; P3=$LAST_PID
wait_events "$WORK/p3.log" step 1 30
run p4 4; P4=$LAST_PID
for p in $P1 $P2 $P3 $P4; do wait_pid "$p" 60 || { cat "$WORK"/*.err >&2; fail "a peer exited with $?"; }; done
python3 - "$WORK" $STEPS <<'PY' || fail "parity check failed"
import json, sys
work, steps = sys.argv[1], int(sys.argv[2])
logs = {}
for n in ('p1', 'p2', 'p3', 'p4'):
    logs[n] = [json.loads(l) for l in open(f'{work}/{n}.log') if l.startswith('{')]
by_rev = {}
for n, evs in logs.items():
    steps_ = [e for e in evs if e['event'] == 'step']
    assert steps_[-1]['revision'] == steps, (n, steps_[-1])
    for e in steps_:
        by_rev.setdefault(e['revision'], {})[n] = e['hash']
bad = {r: h for r, h in by_rev.items() if len(set(h.values())) != 1}
assert not bad, f'hashes differ at revisions {sorted(bad)[:5]}: {bad[sorted(bad)[0]]}'
for n in ('p3', 'p4'):
    first = next(e for e in logs[n] if e['event'] == 'step')
    assert first['revision'] > 5, (n, 'did not join mid-run', first)
    assert first['ss_rx_bytes'] > 0, (n, 'received no state', first)
for n in ('p1', 'p2'):
    assert sum(e.get('ss_rx_bytes', 0) for e in logs[n]) == 0, (n, 'an old peer received state')
s1 = [e for e in logs['p1'] if e['event'] == 'step']
assert s1[-1]['loss'] < 0.1 * s1[0]['loss'], ('loss did not go down', s1[0]['loss'], s1[-1]['loss'])
print(f"parity at {len(by_rev)} revisions; p3 joined at {next(e for e in logs['p3'] if e['event']=='step')['revision']}, "
      f"p4 at {next(e for e in logs['p4'] if e['event']=='step')['revision']}; loss {s1[0]['loss']:.4g} -> {s1[-1]['loss']:.4g}")
PY
echo "ok: async DiLoCo with two newcomers mid-run"
