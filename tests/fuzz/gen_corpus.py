#!/usr/bin/env python3
"""gen_corpus.py - writes the seed corpora of the fuzz harnesses (tests/fuzz/corpus/<harness>/):
small valid bodies of every message type (docs/protocol.md), valid p2p hellos, and
master event scripts that walk peers through the handshake, accept, sync and collectives.
Deterministic; rerun after a protocol change: python3 tests/fuzz/gen_corpus.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION = 0x5043434C, 7
FLOAT = 10  # pcclFloat (pccl.h)
C2M = dict(HELLO=1, UPDATE_TOPOLOGY=2, P2P_ESTABLISHED=3, PEERS_PENDING=4, SYNC=5, SS_DIST_DONE=6,
           COLL_INIT=7, COLL_DONE=8, OPTIMIZE=9, HEARTBEAT=10, LEAVE=14)
M2C = dict(WELCOME=101, ESTABLISH=102, TOPO_DONE=103, PEERS_PENDING=104, SS_PLAN=105, SS_DONE=106,
           COMMENCE=107, ABORT=108, COMPLETE=109, REJECT=110, KICK=111, OPTIMIZE_DONE=112, HEARTBEAT=113,
           CHALLENGE=116)
# identity of HELLO and RESUME: public key, name; the signature ends the body (docs/protocol.md "Identity")
PUBKEY, SIG = bytes(range(32)), bytes(range(64, 128))
def ident(name=b'worker-1'): return PUBKEY + s(name)


def u8(v): return struct.pack('>B', v)
def u16(v): return struct.pack('>H', v)
def u32(v): return struct.pack('>I', v)
def u64(v): return struct.pack('>Q', v)
def s(x): return u8(len(x)) + x
def world(a, b, c, d): return u32(a) + u32(b) + u32(c) + u32(d)
def ip4(a, b, c, d): return u8(4) + bytes([a, b, c, d]) + bytes(12)
def ip6(last): return u8(6) + bytes([0x20, 0x01, 0x0d, 0xb8]) + bytes(11) + bytes([last])
NO_IP = u8(0) + bytes(16)
def peer(i): return bytes([i] * 16) + (ip6(i) if i == 2 else ip4(127, 0, 0, 1)) + u16(40000 + i)
def tensor(key, count, h, dtype=FLOAT, ineq=0): return s(key) + u8(dtype) + u8(ineq) + u64(count) + u64(h)


def hello(group=0, port=40001, adv=NO_IP, name=b'worker-1'):
    return u16(1) + u32(MAGIC) + u16(VERSION) + u32(group) + u16(port) + u32(1) + adv + ident(name) + SIG
def sync(rev, n=1, h=0x1234): return u16(5) + u64(rev) + u8(0) + u32(n) + b''.join(
    tensor(b'state%d' % i, 1024, h + i) for i in range(n))
def coll_init(tag, count=1024, kind=0, flags=0, capacity=0, key=0, max_world=0, h=0):
    return (u16(7) + u64(tag) + u64(count) + u8(FLOAT) + u8(0) + u8(0) + u8(FLOAT) + u8(kind) + u8(flags) + u64(key) +
            u64(capacity) + u32(max_world) + u64(h))
def resume(i, rev, ring, port=40001): return (u16(13) + u32(MAGIC) + u16(VERSION) + u32(0) + u16(port + i) + u32(1) +
                                              NO_IP + ident() + bytes([i] * 16) + u8(1) + u64(rev) + u32(len(ring)) +
                                              b''.join(bytes([r] * 16) for r in ring) + u32(1) +
                                              tensor(b'state0', 1024, 0x1234) + u32(0) + SIG)
def coll_done(tag, seq, ok=1): return u16(8) + u64(tag) + u64(seq) + u8(ok)


bodies = {
    'c2m_hello': hello(),
    'c2m_hello_advertised': hello(adv=ip4(203, 0, 113, 5)),
    'c2m_hello_advertised6': hello(adv=ip6(9)),
    'c2m_hello_unnamed': hello(name=b''),
    'c2m_resume': resume(0, 7, (0, 1, 2)),
    'c2m_update_topology': u16(2),
    'c2m_p2p_established': u16(3) + u8(1),
    'c2m_peers_pending': u16(4),
    'c2m_sync': sync(3, 2),
    'c2m_sync_empty': sync(0, 0),
    'c2m_ss_dist_done': u16(6) + u8(1),
    'c2m_coll_init': coll_init(5),
    'c2m_coll_done': coll_done(5, 2),
    'c2m_optimize': u16(9),
    'c2m_heartbeat': u16(10),
    'c2m_leave': u16(14),
    'm2c_welcome': u16(101) + bytes(range(16)),
    'm2c_establish': u16(102) + world(3, 3, 1, 3) + u32(3) + peer(1) + peer(2) + peer(3),
    'm2c_topology_done': u16(103) + u8(1) + world(2, 2, 1, 2),
    'm2c_peers_pending': u16(104) + u8(0),
    # two sources, one tensor of 4096 bytes split 3072 + 1024 (fetch index, source, offset, length)
    'm2c_ss_plan': u16(105) + u8(0) + u64(7) + u8(2) + peer(2) + peer(3) + u32(1) + tensor(b'state', 1024, 99) +
                   u32(3) + u32(2) + u32(0) + u8(0) + u64(0) + u64(3072) + u32(0) + u8(1) + u64(3072) + u64(1024),
    'm2c_ss_done': u16(106) + u8(1),
    'm2c_commence': u16(107) + u64(5) + u64(2) + u64(0x81) + world(2, 2, 1, 2) + u32(2) + bytes([1] * 16) + bytes([2] * 16),
    'm2c_abort': u16(108) + u64(5) + u64(2) + u8(0),
    'm2c_complete': u16(109) + u64(5) + u64(2) + u8(1),
    'm2c_reject': u16(110) + u64(5) + u8(2),
    'm2c_kick': u16(111) + s(b'bad packet'),
    'm2c_optimize_done': u16(112) + u8(1),
    'm2c_heartbeat': u16(113),
    'm2c_challenge': u16(116) + bytes(range(100, 132)),
}


def write(harness, name, data):
    d = os.path.join(HERE, 'corpus', harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


for name, b in bodies.items():
    write('fuzz_wire_decode', name, b)

for kind in (1, 2, 3):
    write('fuzz_p2p_hello', 'kind%d' % kind, u32(MAGIC) + u16(VERSION) + u8(kind) + bytes(range(16)) + u32(kind * 7))


# master scripts: op byte (low 3 bits = connection 0..7), see fuzz_targets.h
def connect(c): return u8(0x00 | c)
def disconnect(c): return u8(0x20 | c)
# who: bits 0-2 the identity, bit 3 RESUME (ring: identities 0..bits 4-6), bit 7 signed over a stale nonce
def vhello(c, group=0, port=40000, pool=1, who=None):
    return u8(0x40 | c) + u8(group) + u16(port + c) + u8(pool) + u8(c if who is None else who)
def vresume(c, ring_len=2, group=0): return vhello(c, group, who=c | 8 | ((ring_len - 1) << 4))
def tick(c, t50): return u8(0x60 | c) + u8(t50)
def pkt(c, body): return u8(0x70 | c) + u16(len(body)) + body


def all_(cs, body): return b''.join(pkt(c, body) for c in cs)


# The first peer bootstraps the run alone (its empty ring reported wired); the accepted members vote the
# newcomers in (a newcomer never votes) and every one of them reports its wiring.
two = connect(0) + vhello(0) + pkt(0, u16(3) + u8(1)) + connect(1) + vhello(1)
three = two + connect(2) + vhello(2)
accept = pkt(0, u16(2)) + all_((0, 1), u16(3) + u8(1))
accept3 = pkt(0, u16(2)) + all_((0, 1, 2), u16(3) + u8(1))
write('fuzz_master_sm', 'handshake', connect(0) + pkt(0, hello()) + connect(1) + pkt(1, hello(port=40002)))
write('fuzz_master_sm', 'accept_two', two + accept)
write('fuzz_master_sm', 'sync_two', two + accept + all_((0, 1), sync(0)) + all_((0, 1), u16(6) + u8(1)))
write('fuzz_master_sm', 'sync_conflict', two + accept + pkt(0, sync(4, 1, 1)) + pkt(1, sync(4, 1, 2)) +
      all_((0, 1), u16(6) + u8(1)))
write('fuzz_master_sm', 'collective', two + accept + all_((0, 1), coll_init(0)) + all_((0, 1), coll_done(0, 1)))
write('fuzz_master_sm', 'collective_kill', three + accept3 +
      all_((0, 1, 2), coll_init(1)) + pkt(0, coll_done(1, 1)) + disconnect(2) + all_((0, 1), coll_init(1)))
write('fuzz_master_sm', 'join_late', two + accept + connect(3) + vhello(3) + all_((0, 1), u16(4)) +
      all_((0, 1), u16(2)) + all_((0, 1, 3), u16(3) + u8(1)))
write('fuzz_master_sm', 'optimize', two + accept + all_((0, 1), u16(9)) + all_((0, 1), u16(3) + u8(1)))
write('fuzz_master_sm', 'groups', connect(0) + vhello(0, 0) + connect(1) + vhello(1, 1) + connect(2) +
      vhello(2, 1) + all_((0, 1, 2), u16(2)) + all_((0, 1, 2), u16(3) + u8(1)) + all_((1, 2), sync(2)) +
      pkt(0, u16(10)))
write('fuzz_master_sm', 'timeout', two + accept + tick(0, 100) + pkt(0, u16(10)) + tick(0, 150) +
      all_((0, 1), coll_init(0)) + tick(0, 250))
write('fuzz_master_sm', 'resume', connect(0) + vresume(0) + connect(2) + vhello(2) +
      connect(1) + vresume(1) + all_((0, 1), coll_init(0)) + all_((0, 1), u16(2)))
write('fuzz_master_sm', 'resume_unsigned', connect(0) + pkt(0, resume(0, 5, (0, 1))) + connect(1) + vresume(1))
# identity 0 comes back on another connection (its stale one is replaced); a replayed signature is refused
write('fuzz_master_sm', 'identity_takeover', two + accept + connect(2) + vhello(2, who=0) + connect(3) +
      vresume(3, 2) + connect(4) + vhello(4, who=0x81) + all_((1, 2), u16(2)))
write('fuzz_master_sm', 'leave', three + accept3 +
      all_((0, 1, 2), coll_init(1)) + pkt(2, u16(14)) + all_((0, 1, 2), coll_done(1, 1)) + all_((0, 1), coll_init(2)) +
      pkt(1, u16(14)) + pkt(0, coll_done(2, 2)))
# the kinds of collectives (pccl_coll.h): a shared-sources broadcast, a ranked all-gather of variable counts, a
# barrier; then what the master rejects: two roots, duplicate rank keys, an output too small, an unknown kind
# (the first peer bootstraps the run alone: its ring wired, it is accepted and votes the others in)
acc3 = (connect(0) + vhello(0) + pkt(0, u16(3) + u8(1)) + connect(1) + vhello(1) + connect(2) + vhello(2) +
        pkt(0, u16(2)) + all_((0, 1, 2), u16(3) + u8(1)))
write('fuzz_master_sm', 'coll_kinds', acc3 +
      pkt(0, coll_init(1, 64, 1, 1 | 4, 64, h=9)) + pkt(1, coll_init(1, 64, 1, 4, 64, h=9)) +
      pkt(2, coll_init(1, 64, 1, 0, 64)) + all_((0, 1, 2), coll_done(1, 1)) +
      b''.join(pkt(c, coll_init(2, c + 1, 3, 2, 6, key=10 - c, max_world=3)) for c in (0, 1, 2)) +
      all_((0, 1, 2), coll_done(2, 2)) + all_((0, 1, 2), coll_init(3, 0, 5)))
write('fuzz_master_sm', 'coll_kinds_rejected', acc3 +
      all_((0, 1), coll_init(1, 8, 1, 1, 8)) + pkt(2, coll_init(1, 8, 1, 0, 8)) +
      all_((0, 1, 2), coll_init(2, 4, 2, 2, 12, key=5)) +
      all_((0, 1), coll_init(3, 4, 2, 0, 12)) + pkt(2, coll_init(3, 4, 2, 0, 8)) +
      all_((0, 1), coll_init(4, 4, 9)) + pkt(2, coll_init(4, 4, 4, 0, 2)))
write('fuzz_master_sm', 'bad_packet', two + accept + pkt(0, u16(101) + bytes(16)) + pkt(1, b'\x00'))


# keyed-run handshake: selector byte (bit 0 responder, bit 1 control, bit 2 encrypt, bits 3-7 feed
# size - 1), then what the other side sends (docs/security.md; byte 7 of MSG1 is the cipher preferred,
# of MSG2 the cipher chosen); a frame is tried on the same bytes
def hs_hdr(t, b6=0, b7=0): return u32(0x50435348) + u8(2) + u8(t) + u8(b6) + u8(b7)
write('fuzz_sec_handshake', 'msg1_p2p', u8(0x01 | 0x18) + hs_hdr(1, 2, 1) + bytes(range(96)))
write('fuzz_sec_handshake', 'msg1_zero_key', u8(0x07) + hs_hdr(1, 1, 2) + bytes(96) + hs_hdr(3) + bytes(32))
write('fuzz_sec_handshake', 'msg2', u8(0xf8) + hs_hdr(2, 1, 1) + bytes(range(128)))
write('fuzz_sec_handshake', 'open_hello', u8(0x03) + u32(len(hello())) + hello())
write('fuzz_sec_handshake', 'frame', u8(0x00) + u32(16) + bytes(range(32)))

print('corpus written under', os.path.join(HERE, 'corpus'))


# quantized blocks: selector byte (bits 0-1 source dtype, 2-3 quantized dtype, 4-7 op), then
# header (f64 base, f64 step, u32 off, u8 flags, 3 zero bytes; little-endian) and codes
def qblock(sel, base, step, off, flags, codes):
    return bytes([sel]) + struct.pack('<ddIB3x', base, step, off, flags) + codes


write('fuzz_quant_block', 'u8_minmax', qblock(0x00, -1.5, 3.0 / 255, 0, 0, bytes(range(0, 256, 4))))
write('fuzz_quant_block', 'i8_zps_specials', qblock(0x15, 0.0, 0.25, 128, 1, bytes([0, 1, 2, 3, 128, 255] * 8)))
write('fuzz_quant_block', 'u16_double', qblock(0x29, 1e300, 1e296, 7, 0, bytes(range(64))))
write('fuzz_quant_block', 'f16_bf16_max', qblock(0x3f, 0.0, 2.0 ** -20, 0, 0, bytes([0x00, 0x7c, 0x00, 0xfc, 0x01, 0x7e] * 6)))
write('fuzz_quant_block', 'bad_flags', qblock(0x40, 0.0, 1.0, 0, 0x82, bytes(32)))


# 4- and 2-bit blocks: selector byte (bits 0-1 source dtype, bit 2 width 2 instead of 4, bits 4-7 op), u16 count - 1,
# then the prefix (algorithm, bits, 2 zero bytes) and per group of 128: f32 base, f32 step (sign: specials), codes
def lowblock(sel, count, algo, bits, groups):
    body = bytes([algo, bits, 0, 0]) + b''.join(struct.pack('<fI', base, step) + codes for base, step, codes in groups)
    return bytes([sel]) + struct.pack('<H', count - 1) + body


write('fuzz_quant_low', 'u4_minmax_odd', lowblock(0x00, 129, 1, 4, [(-1.0, 0x3E000000, bytes(range(64))),
                                                                  (0.5, 0x3C000000, b'\x0f')]))
write('fuzz_quant_low', 'u2_zps_specials', lowblock(0x25, 6, 2, 2, [(0.75, 0x80000000, bytes([0xE4, 0x0F]))]))
write('fuzz_quant_low', 'u4_double_sum', lowblock(0x01, 3, 2, 4, [(0.0, 0x40000000, bytes([0x8F, 0x01]))]))
write('fuzz_quant_low', 'bad_padding', lowblock(0x06, 5, 1, 2, [(0.0, 0x3F800000, bytes([0x1B, 0xFF]))]))
