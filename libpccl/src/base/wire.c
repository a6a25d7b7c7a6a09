/* wire.c - encoder and strict decoder of the control protocol (see wire.h): one walk over the fields that
 * wire_msgs.def lists for each message (wire_spec.h), for every message. */
#include "base/wire.h"
#include "base/wire_spec.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- big-endian helpers ---- */
void wire_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
void wire_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
void wire_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}
uint16_t wire_get_u16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
uint32_t wire_get_u32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
uint64_t wire_get_u64(const uint8_t *p) { return ((uint64_t)wire_get_u32(p) << 32) | wire_get_u32(p + 4); }

/* ---- writer ---- */
void wbuf_free(wbuf_t *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static uint8_t *wb_grow(wbuf_t *b, size_t n) {
    if (b->oom) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}
static void wb_u8(wbuf_t *b, uint8_t v) { uint8_t *p = wb_grow(b, 1); if (p) *p = v; }
static void wb_bytes(wbuf_t *b, const void *d, size_t n) { uint8_t *p = wb_grow(b, n); if (p && n) memcpy(p, d, n); }

/* Values in a message lie in host order, at any member of its struct: loaded and stored by width. */
static uint64_t ld_uint(const uint8_t *p, unsigned width) {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    switch (width) {
    case 1: memcpy(&u8, p, 1); return u8;
    case 2: memcpy(&u16, p, 2); return u16;
    case 4: memcpy(&u32, p, 4); return u32;
    default: memcpy(&u64, p, 8); return u64;
    }
}
static void st_uint(uint8_t *p, unsigned width, uint64_t v) {
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;
    switch (width) {
    case 1: memcpy(p, &u8, 1); break;
    case 2: memcpy(p, &u16, 2); break;
    case 4: memcpy(p, &u32, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}
static void *ld_ptr(const uint8_t *p) {
    void *v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void wb_uint(wbuf_t *b, unsigned width, uint64_t v) {
    uint8_t *p = wb_grow(b, width);
    if (!p) return;
    switch (width) {
    case 1: *p = (uint8_t)v; break;
    case 2: wire_put_u16(p, (uint16_t)v); break;
    case 4: wire_put_u32(p, (uint32_t)v); break;
    default: wire_put_u64(p, v); break;
    }
}
static void wb_ip(wbuf_t *b, int present, const ccoip_inet_address_t *ip) {
    uint8_t raw[16] = {0};
    if (present && ip->protocol == inetIPv6) memcpy(raw, ip->ipv6.data, 16);
    else if (present) memcpy(raw, ip->ipv4.data, 4);
    wb_u8(b, !present ? 0 : ip->protocol == inetIPv6 ? 6 : 4);
    wb_bytes(b, raw, 16);
}

/* ---- encoding, by the fields of wire_msgs.def ---- */
static int enc_fields(wbuf_t *b, const wire_layout_t *l, const uint8_t *base);

static int enc_array(wbuf_t *b, const wire_field_t *f, const uint8_t *base) {
    static const union wire_elem zero;
    const wire_layout_t *e = &wire_elems[f->elem];
    uint32_t n = (uint32_t)ld_uint(base + f->aux, f->size);
    const uint8_t *a = f->kind == WF_INLINE ? base + f->off : ld_ptr(base + f->off);
    for (uint32_t i = 0; i < n; i++)
        if (enc_fields(b, e, a ? a + (size_t)i * e->size : (const uint8_t *)&zero) != 0) return -1;
    return 0;
}

/* @return 0, or -1 for a value the wire cannot carry (a count over its limit, a zero NONZERO64). */
static int enc_field(wbuf_t *b, const wire_field_t *f, const uint8_t *base) {
    const uint8_t *v = base + f->off;
    switch ((wire_kind_t)f->kind) {
    /* constant widths, so that the loads and stores compile to single moves */
    case WF_U8: wb_uint(b, 1, ld_uint(v, 1)); return 0;
    case WF_U16: case WF_VERSION: wb_uint(b, 2, ld_uint(v, 2)); return 0;
    case WF_U32: wb_uint(b, 4, ld_uint(v, 4)); return 0;
    case WF_NONZERO64:
        if (ld_uint(v, 8) == 0) return -1;
        /* fall through */
    case WF_U64: case WF_F64: wb_uint(b, 8, ld_uint(v, 8)); return 0;
    case WF_COUNT:
        if (ld_uint(v, f->size) > f->max) return -1;
        wb_uint(b, f->size, ld_uint(v, f->size));
        return 0;
    case WF_BYTES: case WF_SIG: wb_bytes(b, v, f->size); return 0;
    case WF_STR: case WF_NAME: {
        size_t n = strnlen((const char *)v, f->size - 1u);
        wb_u8(b, (uint8_t)n);
        wb_bytes(b, v, n);
        return 0;
    }
    case WF_IP: wb_ip(b, 1, (const ccoip_inet_address_t *)v); return 0;
    case WF_IP_OPT: wb_ip(b, base[f->aux], (const ccoip_inet_address_t *)v); return 0;
    case WF_STRUCT: return enc_fields(b, &wire_elems[f->elem], v);
    case WF_ARRAY: case WF_INLINE: return enc_array(b, f, base);
    }
    return -1;
}

static int enc_fields(wbuf_t *b, const wire_layout_t *l, const uint8_t *base) {
    for (uint32_t i = 0; i < l->nfields; i++)
        if (enc_field(b, &l->fields[i], base) != 0) return -1;
    return 0;
}

int wire_encode(const wire_msg_t *m, wbuf_t *out) {
    size_t start = out->len;
    const wire_msg_spec_t *s = wire_msg_spec(m->type);
    if (!s || !wb_grow(out, 4)) return -1;
    wb_uint(out, 2, m->type);
    if (enc_fields(out, &s->payload, (const uint8_t *)&m->u) != 0 || out->oom) goto bad;
    size_t body = out->len - start - 4;
    if (body > WIRE_MAX_BODY) goto bad;
    wire_put_u32(out->data + start, (uint32_t)body);
    return 0;
bad:
    out->len = start;
    return -1;
}

/* ---- decoding ---- */
typedef struct rd {
    const uint8_t *body, *p;
    size_t left;
    int err;
    int stop;         /* a message of another version: the rest of the body is not read */
    const char *ctx;  /* the element of the field at fault, or NULL */
    const char *what; /* the field at fault, or what is wrong */
} rd_t;

static void rd_fail(rd_t *r, const char *ctx, const char *what) {
    if (r->err) return;
    r->err = 1;
    r->ctx = ctx;
    r->what = what;
}
static const uint8_t *rd_take(rd_t *r, size_t n, const char *ctx, const char *what) {
    if (r->err) return NULL;
    if (r->left < n) {
        rd_fail(r, ctx, what);
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}
static uint64_t rd_uint(rd_t *r, unsigned width, const char *ctx, const char *what) {
    const uint8_t *p = rd_take(r, width, ctx, what);
    if (!p) return 0;
    switch (width) {
    case 1: return *p;
    case 2: return wire_get_u16(p);
    case 4: return wire_get_u32(p);
    default: return wire_get_u64(p);
    }
}

/* A string into a char array of f->size bytes: STR without NUL, NAME printable and short enough. */
static void rd_str(rd_t *r, const wire_field_t *f, char *dst, const char *ctx) {
    uint8_t n = (uint8_t)rd_uint(r, 1, ctx, f->name);
    const uint8_t *p = rd_take(r, n, ctx, f->name);
    if (!p) return;
    const char *bad = NULL;
    if (f->kind == WF_NAME && n > WIRE_NAME_MAX) bad = "name longer than 63 bytes";
    for (uint8_t i = 0; !bad && f->kind == WF_NAME && i < n; i++)
        if (p[i] < 0x20 || p[i] > 0x7e) bad = "name with a non-printable byte";
    if (!bad && memchr(p, 0, n)) bad = "NUL inside string";
    if (bad) {
        rd_fail(r, NULL, bad);
        return;
    }
    memcpy(dst, p, n);
    dst[n] = 0;
}

/* Family 4 or 6 (or 0 where optional: *present is then 0); an IPv4 address must have zero padding. */
static void rd_ip(rd_t *r, uint8_t *present, ccoip_inet_address_t *ip, const char *ctx, const char *what) {
    static const uint8_t zero[16];
    uint8_t fam = (uint8_t)rd_uint(r, 1, ctx, what);
    const uint8_t *raw = rd_take(r, 16, ctx, what);
    if (!raw) return;
    if (fam == 0 && present && memcmp(raw, zero, 16) == 0) {
        *present = 0;
    } else if (fam == 4 && memcmp(raw + 4, zero, 12) == 0) {
        ip->protocol = inetIPv4;
        memcpy(ip->ipv4.data, raw, 4);
    } else if (fam == 6) {
        ip->protocol = inetIPv6;
        memcpy(ip->ipv6.data, raw, 16);
    } else {
        rd_fail(r, NULL, "bad address family or padding");
        return;
    }
    if (present && fam) *present = 1;
}

/* A count is refused over its limit, or over what the bytes left can hold of the arrays that follow it and
 * use it, so that a count that lies cannot make us allocate. */
static void rd_count(rd_t *r, const wire_layout_t *l, uint32_t at, uint8_t *base) {
    const wire_field_t *f = &l->fields[at];
    uint64_t n = rd_uint(r, f->size, NULL, f->name);
    size_t min = 0;
    for (uint32_t i = at + 1; i < l->nfields; i++)
        if ((l->fields[i].kind == WF_ARRAY || l->fields[i].kind == WF_INLINE) && l->fields[i].aux == f->off)
            min += wire_layout_min(&wire_elems[l->fields[i].elem], NULL);
    if (r->err) return;
    if (n > f->max || n * min > r->left) { rd_fail(r, NULL, f->bad); return; }
    st_uint(base + f->off, f->size, n);
}

static void rd_fields(rd_t *r, const wire_layout_t *l, uint8_t *base, const char *ctx);
static void rd_field(rd_t *r, const wire_layout_t *l, uint32_t at, uint8_t *base, const char *ctx);

static void rd_array(rd_t *r, const wire_field_t *f, uint8_t *base) {
    const wire_layout_t *e = &wire_elems[f->elem];
    uint32_t n = (uint32_t)ld_uint(base + f->aux, f->size);
    if (r->err || n == 0) return;
    uint8_t *a = base + f->off;
    if (f->kind == WF_ARRAY) {
        a = calloc(n, e->size);
        if (!a) { rd_fail(r, NULL, "out of memory"); return; }
        memcpy(base + f->off, &a, sizeof a);
    }
    /* An element of one field is that field: its errors name the array. */
    wire_field_t one = e->fields[0];
    one.name = f->name;
    const wire_layout_t lone = {f->name, &one, 1, e->size};
    for (uint32_t i = 0; i < n && !r->err; i++) {
        uint8_t *el = a + (size_t)i * e->size;
        if (e->nfields == 1) rd_field(r, &lone, 0, el, NULL);
        else rd_fields(r, e, el, e->name);
        const char *bad = f->check && !r->err ? f->check((const union wire_payload *)base, el) : NULL;
        if (bad) rd_fail(r, NULL, bad);
    }
}

static void rd_field(rd_t *r, const wire_layout_t *l, uint32_t at, uint8_t *base, const char *ctx) {
    const wire_field_t *f = &l->fields[at];
    uint8_t *v = base + f->off;
    const uint8_t *p;
    switch ((wire_kind_t)f->kind) {
    /* constant widths, so that the loads and stores compile to single moves */
    case WF_U8: st_uint(v, 1, rd_uint(r, 1, ctx, f->name)); return;
    case WF_U16: st_uint(v, 2, rd_uint(r, 2, ctx, f->name)); return;
    case WF_U32: st_uint(v, 4, rd_uint(r, 4, ctx, f->name)); return;
    case WF_U64: case WF_F64: st_uint(v, 8, rd_uint(r, 8, ctx, f->name)); return;
    case WF_NONZERO64:
        st_uint(v, 8, rd_uint(r, 8, ctx, f->name));
        if (!r->err && ld_uint(v, 8) == 0) rd_fail(r, NULL, f->bad);
        return;
    case WF_VERSION:
        st_uint(v, 2, rd_uint(r, 2, ctx, f->name));
        if (!r->err && ld_uint(v, 2) != WIRE_VERSION) {
            r->p += r->left;
            r->left = 0;
            r->stop = 1;
        }
        return;
    case WF_BYTES:
        if ((p = rd_take(r, f->size, ctx, f->name))) memcpy(v, p, f->size);
        return;
    case WF_SIG:
        if (!(p = rd_take(r, f->size, ctx, f->name))) return;
        memcpy(v, p, f->size);
        wire_body_digest(r->body, (size_t)(p - r->body), base + f->aux);
        return;
    case WF_STR: case WF_NAME: rd_str(r, f, (char *)v, ctx); return;
    case WF_IP: rd_ip(r, NULL, (ccoip_inet_address_t *)v, ctx, f->name); return;
    case WF_IP_OPT: rd_ip(r, base + f->aux, (ccoip_inet_address_t *)v, ctx, f->name); return;
    case WF_STRUCT: rd_fields(r, &wire_elems[f->elem], v, wire_elems[f->elem].name); return;
    case WF_COUNT: rd_count(r, l, at, base); return;
    case WF_ARRAY: case WF_INLINE: rd_array(r, f, base); return;
    }
}

static void rd_fields(rd_t *r, const wire_layout_t *l, uint8_t *base, const char *ctx) {
    for (uint32_t i = 0; i < l->nfields && !r->err && !r->stop; i++) rd_field(r, l, i, base, ctx);
}

void wire_body_digest(const uint8_t *body, size_t len, uint8_t out[32]) {
    crypto_generichash(out, 32, body, len, NULL, 0);
}

int wire_decode(const uint8_t *body, size_t len, wire_msg_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (len > WIRE_MAX_BODY) {
        snprintf(err, errlen, "packet of %zu bytes exceeds the limit of %u", len, WIRE_MAX_BODY);
        return -1;
    }
    rd_t r = {.body = body, .p = body, .left = len};
    out->type = (uint16_t)rd_uint(&r, 2, NULL, "type");
    const wire_msg_spec_t *s = wire_msg_spec(out->type);
    if (!s) {
        snprintf(err, errlen, "unknown message type %u", out->type);
        memset(out, 0, sizeof *out);
        return -1;
    }
    rd_fields(&r, &s->payload, (uint8_t *)&out->u, NULL);
    if (!r.err && r.left != 0) rd_fail(&r, NULL, "trailing bytes");
    if (r.err) {
        snprintf(err, errlen, "malformed %s: %s%s%s", s->payload.name, r.ctx ? r.ctx : "", r.ctx ? " " : "", r.what);
        wire_msg_free(out);
        return -1;
    }
    return 0;
}

void wire_msg_free(wire_msg_t *m) {
    const wire_msg_spec_t *s = wire_msg_spec(m->type);
    for (uint32_t i = 0; s && i < s->payload.nfields; i++)
        if (s->payload.fields[i].kind == WF_ARRAY) free(ld_ptr((const uint8_t *)&m->u + s->payload.fields[i].off));
    memset(m, 0, sizeof *m);
}

const char *wire_type_name(uint16_t type) {
    const wire_msg_spec_t *s = wire_msg_spec(type);
    return s ? s->payload.name : "UNKNOWN";
}

int wire_type_is_c2m(uint16_t type) {
    const wire_msg_spec_t *s = wire_msg_spec(type);
    return s && s->c2m;
}
int wire_type_is_m2c(uint16_t type) {
    const wire_msg_spec_t *s = wire_msg_spec(type);
    return s && !s->c2m;
}

void wire_p2p_hello_encode(uint8_t out[WIRE_P2P_HELLO_LEN], uint8_t kind, const uint8_t uuid[16], uint32_t slot) {
    wire_put_u32(out, WIRE_MAGIC);
    wire_put_u16(out + 4, WIRE_VERSION);
    out[6] = kind;
    memcpy(out + 7, uuid, 16);
    wire_put_u32(out + 23, slot);
}

int wire_p2p_hello_decode(const uint8_t in[WIRE_P2P_HELLO_LEN], uint8_t *kind, uint8_t uuid[16], uint32_t *slot) {
    if (wire_get_u32(in) != WIRE_MAGIC || wire_get_u16(in + 4) != WIRE_VERSION) return -1;
    *kind = in[6];
    if (*kind < P2P_KIND_RING || *kind > P2P_KIND_BENCH) return -1;
    memcpy(uuid, in + 7, 16);
    *slot = wire_get_u32(in + 23);
    return 0;
}
