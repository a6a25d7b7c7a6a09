#!/usr/bin/env python3
"""resume_flood.py - strangers that send RESUME to a pccl master, for test_resume_strangers.sh and
test_master_restart_poison.sh. Each mode prints one JSON line. Every connect, send and read is bounded;
everything is closed at the end. Each connection reads the master's CHALLENGE and signs its HELLO or RESUME
with a key pair of its own (Ed25519, docs/protocol.md "Identity"), as any stranger can.

  resume_flood.py flood PORT N OPS      N connections (from 127.0.0.2-11) that each send a RESUME with OPS
                                        collectives and OPS ring entries into an unused group (4242), then
                                        stay silent; meanwhile a probe sends a HELLO with p2p port 0 every
                                        100 ms (the master answers from its loop: KICK, or a close) and the
                                        largest time to that answer (5 s: none) is reported, from 1 s before
                                        the flood to 6 s after it
  resume_flood.py amplify PORT PID N T  N connections (from 127.0.0.2-11) that each send a RESUME with T
                                        tensor entries, naming a peer that never comes (the rebuild waits),
                                        held for 5 s while the master's resident memory is sampled
  resume_flood.py poison PORT N REV     waits (up to 20 s) for a master on PORT, then N connections RESUME
                                        into group 0 claiming revision REV, with a ring of themselves and of a
                                        peer that never comes, and a p2p port nobody listens on; each closes when the master asks it to
                                        wire (ESTABLISH_P2P) or answers, or after 10 s
"""
import hashlib, json, os, socket, struct, sys, threading, time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

WIRE_H = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'libpccl', 'src', 'base', 'wire.h')
WIRE_VERSION = next(int(line.split()[2]) for line in open(WIRE_H) if line.startswith('#define WIRE_VERSION '))
MAGIC, HELLO, RESUME = 0x5043434C, 1, 13
ESTABLISH, KICK, RESUMED, CHALLENGE = 102, 111, 115, 116
NO_ADDR = bytes(17)  # ip family 0: none advertised
SIGN_LABEL = b'pccl peer identity v6'


def frame(body):
    return struct.pack('>I', len(body)) + body


class Identity:
    """A key pair and the uuid the master derives from it (the first 16 bytes of BLAKE2b-256 of the key)."""

    def __init__(self):
        self.key = Ed25519PrivateKey.generate()
        self.pk = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.uuid = hashlib.blake2b(self.pk, digest_size=32).digest()[:16]

    def head(self, mtype, group, port):
        """The fields HELLO and RESUME begin with, up to and with the identity (an empty name)."""
        return struct.pack('>HIHIHI', mtype, MAGIC, WIRE_VERSION, group, port, 1) + NO_ADDR + self.pk + b'\x00'

    def signed(self, nonce, body):
        digest = hashlib.blake2b(body, digest_size=32).digest()
        return frame(body + self.key.sign(SIGN_LABEL + nonce + digest))


def hello(ident, nonce, group, port):
    return ident.signed(nonce, ident.head(HELLO, group, port))


def resume(ident, nonce, group, rev, ring, tensors, ops, port=9):
    b = ident.head(RESUME, group, port) + ident.uuid
    b += struct.pack('>BQI', 1, rev, len(ring)) + b''.join(ring)
    b += struct.pack('>I', tensors) + struct.pack('>BBBQQ', 0, 5, 0, 1 << 20, 0x1234) * tensors
    b += struct.pack('>I', ops) + b''.join(struct.pack('>QQB', i, i, i % 2) for i in range(ops))
    return ident.signed(nonce, b)


def dial(port, src='127.0.0.1', timeout=2.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect(('127.0.0.1', port))
        return s
    except OSError:
        s.close()
        return None


def read_frame(s):
    """(type, payload) of the next message, or (None, b'') (closed, timeout)."""
    try:
        head = b''
        while len(head) < 6:
            d = s.recv(6 - len(head))
            if not d:
                return None, b''
            head += d
        n, t = struct.unpack('>IH', head)
        body, left = [], n - 2
        while left > 0:
            d = s.recv(min(left, 1 << 16))
            if not d:
                return None, b''
            body.append(d)
            left -= len(d)
        return t, b''.join(body)
    except OSError:
        return None, b''


def read_msg(s):
    """The type of the next message, or None (closed, timeout)."""
    return read_frame(s)[0]


def challenge(s):
    """The nonce of the master's CHALLENGE, the first message of every connection, or None."""
    t, body = read_frame(s)
    return body[:32] if t == CHALLENGE and len(body) == 32 else None


def rss_kb(pid):
    try:
        for line in open('/proc/%d/status' % pid):
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def flood(port, n, ops):
    worst, probes, stop = [0.0], [0], threading.Event()

    def probe():
        ident = Identity()
        while not stop.is_set():
            t0 = time.time()
            s = dial(port, timeout=5.0)
            if s:
                try:
                    nonce = challenge(s)  # sent from the loop on accept: the first answer
                    answered = nonce is not None
                    if answered:
                        s.sendall(hello(ident, nonce, 7, 0))  # p2p port 0
                        s.recv(1)  # the KICK, or a close: either is the loop's answer
                except socket.timeout:
                    answered = False
                except OSError:
                    answered = True
                s.close()
                dt = time.time() - t0 if answered else 5.0
                worst[0] = max(worst[0], dt)
                probes[0] += 1
            time.sleep(0.1)

    th = threading.Thread(target=probe)
    th.start()
    time.sleep(1)
    socks, sent = [], 0
    ring = [os.urandom(16) for _ in range(ops)]
    for i in range(n):
        s = dial(port, '127.0.0.%d' % (2 + i % 10))
        if not s:
            continue
        try:
            nonce = challenge(s)
            if nonce is None:
                raise OSError('no challenge')
            msg = resume(Identity(), nonce, 4242, 1 << 60, ring, 0, ops)
            s.sendall(msg)
            sent += len(msg)
            socks.append(s)
        except OSError:
            s.close()
    time.sleep(6)  # a rebuild collecting them would end 3 s after the first
    stop.set()
    th.join()
    for s in socks:
        s.close()
    return {'connected': len(socks), 'sent_bytes': sent, 'probes': probes[0], 'max_probe_ms': round(worst[0] * 1000)}


def amplify(port, pid, n, tensors):
    base = rss_kb(pid)
    peak, stop = [base], threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kb(pid))
            time.sleep(0.05)

    th = threading.Thread(target=watch)
    th.start()
    socks, sent, missing = [], 0, os.urandom(16)
    for i in range(n):
        s = dial(port, '127.0.0.%d' % (2 + i % 10))
        if not s:
            continue
        ident = Identity()
        try:
            s.settimeout(10)
            nonce = challenge(s)
            if nonce is None:
                raise OSError('no challenge')
            msg = resume(ident, nonce, 2000 + i, 5, [ident.uuid, missing], tensors, 0)
            s.sendall(msg)
            sent += len(msg)
            socks.append(s)
        except OSError:
            s.close()
    time.sleep(5)
    stop.set()
    th.join()
    for s in socks:
        s.close()
    return {'connected': len(socks), 'sent_bytes': sent, 'base_rss_kb': base, 'max_rss_kb': peak[0]}


def poison(port, n, rev):
    end = time.time() + 20
    first = None
    while time.time() < end and not first:
        first = dial(port, timeout=0.5)
        if not first:
            time.sleep(0.05)
    if not first:
        return {'connected': 0}
    socks = [first] + [dial(port) for _ in range(n - 1)]
    socks = [s for s in socks if s]
    idents = [Identity() for _ in socks]
    uuids = [i.uuid for i in idents]
    for s, ident in zip(socks, idents):
        s.settimeout(10)
        nonce = challenge(s)
        if nonce is not None:
            s.sendall(resume(ident, nonce, 0, rev, uuids + [os.urandom(16)], 1, 0))
    got = []
    for s in socks:
        s.settimeout(10)
        t = read_msg(s)
        while t not in (None, ESTABLISH, RESUMED, KICK):
            t = read_msg(s)
        got.append({ESTABLISH: 'ESTABLISH_P2P', RESUMED: 'RESUMED', KICK: 'KICK'}.get(t, 'nothing'))
        s.close()
    return {'connected': len(socks), 'got': got}


mode = sys.argv[1]
if mode == 'flood':
    out = flood(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
elif mode == 'amplify':
    out = amplify(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
else:
    out = poison(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
print(json.dumps(out))
