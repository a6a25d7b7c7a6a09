#!/usr/bin/env bash
# A keyed run refuses everyone without its key, on every port, and keeps running:
# - the master: `pccl join` without a key (it waits for a CHALLENGE the keyed master never sends, and is
#   told at the handshake deadline that the run needs a key) or with another key,
#   a raw HELLO (answered with a KICK), garbage, a client that never speaks (closed at the
#   5 s handshake deadline), and a recorded handshake of a real peer replayed (refused after
#   the master's fresh answer);
# - a peer's p2p port: an open client, a client with another key, and a key holder claiming a
#   uuid that is not a member get nothing; a member's uuid with the key is served (the control);
# - key files that group or others may read are refused by `pccl master` and `pccl join`;
# - /metrics counts the master's refusals (pccl_connections_refused_total{reason="handshake"}).
# Afterwards the run's own peers finish with equal hashes.
. "$(dirname "$0")/lib.sh"
PROBE="$BIN/key_probe"
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
head -c 48 /dev/urandom | base64 > "$WORK/other.key"
chmod 600 "$WORK/run.key" "$WORK/other.key"

# Key files open to group or others.
cp "$WORK/run.key" "$WORK/open.key"
chmod 644 "$WORK/open.key"
"$PCCL" master --listen 127.0.0.1:0 --no-admin --key-file "$WORK/open.key" > "$WORK/m644.out" 2>&1 &
m644=$!; PIDS+=("$m644")
wait_pid "$m644" 10 && fail "pccl master accepted a 0644 key file"
grep -q "accessible by group or others (mode 0644)" "$WORK/m644.out" || fail "master: no clear message for 0644"
"$PCCL" join --master 127.0.0.1:1 --key-file "$WORK/open.key" > /dev/null 2> "$WORK/j644.err" &
j644=$!; PIDS+=("$j644")
wait_pid "$j644" 10 && fail "pccl join accepted a 0644 key file"
grep -q "accessible by group or others" "$WORK/j644.err" || fail "join: no clear message for 0644"

start_master --key-file "$WORK/run.key"
ADMIN=$(grep -o 'admin on [0-9.]*:[0-9]*' "$WORK/master.log" | sed 's/.*://')
args=(--key-file "$WORK/run.key" --workload synthetic --steps 450 --size 200000 --step-delay 40 --min-world 2)
start_peer k1 "${args[@]}"; K1=$LAST_PID
start_peer k2 "${args[@]}"; K2=$LAST_PID
wait_events "$WORK/k1.log" step 3 30

# pccl join without the key, and with another one.
start_peer nokey --workload synthetic --steps 5; NK=$LAST_PID
wait_pid "$NK" 20 && fail "a peer without the key joined"
grep -q "this run requires a run key" "$WORK/nokey.err" || fail "no-key peer was not told the run needs a key"
start_peer wrong --key-file "$WORK/other.key" --workload synthetic --steps 5; WK=$LAST_PID
wait_pid "$WK" 20 && fail "a peer with another key joined"
grep -q "does not hold the run key" "$WORK/wrong.err" || fail "wrong-key peer: no clear reason"

# Raw clients of the master, and a replay of a real peer's recorded handshake.
timeout 60 python3 - "$PORT" "$PCCL" "$WORK" "$WIRE_VERSION" <<'PY' || fail "raw clients of the master (see above)"
import socket, struct, subprocess, sys, threading, time
port, pccl, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]

def conn():
    s = socket.create_connection(('127.0.0.1', port), timeout=10)
    return s

def read_to_eof(s, limit=10.0):
    s.settimeout(limit)
    data = b''
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return data, True
            data += b
    except socket.timeout:
        return data, False

def check(cond, what):
    if not cond:
        print('FAIL:', what); sys.exit(1)

# An open client's HELLO: a KICK that names the key, then the end.
hello = struct.pack('>HIHIHI', 1, 0x5043434C, int(sys.argv[4]), 0, 40000, 1) + bytes(17)
s = conn(); s.sendall(struct.pack('>I', len(hello)) + hello)
data, eof = read_to_eof(s)
check(eof and len(data) > 6 and struct.unpack('>H', data[4:6])[0] == 111 and b'run key' in data,
      'plain HELLO: expected a KICK naming the run key, got %r' % data[:80])
# Garbage: closed, nothing said.
s = conn(); s.sendall(b'GET / HTTP/1.0\r\n\r\n')
data, eof = read_to_eof(s)
check(eof and data == b'', 'garbage: expected a silent close, got %r' % data[:40])
# A client that never speaks: closed at the handshake deadline (5 s; the tick runs every 250 ms).
t0 = time.time(); s = conn()
data, eof = read_to_eof(s, 12.0)
took = time.time() - t0
check(eof and data == b'' and 4.5 <= took <= 9.0, 'silent client: closed after %.1f s (eof=%s)' % (took, eof))

# Record a real peer's control connection through a relay, then replay what it sent.
ls = socket.socket(); ls.bind(('127.0.0.1', 0)); ls.listen(1)
sent, answered = bytearray(), bytearray()
def relay():
    c, _ = ls.accept(); m = conn()
    def pump(a, b, rec):
        try:
            while True:
                x = a.recv(65536)
                if not x: break
                rec += x; b.sendall(x)
        except OSError: pass
        for z in (a, b):
            try: z.shutdown(socket.SHUT_RDWR)
            except OSError: pass
    t = threading.Thread(target=pump, args=(m, c, answered), daemon=True); t.start()
    pump(c, m, sent)
threading.Thread(target=relay, daemon=True).start()
peer = subprocess.Popen([pccl, 'join', '--master', '127.0.0.1:%d' % ls.getsockname()[1], '--key-file',
                         work + '/run.key', '--workload', 'synthetic', '--steps', '5', '--min-world', '9'],
                        stdout=subprocess.DEVNULL, stderr=open(work + '/recorded.err', 'w'))
for _ in range(100):
    if len(sent) >= 104 + 40 and len(answered) >= 136 + 20: break
    time.sleep(0.05)
peer.kill(); peer.wait()
check(len(sent) >= 144 and sent[:4] == b'PCSH' and len(answered) >= 136 + 20,
      'recording: the real peer did not complete its handshake through the relay')
s = conn(); s.sendall(bytes(sent[:104]))
s.settimeout(5); msg2 = b''
while len(msg2) < 136:
    x = s.recv(136 - len(msg2)); check(x, 'replay: closed before MSG2'); msg2 += x
check(msg2 != bytes(answered[:136]), 'replay: the master answered with the recorded MSG2')
s.sendall(bytes(sent[104:]))
data, eof = read_to_eof(s)
check(eof and data == b'', 'replay: the master went on after a replayed MSG3 (%d bytes)' % len(data))
# The whole recording in one write: refused at once (not only at the handshake deadline), no WELCOME.
t0 = time.time(); s = conn(); s.sendall(bytes(sent))
data, eof = read_to_eof(s)
check(eof and len(data) <= 136 and time.time() - t0 < 2.5,
      'replay in one write: %d bytes, eof=%s after %.1f s' % (len(data), eof, time.time() - t0))
print('raw master clients refused; replay refused')
PY
grep -q "refused conn=.*: it has no run key" "$WORK/master.log" || fail "master log: no-key refusal missing"
grep -q "refused conn=.*the other side does not hold the run key" "$WORK/master.log" || fail "master log: replay"
# /metrics counts them as refusals (not kicks)
metrics=$(curl -s --max-time 5 "http://127.0.0.1:$ADMIN/metrics") || fail "admin metrics unreachable"
refused=$(sed -n 's/^pccl_connections_refused_total{reason="handshake"} //p' <<< "$metrics")
[ "${refused:-0}" -ge 3 ] || fail "metrics: $refused handshake refusals, want 3 or more"

# A peer's p2p port.
status=$(curl -s --max-time 5 "http://127.0.0.1:$ADMIN/v1/status") || fail "admin status unreachable"
read -r P1PORT U2 <<< "$(python3 -c '
import json, sys
p = [x for x in json.loads(sys.argv[1])["peers"] if x["phase"] == "accepted"]
print(p[0]["p2p_port"], p[1]["uuid"])' "$status")"
[ -n "$U2" ] || fail "no accepted peers in /v1/status"
"$PROBE" 127.0.0.1 "$P1PORT" "$WORK/run.key" "$U2" || fail "p2p: a member with the key was not served"
"$PROBE" 127.0.0.1 "$P1PORT" "$WORK/run.key" 0123456789abcdef0123456789abcdef && fail "p2p: served a non-member"
"$PROBE" 127.0.0.1 "$P1PORT" "$WORK/other.key" "$U2" && fail "p2p: served another key"
"$PROBE" 127.0.0.1 "$P1PORT" - "$U2" && fail "p2p: served an open client"
# (a non-member is refused once it has not become one within the handshake's 5 s)
for _ in $(seq 1 200); do grep -q "not a member of this peer's group" "$WORK/k1.err" "$WORK/k2.err" && break; sleep 0.05; done
grep -q "not a member of this peer's group" "$WORK/k1.err" "$WORK/k2.err" || fail "p2p: no membership refusal logged"

for p in "$K1" "$K2"; do wait_pid "$p" 120 || fail "a keyed peer exited with $?"; done
h=$(json_field "$WORK/k1.log" done hash)
[ -n "$h" ] && [ "$(json_field "$WORK/k2.log" done hash)" = "$h" ] || fail "the keyed peers' hashes differ"
echo "ok: keyed run refused outsiders on every port and finished with hash $h"
