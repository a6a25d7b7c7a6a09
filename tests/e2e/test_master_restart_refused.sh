#!/usr/bin/env bash
# A peer whose restarted master refuses it (here: a master of another protocol
# version, played by a small server that answers the re-registration with the
# KICK a real master sends on a version mismatch) stops at once with a clear
# error naming the reason; it does not wait out the reconnect window.
. "$(dirname "$0")/lib.sh"
start_master
start_restart_peers 2 100000
wait_rev peer0 10 60
kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
python3 - "$PORT" > "$WORK/other_master.log" 2>&1 <<'PY' &
import socket, struct, sys, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen(8); srv.settimeout(20)
reason = b"protocol mismatch: master speaks version 10, peer sent version 2 (magic 0x5043434c)"
body = struct.pack(">HB", 111, len(reason)) + reason
served, end = 0, time.time() + 20
while served < 2 and time.time() < end:
    c, _ = srv.accept()
    c.settimeout(5)
    c.sendall(struct.pack(">IH", 34, 116) + bytes(32))  # CHALLENGE, as every master opens a connection
    hdr = c.recv(4)  # the RESUME frame's length, then its body
    if len(hdr) == 4:
        n, got = struct.unpack(">I", hdr)[0], b""
        while len(got) < n:
            chunk = c.recv(n - len(got))
            if not chunk: break
            got += chunk
        print("registration type", struct.unpack(">H", got[:2])[0], flush=True)
        c.sendall(struct.pack(">I", len(body)) + body)
        served += 1
    time.sleep(0.2)
    c.close()
PY
OTHER=$!; PIDS+=("$OTHER")
for i in 0 1; do
    rc=0; wait_pid "${pids[$i]}" 20 || rc=$?
    [ "$rc" -ne 0 ] || fail "peer $i exited 0 after the master refused it"
    grep -q "the restarted master refused this peer: protocol mismatch" "$WORK/peer$i.err" ||
        fail "peer $i did not name the refusal: $(tail -3 "$WORK/peer$i.err")"
done
grep -q "registration type 13" "$WORK/other_master.log" || fail "the peers did not re-register with RESUME"
echo "ok: a refusing restarted master stops its peers at once with the reason"
