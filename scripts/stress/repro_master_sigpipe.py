#!/usr/bin/env python3
"""repro_master_sigpipe.py PCCL - reproduces a master killed by SIGPIPE (found by scripts/stress.sh).

Connects to a fresh `pccl master` up to 300 times; each time it sends HELLO and an out-of-state
UPDATE_TOPOLOGY (so the master answers WELCOME and KICK) and closes with a TCP reset at once. The
master's libuv write to the reset socket raises SIGPIPE, which the master does not ignore.
Exit 0 when the master survives, 1 when it died (prints its status)."""
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time

pccl = sys.argv[1] if len(sys.argv) > 1 else "build/bin/pccl"
log = tempfile.NamedTemporaryFile(prefix="pccl-sigpipe.", suffix=".log", delete=False).name
m = subprocess.Popen([pccl, "master", "--listen", "127.0.0.1:0", "--no-admin"], stdout=open(log, "wb"),
                     stderr=subprocess.STDOUT)
port = None
for _ in range(100):
    mm = re.search(rb"listening on [0-9.]+:([0-9]+)", open(log, "rb").read())
    if mm:
        port = int(mm.group(1))
        break
    time.sleep(0.05)
if port is None:
    m.kill()
    sys.exit("master did not start (see %s)" % log)
body = struct.pack(">HIHIHI", 1, 0x5043434C, 1, 0, 40000, 1)  # C2M_HELLO
packets = struct.pack(">I", len(body)) + body + struct.pack(">IH", 2, 2)  # + C2M_UPDATE_TOPOLOGY
i = 0
for i in range(1, 301):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(packets)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST
    except OSError:
        pass
    if m.poll() is not None:
        break
time.sleep(0.5)
st = m.poll()
if st is None:
    m.terminate()
    m.wait(timeout=10)
    print("master survived %d reset connections" % i)
    sys.exit(0)
print("master died after %d connections with status %d%s (log %s)" % (
    i, st, " (SIGPIPE)" if st == -13 else "", log))
sys.exit(1)
