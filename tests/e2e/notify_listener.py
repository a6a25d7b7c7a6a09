#!/usr/bin/env python3
"""notify_listener.py SOCKET LOG [SECONDS] - plays systemd's side of sd_notify(3) for test_sd_notify.sh: binds an
AF_UNIX datagram socket at SOCKET (a path, or '@name' for an abstract one) and writes one JSON line per datagram to
LOG: {"t": CLOCK_MONOTONIC seconds, "msg": text}. On a READY=1 whose STATUS names "listening on HOST:PORT" (and
"admin on HOST:PORT"), it at once connects to that control port and GETs /v1/status from that admin port, and logs
{"t": ..., "probe": "ok"} or the error: the master must answer by the time it says it is ready. Ends after SECONDS
(default 120) or when LOG + ".stop" exists."""
import json, os, re, socket, sys, time, urllib.request


def probe(status):
    m = re.search(r"listening on (\S+?):(\d+)", status)
    if not m:
        return "no control address in STATUS"
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=2).close()
    except OSError as e:
        return f"control port: {e}"
    a = re.search(r"admin on (\S+?):(\d+)", status)
    if a:
        try:
            with urllib.request.urlopen(f"http://{a.group(1)}:{a.group(2)}/v1/status", timeout=2) as r:
                if r.status != 200:
                    return f"admin port: HTTP {r.status}"
        except OSError as e:
            return f"admin port: {e}"
    return "ok"


def main():
    name, log = sys.argv[1], sys.argv[2]
    limit = time.monotonic() + (float(sys.argv[3]) if len(sys.argv) > 3 else 120)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + name[1:] if name.startswith("@") else name)
    s.settimeout(0.1)
    with open(log, "a", buffering=1) as out:
        out.write(json.dumps({"t": time.monotonic(), "bound": name}) + "\n")
        while time.monotonic() < limit and not os.path.exists(log + ".stop"):
            try:
                data = s.recv(4096).decode()
            except socket.timeout:
                continue
            t = time.monotonic()
            out.write(json.dumps({"t": t, "msg": data}) + "\n")
            lines = data.split("\n")
            if "READY=1" in lines:
                status = next((l[7:] for l in lines if l.startswith("STATUS=")), "")
                if "listening on" in status:
                    out.write(json.dumps({"t": time.monotonic(), "probe": probe(status)}) + "\n")
    s.close()
    if not name.startswith("@"):
        os.unlink(name)


if __name__ == "__main__":
    main()
