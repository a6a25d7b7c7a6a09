/*
 * wire_spec.h - the tables made of wire_msgs.def (internal to the codec, wire.c, and its tests): for
 * each message type its name, direction and fields, and the elements that payloads nest or repeat.
 * A field says where its value lies in the message (an offset into union wire_payload, or into its
 * element) and how it travels; the field kinds are described in wire_msgs.def.
 */
#ifndef PCCL_WIRE_SPEC_H
#define PCCL_WIRE_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/wire.h"

typedef uint8_t wire_uuid_t[16];

typedef enum wire_kind {
    WF_U8, WF_U16, WF_U32, WF_U64, WF_F64, WF_NONZERO64, WF_VERSION,
    WF_BYTES, WF_STR, WF_NAME, WF_IP, WF_IP_OPT, WF_SIG,
    WF_STRUCT, WF_COUNT, WF_ARRAY, WF_INLINE
} wire_kind_t;

union wire_payload;
/* A decoding check of an array element against the message decoded so far: NULL, or what is wrong. */
typedef const char *(*wire_check_fn)(const union wire_payload *u, const void *elem);

typedef struct wire_field {
    uint8_t kind;        /* wire_kind_t */
    uint8_t elem;        /* STRUCT, ARRAY, INLINE: the element (wire_elem_id) */
    uint16_t size;       /* bytes in memory: an integer's or count's width, BYTES' length, a string's capacity */
    uint32_t off;        /* where the value lies; ARRAY: its pointer; INLINE: its first element */
    uint32_t aux;        /* ARRAY, INLINE: where the count lies; IP_OPT: the presence flag; SIG: the digest */
    uint32_t max;        /* COUNT: the most elements */
    const char *name;    /* the field's name in docs/protocol.md */
    const char *bad;     /* COUNT: the error for a count over max or over the bytes left */
    wire_check_fn check; /* ARRAY: NULL, or the check of each decoded element */
} wire_field_t;

/* A message's payload or an element: its fields in wire order. */
typedef struct wire_layout {
    const char *name;           /* the message's or the element's name */
    const wire_field_t *fields;
    uint32_t nfields;
    uint32_t size;              /* an element's bytes in memory */
} wire_layout_t;

typedef struct wire_msg_spec {
    uint16_t type;
    uint8_t c2m;                /* 1: peer -> master, 0: master -> peer */
    wire_layout_t payload;      /* payload.name is the message's name; NULL for a number that is no message */
} wire_msg_spec_t;

#define WIRE_ELEM(elem, ctype, fields) WIRE_E_##elem,
#define WIRE_MSG(dir, symbol, type, name, fields)
enum wire_elem_id {
#include "base/wire_msgs.def"
    WIRE_NELEMS
};
#undef WIRE_ELEM
#undef WIRE_MSG

/* Every element as a member of one union: the paths of wire_msgs.def's WIRE_ELEM fields. */
#define WIRE_ELEM(elem, ctype, fields) ctype elem;
#define WIRE_MSG(dir, symbol, type, name, fields)
union wire_elem {
#include "base/wire_msgs.def"
};
#undef WIRE_ELEM
#undef WIRE_MSG

extern const wire_layout_t wire_elems[WIRE_NELEMS];

/* Indexed by message type; wire_nmsgs is one past the highest type. */
extern const wire_msg_spec_t wire_msgs[];
extern const size_t wire_nmsgs;

/** The spec of message type t, or NULL for a number that is no message. */
const wire_msg_spec_t *wire_msg_spec(uint16_t t);

/** The smallest wire size of a payload or element (an array counts 0, a string its length byte); *fixed
 * (when not NULL) is set to 0 when its size can be larger. */
size_t wire_layout_min(const wire_layout_t *l, int *fixed);

#endif /* PCCL_WIRE_SPEC_H */
