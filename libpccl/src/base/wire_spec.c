/* wire_spec.c - the codec's tables, made of wire_msgs.def (see wire_spec.h), and the decoding checks that
 * the list names: the few rules of a message that relate one field to another. */
#include "base/wire_spec.h"

#include <string.h>

/* ---- decoding checks (SS_PLAN) ---- */

/* A holder set names only sources the plan lists. */
static const char *wire_check_holder(const union wire_payload *u, const void *elem) {
    uint32_t h;
    memcpy(&h, elem, sizeof h);
    uint32_t known = u->ss_plan.nsrc == 32 ? ~0u : (1u << u->ss_plan.nsrc) - 1;
    return h & ~known ? "holder is not a source" : NULL;
}

/* A range is bytes of a fetch entry that its source holds, not empty, and not past 2^64. */
static const char *wire_check_range(const union wire_payload *u, const void *elem) {
    const wire_ss_range_t *g = elem;
    if (g->tensor >= u->ss_plan.n || g->source >= WIRE_MAX_SS_SOURCES ||
        !(u->ss_plan.holders[g->tensor] >> g->source & 1) || !g->length || g->offset + g->length < g->offset)
        return "range outside the plan";
    return NULL;
}

/* ---- the fields: each checks at compile time that its member has the size its kind needs ---- */

#define MEMBER(path) (((WIRE_BASE *)0)->path)
#define OFF(path) ((uint32_t)offsetof(WIRE_BASE, path))
/* 0 when cond holds; a compile error (an array of size -1) when it does not. */
#define SAME(cond) (0 * sizeof(char[(cond) ? 1 : -1]))
#define ELEM_SIZE(e) sizeof(((union wire_elem *)0)->e)

#define INT_FIELD(k, width, path, nm) {.kind = k, .size = width, .off = OFF(path) + SAME(sizeof MEMBER(path) == width), .name = nm},
#define U8(path, nm) INT_FIELD(WF_U8, 1, path, nm)
#define U16(path, nm) INT_FIELD(WF_U16, 2, path, nm)
#define U32(path, nm) INT_FIELD(WF_U32, 4, path, nm)
#define U64(path, nm) INT_FIELD(WF_U64, 8, path, nm)
#define F64(path, nm) INT_FIELD(WF_F64, 8, path, nm)
#define VERSION(path, nm) INT_FIELD(WF_VERSION, 2, path, nm)
#define NONZERO64(path, nm, error) \
    {.kind = WF_NONZERO64, .size = 8, .off = OFF(path) + SAME(sizeof MEMBER(path) == 8), .name = nm, .bad = error},
#define BYTES(path, nm) {.kind = WF_BYTES, .size = sizeof MEMBER(path), .off = OFF(path), .name = nm},
#define STR(path, nm) \
    {.kind = WF_STR, .size = sizeof MEMBER(path), .off = OFF(path) + SAME(sizeof MEMBER(path) == WIRE_MAX_KEY + 1), .name = nm},
#define NAME(path, nm) \
    {.kind = WF_NAME, .size = sizeof MEMBER(path), .off = OFF(path) + SAME(sizeof MEMBER(path) == WIRE_NAME_MAX + 1), .name = nm},
#define IP(path, nm) {.kind = WF_IP, .off = OFF(path) + SAME(sizeof MEMBER(path) == sizeof(ccoip_inet_address_t)), .name = nm},
#define IP_OPT(path, present, nm)                                                                          \
    {.kind = WF_IP_OPT, .off = OFF(path) + SAME(sizeof MEMBER(path) == sizeof(ccoip_inet_address_t)),      \
     .aux = OFF(present) + SAME(sizeof MEMBER(present) == 1), .name = nm},
#define SIG(path, digest, nm)                                                                            \
    {.kind = WF_SIG, .size = WIRE_SIG_LEN, .off = OFF(path) + SAME(sizeof MEMBER(path) == WIRE_SIG_LEN), \
     .aux = OFF(digest) + SAME(sizeof MEMBER(digest) == 32), .name = nm},
#define STRUCT(path, nm, e) \
    {.kind = WF_STRUCT, .elem = WIRE_E_##e, .off = OFF(path) + SAME(sizeof MEMBER(path) == ELEM_SIZE(e)), .name = nm},
#define COUNT8(path, nm, most, error) \
    {.kind = WF_COUNT, .size = 1, .off = OFF(path) + SAME(sizeof MEMBER(path) == 1), .max = most, .name = nm, .bad = error},
#define COUNT32(path, nm, most, error) \
    {.kind = WF_COUNT, .size = 4, .off = OFF(path) + SAME(sizeof MEMBER(path) == 4), .max = most, .name = nm, .bad = error},
#define ARRAY(path, nm, e, count, chk)                                                                          \
    {.kind = WF_ARRAY, .elem = WIRE_E_##e, .size = sizeof MEMBER(count),                                        \
     .off = OFF(path) + SAME(sizeof MEMBER(path) == sizeof(void *) && sizeof *MEMBER(path) == ELEM_SIZE(e)),  \
     .aux = OFF(count), .name = nm, .check = chk},
#define INLINE(path, nm, e, count)                                                                      \
    {.kind = WF_INLINE, .elem = WIRE_E_##e, .size = sizeof MEMBER(count),                               \
     .off = OFF(path) + SAME(sizeof MEMBER(path)[0] == ELEM_SIZE(e)), .aux = OFF(count),                \
     .max = sizeof MEMBER(path) / sizeof MEMBER(path)[0], .name = nm},

/* Every list ends with one zeroed entry (not counted), so that an empty payload is valid C. */
#define NFIELDS(a) ((uint32_t)(sizeof a / sizeof a[0] - 1))

#define WIRE_BASE union wire_elem
#define WIRE_ELEM(elem, ctype, fields) static const wire_field_t elem_##elem[] = {fields{0}};
#define WIRE_MSG(dir, symbol, type, name, fields)
#include "base/wire_msgs.def"
#undef WIRE_BASE
#undef WIRE_ELEM
#undef WIRE_MSG

#define WIRE_BASE union wire_payload
#define WIRE_ELEM(elem, ctype, fields)
#define WIRE_MSG(dir, symbol, type, name, fields) static const wire_field_t msg_##symbol[] = {fields{0}};
#include "base/wire_msgs.def"
#undef WIRE_ELEM
#undef WIRE_MSG

const wire_layout_t wire_elems[WIRE_NELEMS] = {
#define WIRE_ELEM(elem, ctype, fields) [WIRE_E_##elem] = {#elem, elem_##elem, NFIELDS(elem_##elem), sizeof(ctype)},
#define WIRE_MSG(dir, symbol, type, name, fields)
#include "base/wire_msgs.def"
#undef WIRE_ELEM
#undef WIRE_MSG
};

#define WIRE_DIR_C2M 1
#define WIRE_DIR_M2C 0
const wire_msg_spec_t wire_msgs[] = {
#define WIRE_ELEM(elem, ctype, fields)
#define WIRE_MSG(dir, symbol, type, name, fields) \
    [symbol] = {symbol, WIRE_DIR_##dir, {name, msg_##symbol, NFIELDS(msg_##symbol), 0}},
#include "base/wire_msgs.def"
#undef WIRE_ELEM
#undef WIRE_MSG
};
const size_t wire_nmsgs = sizeof wire_msgs / sizeof wire_msgs[0];

const wire_msg_spec_t *wire_msg_spec(uint16_t t) {
    return t < wire_nmsgs && wire_msgs[t].payload.name ? &wire_msgs[t] : NULL;
}

size_t wire_layout_min(const wire_layout_t *l, int *fixed) {
    size_t n = 0;
    for (uint32_t i = 0; i < l->nfields; i++) {
        const wire_field_t *f = &l->fields[i];
        switch ((wire_kind_t)f->kind) {
        case WF_STR: case WF_NAME:
            n += 1;
            if (fixed) *fixed = 0;
            break;
        case WF_IP: case WF_IP_OPT: n += WIRE_IP_LEN; break;
        case WF_STRUCT: n += wire_layout_min(&wire_elems[f->elem], fixed); break;
        case WF_ARRAY: case WF_INLINE:
            if (fixed) *fixed = 0;
            break;
        default: n += f->size; break;
        }
    }
    return n;
}
