#!/usr/bin/env python3
"""flood.py - a stranger that floods a pccl port, for test_flood.sh. It watches the target
process while it floods (descriptors, resident memory, CPU time, sampled every 50 ms) and
prints one JSON line: what it sent, what it got back and the largest values it saw.

  flood.py ring PORT PID N      N connections to a peer's p2p port, each a RING hello with a
                                random uuid (from 127.0.0.2-5), at most 900 open at once
  flood.py bench PORT PID N     N BENCH hellos asking the peer to stream for 60 s; reads 3 s
  flood.py ss PORT PID N        N SHARED_STATE hellos asking for the tensor "state"; reads 6 s
  flood.py hold PORT PID N      N connections to the master that send 3 bytes and wait 3 s
                                (from 127.0.0.2-41)
  flood.py oversize PORT PID N  N connections to the master, each announcing a RESUME of
                                8 MiB - 100 bytes and sending it (from 127.0.0.2-21), for 6 s
  flood.py listen PID           prints the TCP ports PID listens on, one a line
Every connect, send and read is bounded; everything is closed at the end."""
import json, os, socket, struct, sys, threading, time

if sys.argv[1] == 'listen':
    inodes = set()
    for fd in os.listdir('/proc/%s/fd' % sys.argv[2]):
        try:
            link = os.readlink('/proc/%s/fd/%s' % (sys.argv[2], fd))
        except OSError:
            continue
        if link.startswith('socket:['):
            inodes.add(link[8:-1])
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):  # a dual-stack listener is in tcp6
        for line in open(table).readlines()[1:]:
            f = line.split()
            if f[3] == '0A' and f[9] in inodes:
                print(int(f[1].split(':')[1], 16))
    sys.exit(0)

MODE, PORT, PID, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
WIRE_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'libpccl', 'src', 'base', 'wire.h')
WIRE_VERSION = next(int(line.split()[2]) for line in open(WIRE_H) if line.startswith('#define WIRE_VERSION '))
WIRE_MAGIC, RING, SHARED_STATE, BENCH, RESUME = 0x5043434C, 1, 2, 3, 13
peak = {'fds': 0, 'rss_kb': 0}
stop = threading.Event()


def sample():
    try:
        peak['fds'] = max(peak['fds'], len(os.listdir('/proc/%d/fd' % PID)))
        for line in open('/proc/%d/status' % PID):
            if line.startswith('VmRSS:'):
                peak['rss_kb'] = max(peak['rss_kb'], int(line.split()[1]))
    except OSError:
        pass


def cpu_s():
    f = open('/proc/%d/stat' % PID).read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')


def watcher():
    while not stop.is_set():
        sample()
        time.sleep(0.05)


def dial(src, timeout=2.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect(('127.0.0.1', PORT))
        return s
    except OSError:
        s.close()
        return None


def hello(kind):
    return struct.pack('>IHB', WIRE_MAGIC, WIRE_VERSION, kind) + os.urandom(16) + struct.pack('>I', 0)


def ring():
    open_, made = [], 0
    for i in range(N):
        s = dial('127.0.0.%d' % (2 + i % 4))
        if not s:
            continue
        made += 1
        try:
            s.sendall(hello(RING))
        except OSError:
            pass
        open_.append(s)
        if len(open_) > 900:
            open_.pop(0).close()
    time.sleep(1.0)  # the peer's deadline and evictions are what close them, not us
    for s in open_:
        s.close()
    return {'connected': made}


def ask(request, seconds):
    """N connections that each send request, then read what comes back for seconds."""
    socks, got = [], 0
    for i in range(N):
        s = dial('127.0.0.%d' % (2 + i % 4))
        if s:
            try:
                s.sendall(request)
                socks.append(s)
            except OSError:
                s.close()
    end = time.time() + seconds
    for s in socks:
        s.setblocking(False)
    while time.time() < end and socks:
        for s in list(socks):
            try:
                d = s.recv(1 << 20)
                if not d:
                    socks.remove(s)
                    s.close()
                got += len(d)
            except BlockingIOError:
                pass
            except OSError:
                socks.remove(s)
                s.close()
        time.sleep(0.01)
    for s in socks:
        s.close()
    return {'received_bytes': got}


def bench():
    return ask(hello(BENCH) + struct.pack('>BI', 2, 60000), 3)  # the server sends for 60 s


def ss():
    return ask(hello(SHARED_STATE) + struct.pack('>IB', 1, 5) + b'state', 6)


def hold():
    socks = []
    for i in range(N):
        s = dial('127.0.0.%d' % (2 + i % 40))
        if s:
            try:
                s.sendall(b'\x00\x00\x00')
                socks.append(s)
            except OSError:
                s.close()
    time.sleep(3)
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b''
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    return {'connected': len(socks), 'closed_by_target': closed}


def oversize():
    body = (8 << 20) - 100
    head = struct.pack('>IH', body, RESUME)
    chunk = bytes(1 << 16)
    socks, sent = [], 0
    for i in range(N):
        s = dial('127.0.0.%d' % (2 + i % 20))
        if s:
            s.setblocking(False)
            socks.append([s, head + bytes(0), 0])
    end = time.time() + 6
    while time.time() < end and socks:
        progressed = False
        for e in list(socks):
            s, pend, done = e
            try:
                if pend:
                    n = s.send(pend)
                    e[1] = pend[n:]
                else:
                    n = s.send(chunk[:min(len(chunk), body - done)])
                    e[2] += n
                sent += n
                progressed = progressed or n > 0
                if e[2] >= body:
                    socks.remove(e)
                    s.close()
            except BlockingIOError:
                pass
            except OSError:
                socks.remove(e)
                s.close()
        if not progressed:
            time.sleep(0.01)
    for e in socks:
        e[0].close()
    return {'sent_bytes': sent}


sample()
base = dict(peak)
cpu0, t0 = cpu_s(), time.time()
threading.Thread(target=watcher, daemon=True).start()
out = {'ring': ring, 'bench': bench, 'ss': ss, 'hold': hold, 'oversize': oversize}[MODE]()
stop.set()
sample()
out.update({'mode': MODE, 'base_fds': base['fds'], 'max_fds': peak['fds'], 'base_rss_kb': base['rss_kb'],
            'max_rss_kb': peak['rss_kb'], 'cpu_s': round(cpu_s() - cpu0, 2), 'wall_s': round(time.time() - t0, 2)})
print(json.dumps(out))
