/*
 * wire.h - the control protocol between peers and the master, and the p2p
 * handshake (internal). Spec: docs/protocol.md. The messages and their fields are listed once, in
 * wire_msgs.def; the codec (wire.c) works from the tables made of that list (wire_spec.h).
 *
 * Framing: u32 body length (big-endian), then the body: u16 message type, then
 * the payload. Bodies are at most WIRE_MAX_BODY bytes. The first message on a
 * control connection is the master's M2C_CHALLENGE; the peer answers C2M_HELLO (or C2M_RESUME) carrying
 * magic, protocol version and its identity's proof over the challenge.
 * Decoding is strict: every length is checked against the bytes present, and
 * trailing bytes are an error. Decoded arrays are heap-allocated; release
 * them with wire_msg_free.
 */
#ifndef PCCL_WIRE_H
#define PCCL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ccoip_inet.h"

#define WIRE_MAGIC 0x5043434Cu /* "PCCL" */
#define WIRE_VERSION 12
#define WIRE_MAX_BODY (8u << 20)
#define WIRE_MAX_KEY 255
#define WIRE_MAX_TENSORS 65536
#define WIRE_MAX_PEERS 4096
#define WIRE_MAX_OPS 4096 /* in-flight collectives a RESUME may report */
/* Sources of one shared-state plan (a holder set is a u32 bit mask), and its ranges. */
#define WIRE_MAX_SS_SOURCES 32
#define WIRE_MAX_SS_RANGES (1u << 20)

/* The message types, from wire_msgs.def: C2M_ peer -> master, M2C_ master -> peer. */
#define WIRE_ELEM(elem, ctype, fields)
#define WIRE_MSG(dir, symbol, type, name, fields) WIRE_TYPE_##dir(symbol, type)
typedef enum wire_type {
#define WIRE_TYPE_C2M(symbol, type) symbol = type,
#define WIRE_TYPE_M2C(symbol, type)
#include "base/wire_msgs.def"
    C2M_MAX_, /* one past the last peer -> master type */
#undef WIRE_TYPE_C2M
#undef WIRE_TYPE_M2C
#define WIRE_TYPE_C2M(symbol, type)
#define WIRE_TYPE_M2C(symbol, type) symbol = type,
#include "base/wire_msgs.def"
    M2C_MAX_ /* one past the last master -> peer type */
#undef WIRE_TYPE_C2M
#undef WIRE_TYPE_M2C
} wire_type_t;
#undef WIRE_ELEM
#undef WIRE_MSG

/* SS plan status. */
enum { SS_OK = 0, SS_REVISION_REFUSED = 1, SS_LAYOUT_MISMATCH = 2, SS_NO_STATE = 3, SS_CONFLICT = 4, SS_ABORTED = 5 };
/* Collective reject reasons. */
enum { REJECT_PARAM_MISMATCH = 1, REJECT_TOO_FEW_PEERS = 2, REJECT_TAG_IN_USE = 3, REJECT_CONFLICT = 4 };
/* p2p connection kinds (first bytes on a p2p connection). */
enum { P2P_KIND_RING = 1, P2P_KIND_SHARED_STATE = 2, P2P_KIND_BENCH = 3 };

typedef struct wire_world {
    uint32_t global_world_size;
    uint32_t group_world_size;
    uint32_t num_groups;
    uint32_t largest_group;
} wire_world_t;

/* On the wire an IP is a family byte (4 or 6; 0 = none, where an address is optional) and 16 bytes (an IPv4
 * address in the first 4, the rest zero). */
#define WIRE_IP_LEN 17

typedef struct wire_peer {
    uint8_t uuid[16];
    ccoip_inet_address_t ip; /* where the peer's neighbours dial it */
    uint16_t port;
    /* where the master saw its control connection come from (has_obs 0: unknown); the address a punch dials */
    uint8_t has_obs;
    ccoip_inet_address_t obs_ip;
    uint16_t obs_port;
    uint8_t reach; /* WIRE_REACH_*: whether the master could dial ip:port */
} wire_peer_t;

/* wire_peer_t.reach */
enum { WIRE_REACH_UNKNOWN = 0, WIRE_REACH_YES = 1, WIRE_REACH_NO = 2 };
/* RENDEZVOUS modes and roles (docs/nat.md) */
enum { WIRE_RDV_REFUSED = 0, WIRE_RDV_PUNCH = 1, WIRE_RDV_RELAY = 2 };
enum { WIRE_RDV_DIALER = 0, WIRE_RDV_TARGET = 1 };
/* How a p2p connection was made (EDGES) */
enum { WIRE_EDGE_DIRECT = 0, WIRE_EDGE_PUNCHED = 1, WIRE_EDGE_RELAYED = 2 };

typedef struct wire_edge {
    uint8_t uuid[16];
    uint8_t kind; /* WIRE_EDGE_* */
} wire_edge_t;

/* The address to dial a peer at. */
static inline ccoip_socket_address_t wire_peer_addr(const wire_peer_t *p) {
    ccoip_socket_address_t a = {.inet = p->ip, .port = p->port};
    return a;
}

typedef struct wire_tensor {
    char key[WIRE_MAX_KEY + 1];
    uint8_t dtype;
    uint8_t allow_inequality;
    uint64_t count;
    uint64_t hash;
} wire_tensor_t;

/* Bytes [offset, offset + length) of fetch entry `tensor`, served by plan source `source`. */
typedef struct wire_ss_range {
    uint32_t tensor;
    uint8_t source;
    uint64_t offset, length;
} wire_ss_range_t;

typedef struct wire_bw {
    uint8_t uuid[16];
    double mbps;   /* measured bandwidth to that peer, Mbit/s; <= 0 = measurement failed */
    double rtt_us; /* the least round trip of the probe's pings to that peer, microseconds; <= 0 = not measured */
} wire_bw_t;

/* A collective of the lost master that a RESUME reports (its outcome was never announced to this peer). */
typedef struct wire_op_outcome {
    uint64_t tag, op_seq; /* op_seq as the lost master numbered it */
    uint8_t finished;     /* 1: this peer's ring finished and it awaits the verdict; 0: it did not finish */
} wire_op_outcome_t;

/* The algorithm of a collective (docs/algorithms.md): COLL_INIT carries a member's forced choice (AUTO: the
 * master's), COLL_COMMENCE the master's decision (RING, RHD or RD, never AUTO). RD (recursive doubling) exists for the
 * all-reduce alone; forced for another kind it means RHD. */
#define WIRE_ALGO_AUTO 0
#define WIRE_ALGO_RING 1
#define WIRE_ALGO_RHD 2
#define WIRE_ALGO_RD 3
#define WIRE_ALGO_MAX WIRE_ALGO_RD

/* A member of a commenced collective, per ring position. */
typedef struct wire_coll_member {
    uint32_t rank;  /* its rank in the operation (pccl_coll.h) */
    uint64_t count; /* its element count (all-gather-v), else the common count */
    uint8_t holds;  /* broadcast: 1 for the root and the members whose buffer equals the root's */
} wire_coll_member_t;

/* A peer's identity in HELLO and RESUME: its Ed25519 public key, its name, and its signature over the
 * master's challenge and the message (identity.h). The signature is the body's last 64 bytes; digest is
 * BLAKE2b-256 of the body before it (type included), filled by wire_decode. */
#define WIRE_NAME_MAX 63
#define WIRE_SIG_LEN 64
typedef struct wire_identity {
    uint8_t pubkey[32];
    char name[WIRE_NAME_MAX + 1]; /* printable ASCII, may be empty */
    uint8_t sig[WIRE_SIG_LEN];
    uint8_t digest[32];
} wire_identity_t;

/* A message: its type and the payload of that type (the fields wire_msgs.def lists for it). */
typedef struct wire_msg {
    uint16_t type;
    union wire_payload {
        struct {
            uint32_t magic; uint16_t version; uint32_t peer_group;
            uint16_t p2p_port;         /* the port other peers dial (the advertised one when set) */
            uint32_t pool_size;
            uint8_t has_adv;           /* 1: other peers dial adv_ip, not the address the master sees */
            ccoip_inet_address_t adv_ip;
            wire_identity_t id;
        } hello;
        struct { uint8_t value; } flag; /* P2P_ESTABLISHED, SS_DIST_DONE, M2C_PEERS_PENDING, SS_DONE, OPTIMIZE_DONE */
        struct { uint64_t revision; uint8_t strategy; uint32_t n; wire_tensor_t *tensors; } sync;
        struct {
            uint64_t tag;
            uint64_t count; /* this member's elements (all-gather-v: its own count) */
            uint8_t dtype, op, quant_algo, quant_dtype;
            uint8_t kind;      /* pcclExtCollKind_t (pccl_coll.h) */
            uint8_t flags;     /* PCCL_EXT_COLL_ROOT, _RANKED, _SHARED_SOURCES */
            uint64_t rank_key; /* with _RANKED: orders the ranks */
            uint64_t capacity; /* elements the member's output holds (0 for an all-reduce) */
            uint32_t max_world; /* all-gather-v: entries its counts array holds; 0 = no limit */
            uint64_t hash;     /* shared-sources broadcast: simplehash of the member's buffer, else 0 */
            uint8_t algo;      /* WIRE_ALGO_AUTO, _RING, _RHD or _RD: the member's PCCL_ALGO */
            uint64_t grant_seq; /* the op_seq of the grant this vote runs under (pipelined), else 0 */
        } coll_init;
        /* COLL_DONE, ABORT, COMPLETE, REVOKE; COMPLETE's grant: next_seq (0: none) for tag next_tag on
         * slots; REVOKE's slots: the void grant's */
        struct { uint64_t tag; uint64_t op_seq; uint8_t ok; uint64_t next_tag, next_seq, slots; } coll;
        struct { uint8_t uuid[16]; } welcome; /* also PEER_UNREACHABLE: the peer that could not be reached */
        struct { wire_world_t world; uint32_t n; wire_peer_t *peers; } establish; /* ring order of own group */
        struct { uint8_t ok; wire_world_t world; } topo_done;
        struct {
            uint8_t status;
            uint64_t revision;    /* the group's revision after this sync (or the expected one) */
            uint8_t nsrc;
            wire_peer_t sources[WIRE_MAX_SS_SOURCES]; /* peers holding the elected content */
            uint32_t n;
            wire_tensor_t *fetch;    /* keys to fetch, with the hash they must have */
            uint32_t *holders;       /* per fetch entry: bit s set = sources[s] holds those bytes */
            uint32_t nranges;
            wire_ss_range_t *ranges; /* who sends what: every fetch entry covered in order, no gap */
        } ss_plan;
        struct {
            uint64_t tag, op_seq;
            uint64_t slots; /* the connection-pool slots of the op, one stripe each (bit i = slot i) */
            wire_world_t world;
            uint32_t n;
            uint8_t (*ring)[16]; /* uuids of the group in ring order */
            uint8_t kind;        /* pcclExtCollKind_t */
            uint32_t root;       /* broadcast: the root's ring position, else 0 */
            wire_coll_member_t *members; /* per ring position (n entries): its rank, count and holds */
            uint8_t algo;        /* WIRE_ALGO_RING, _RHD or _RD: what every member runs */
        } commence;
        struct { uint64_t tag; uint8_t reason; char detail[256]; } reject; /* detail: the master's reason text */
        struct { char reason[256]; } kick; /* KICK and SHUTDOWN */
        struct { uint32_t duration_ms; uint32_t n; wire_peer_t *peers; } bench_req; /* peers to measure toward */
        struct { uint32_t n; wire_bw_t *results; } bench_res;
        struct {
            uint32_t magic; uint16_t version; uint32_t peer_group; uint16_t p2p_port; uint32_t pool_size;
            uint8_t has_adv; ccoip_inet_address_t adv_ip; /* as in hello */
            wire_identity_t id;
            uint8_t uuid[16];      /* this peer's uuid: the one derived from id.pubkey */
            uint8_t has_revision;  /* 0: this peer never completed a shared-state sync */
            uint64_t revision;     /* of its last completed sync */
            uint32_t nring;
            uint8_t (*ring)[16];   /* its group's ring order as last established */
            uint32_t n;
            wire_tensor_t *tensors; /* its last sync's entries (keys, dtypes, counts, hashes) */
            uint32_t nops;
            wire_op_outcome_t *ops; /* collectives it ran under the lost master without a verdict */
        } resume;
        struct { uint8_t ok; wire_world_t world; uint64_t revision; } resumed; /* ok 0: join as a new peer */
        struct { uint8_t nonce[32]; } challenge;
        struct { uint32_t req; uint8_t target[16]; uint8_t punch_failed; } rdv_req;
        struct { uint32_t n; wire_edge_t *e; } edges;
        struct {
            uint32_t req;      /* the dialer's request it answers (the target's: 0) */
            uint8_t peer[16];  /* the other side */
            uint8_t mode;      /* WIRE_RDV_* */
            uint8_t role;      /* WIRE_RDV_DIALER or _TARGET */
            uint8_t has_ip;
            ccoip_inet_address_t ip; /* punch: the other side's observed address; relay: the relay's */
            uint16_t port;
            uint32_t delay_ms; /* punch: dial this long after receipt */
            uint8_t token[32]; /* relay: the pair's token */
            char reason[256];  /* refused: why */
            uint8_t index;     /* punch: the pair's punch index (docs/nat.md): both sides add it to both ports */
        } rdv;
    } u;
} wire_msg_t;

/* Growable output buffer. */
typedef struct wbuf {
    uint8_t *data;
    size_t len, cap;
    int oom;
} wbuf_t;

void wbuf_free(wbuf_t *b);

/** Appends the framed encoding of m to out. @return 0, or -1 (bad message or out of memory). */
int wire_encode(const wire_msg_t *m, wbuf_t *out);

/**
 * Decodes one body (type + payload, without the length prefix).
 * @return 0, or -1 with a reason in err (out is then empty, nothing to free).
 */
int wire_decode(const uint8_t *body, size_t len, wire_msg_t *out, char *err, size_t errlen);

/** The digest a HELLO's or RESUME's signature covers: BLAKE2b-256 of body[0, len) (its body without the
 * signature). */
void wire_body_digest(const uint8_t *body, size_t len, uint8_t out[32]);

/** Frees arrays owned by a decoded or built message; safe on zeroed messages. */
void wire_msg_free(wire_msg_t *m);

const char *wire_type_name(uint16_t type);
int wire_type_is_c2m(uint16_t type);
int wire_type_is_m2c(uint16_t type);

/* Big-endian helpers for small fixed headers. */
void wire_put_u16(uint8_t *p, uint16_t v);
void wire_put_u32(uint8_t *p, uint32_t v);
void wire_put_u64(uint8_t *p, uint64_t v);
uint16_t wire_get_u16(const uint8_t *p);
uint32_t wire_get_u32(const uint8_t *p);
uint64_t wire_get_u64(const uint8_t *p);

/* p2p handshake: magic u32, version u16, kind u8, uuid[16], slot u32 = 27 bytes. */
#define WIRE_P2P_HELLO_LEN 27
void wire_p2p_hello_encode(uint8_t out[WIRE_P2P_HELLO_LEN], uint8_t kind, const uint8_t uuid[16], uint32_t slot);
/** @return 0, or -1 for wrong magic/version/kind. */
int wire_p2p_hello_decode(const uint8_t in[WIRE_P2P_HELLO_LEN], uint8_t *kind, uint8_t uuid[16], uint32_t *slot);

#endif /* PCCL_WIRE_H */
