/* test_wire_spec.c - the message list of wire_msgs.def against docs/protocol.md: section 2's two message
 * tables (type, name and payload of every message, in type order) and the encodings table's rows of the
 * elements, each rendered from the spec as the document writes them, so that document and code cannot
 * drift. Also the rules the codec relies on: each direction in type order, counts before their arrays,
 * elements without arrays, inline arrays large enough for their counts. */
#include "doc_table.h"
#include "tinytest.h"
#include "base/wire_spec.h"

#include <stdio.h>
#include <string.h>

#define DOC PCCL_TEST_DATA_DIR "/../../docs/protocol.md"

/* ---- rendering a payload as docs/protocol.md writes it ---- */

static void render_field(const wire_field_t *f, char *out, size_t cap);

/* How a field's type is written: u32, str, ip, world, peer[n], uuid[16][nring] ... */
static void render_type(const wire_field_t *f, const wire_layout_t *l, char *out, size_t cap) {
    switch ((wire_kind_t)f->kind) {
    case WF_U8: snprintf(out, cap, "u8"); return;
    case WF_U16: case WF_VERSION: snprintf(out, cap, "u16"); return;
    case WF_U32: snprintf(out, cap, "u32"); return;
    case WF_U64: case WF_NONZERO64: snprintf(out, cap, "u64"); return;
    case WF_F64: snprintf(out, cap, "f64"); return;
    case WF_COUNT: snprintf(out, cap, "u%u", 8u * f->size); return;
    case WF_BYTES: case WF_SIG: snprintf(out, cap, "%s[%u]", f->name, f->size); return;
    case WF_STR: case WF_NAME: snprintf(out, cap, "str"); return;
    case WF_IP: case WF_IP_OPT: snprintf(out, cap, "ip"); return;
    case WF_STRUCT: snprintf(out, cap, "%s", wire_elems[f->elem].name); return;
    case WF_ARRAY: case WF_INLINE: {
        const wire_layout_t *e = &wire_elems[f->elem];
        const char *count = "?";
        for (uint32_t i = 0; l && i < l->nfields; i++)
            if (l->fields[i].kind == WF_COUNT && l->fields[i].off == f->aux) count = l->fields[i].name;
        char el[128];
        /* an element of one field is written as that field */
        if (e->nfields == 1) render_field(&e->fields[0], el, sizeof el);
        else snprintf(el, sizeof el, "%s", e->name);
        snprintf(out, cap, "%s[%s]", el, count);
        return;
    }
    }
    snprintf(out, cap, "?");
}

/* The type, then the name unless the type says it: "u32 n", "world", "tensor[n]" (an array named as the
 * plural of its element), "tensor[n] fetch", "sig[64]". */
static void render_in(const wire_field_t *f, const wire_layout_t *l, char *out, size_t cap) {
    char t[160], plural[64];
    render_type(f, l, t, sizeof t);
    snprintf(plural, sizeof plural, "%s%s", wire_elems[f->elem].name, "s");
    int said = f->kind == WF_BYTES || f->kind == WF_SIG || strcmp(f->name, t) == 0 ||
               ((f->kind == WF_ARRAY || f->kind == WF_INLINE) && strcmp(f->name, plural) == 0);
    if (said) snprintf(out, cap, "%s", t);
    else snprintf(out, cap, "%s %s", t, f->name);
}
static void render_field(const wire_field_t *f, char *out, size_t cap) { render_in(f, NULL, out, cap); }

/* The fields joined by ", "; "—" for none; a fixed payload of several fields ends with its size. */
static void render_layout(const wire_layout_t *l, int with_size, char *out, size_t cap) {
    out[0] = 0;
    if (l->nfields == 0) snprintf(out, cap, "—");
    for (uint32_t i = 0; i < l->nfields; i++) {
        char f[192];
        render_in(&l->fields[i], l, f, sizeof f);
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? ", " : "", f);
    }
    int fixed = 1;
    size_t n = wire_layout_min(l, &fixed);
    if (with_size && fixed && l->nfields > 1) snprintf(out + strlen(out), cap - strlen(out), " (%zu)", n);
}

/* ---- the document ---- */

/* The first table row after `section` whose header starts with `header`, or NULL. */
static const char *doc_table(const char *doc, const char *section, const char *header) {
    const char *s = strstr(doc, section);
    const char *t = s ? strstr(s, header) : NULL;
    return t ? strchr(t, '\n') : NULL;
}

static void check_messages(const char *doc, const char *section, int c2m) {
    const char *line = doc_table(doc, section, "| type | name | payload | notes |");
    CHECK(line != NULL);
    if (!line) return;
    uint16_t t = 0; /* the spec's next message of this direction after t */
    for (; line && line[1] == '|'; line = strchr(line + 1, '\n')) {
        char c[4][256];
        int n = doc_cells(line + 1, c, 4);
        if (n >= 1 && strncmp(c[0], "---", 3) == 0) continue;
        do t++;
        while (t < wire_nmsgs && !(wire_msg_spec(t) && wire_msg_spec(t)->c2m == c2m));
        if (t >= wire_nmsgs) {
            fprintf(stderr, "  %s: the document lists %s %s, the spec no further message\n", section, c[0], c[1]);
            CHECK(0);
            return;
        }
        const wire_msg_spec_t *s = wire_msg_spec(t);
        char want[3][256];
        snprintf(want[0], sizeof want[0], "%u", t);
        snprintf(want[1], sizeof want[1], "%s", s->payload.name);
        render_layout(&s->payload, 1, want[2], sizeof want[2]);
        CHECK_EQ_U64(n, 4);
        for (int i = 0; i < 3 && i < n; i++)
            if (strcmp(want[i], c[i]) != 0) {
                fprintf(stderr, "  %s, %s, column %d: the document says \"%s\", the spec \"%s\"\n", section, want[1], i + 1,
                        c[i], want[i]);
                CHECK(0);
            }
    }
    while (++t < wire_nmsgs)
        if (wire_msg_spec(t) && wire_msg_spec(t)->c2m == c2m) {
            fprintf(stderr, "  %s: %s (%u) is not documented\n", section, wire_type_name(t), t);
            CHECK(0);
        }
}

/* Section 2's tables: every message, in type order, with its name and payload. */
static void test_doc_messages(void) {
    char *doc = doc_read(DOC);
    CHECK(doc != NULL);
    if (!doc) return;
    check_messages(doc, "### Peer → master", 1);
    check_messages(doc, "### Master → peer", 0);
    free(doc);
}

/* The encodings table has a row for every element of several fields: its encoding and size. */
static void test_doc_elements(void) {
    char *doc = doc_read(DOC);
    CHECK(doc != NULL);
    if (!doc) return;
    const char *top = doc_table(doc, "## 1. Control framing", "| name | encoding | size |");
    CHECK(top != NULL);
    for (int e = 0; top && e < WIRE_NELEMS; e++) {
        const wire_layout_t *l = &wire_elems[e];
        if (l->nfields == 1) continue;
        char want[2][256];
        render_layout(l, 0, want[0], sizeof want[0]);
        int fixed = 1;
        size_t n = wire_layout_min(l, &fixed);
        if (fixed) snprintf(want[1], sizeof want[1], "%zu", n);
        else snprintf(want[1], sizeof want[1], "%zu + len", n);
        int found = 0;
        for (const char *line = top; line && line[1] == '|'; line = strchr(line + 1, '\n')) {
            char c[3][256];
            if (doc_cells(line + 1, c, 3) != 3 || strcmp(c[0], l->name) != 0) continue;
            found = 1;
            for (int i = 0; i < 2; i++)
                if (strcmp(c[i + 1], want[i]) != 0) {
                    fprintf(stderr, "  element %s, column %d: the document says \"%s\", the spec \"%s\"\n", l->name, i + 2,
                            c[i + 1], want[i]);
                    CHECK(0);
                }
        }
        if (!found) fprintf(stderr, "  element %s has no row in the encodings table\n", l->name);
        CHECK(found);
    }
    free(doc);
}

/* ---- the spec's own rules ---- */

static void test_spec_rules(void) {
    uint16_t last[2] = {0, 0};
    size_t count = 0;
    for (uint16_t t = 0; t < wire_nmsgs; t++) {
        const wire_msg_spec_t *s = wire_msg_spec(t);
        if (!s) {
            CHECK(strcmp(wire_type_name(t), "UNKNOWN") == 0 && !wire_type_is_c2m(t) && !wire_type_is_m2c(t));
            continue;
        }
        count++;
        CHECK_EQ_U64(s->type, t);
        CHECK(s->c2m ? wire_type_is_c2m(t) && t < C2M_MAX_ : wire_type_is_m2c(t) && t < M2C_MAX_);
        CHECK(t > last[s->c2m]);
        last[s->c2m] = t;
        for (uint16_t u = 0; u < t; u++) CHECK(!wire_msg_spec(u) || strcmp(wire_msg_spec(u)->payload.name, s->payload.name) != 0);
        const wire_layout_t *l = &s->payload;
        for (uint32_t i = 0; i < l->nfields; i++) {
            const wire_field_t *f = &l->fields[i];
            if (f->kind == WF_COUNT) CHECK(f->max > 0 && f->bad != NULL);
            if (f->kind == WF_SIG) CHECK(i + 1 == l->nfields); /* the signature ends the body */
            if (f->kind != WF_ARRAY && f->kind != WF_INLINE) continue;
            const wire_field_t *c = NULL; /* its count comes before it */
            for (uint32_t j = 0; j < i; j++)
                if (l->fields[j].kind == WF_COUNT && l->fields[j].off == f->aux) c = &l->fields[j];
            CHECK(c != NULL && c->size == f->size);
            if (c && f->kind == WF_INLINE) CHECK(c->max <= f->max);
        }
    }
    /* C2M_MAX_ and M2C_MAX_ are one past the last type of their direction */
    CHECK_EQ_U64(C2M_MAX_, last[1] + 1u);
    CHECK_EQ_U64(M2C_MAX_, last[0] + 1u);
    CHECK_EQ_U64(wire_nmsgs, M2C_MAX_);
    CHECK_EQ_U64(count, 35);
    /* elements hold fixed fields only: no counts, arrays, version or signature */
    for (int e = 0; e < WIRE_NELEMS; e++)
        for (uint32_t i = 0; i < wire_elems[e].nfields; i++) {
            uint8_t k = wire_elems[e].fields[i].kind;
            CHECK(k != WF_COUNT && k != WF_ARRAY && k != WF_INLINE && k != WF_VERSION && k != WF_SIG);
        }
}

/* The renderer writes what section 2 has always written for these payloads. */
static void test_render(void) {
    char out[256];
    render_layout(&wire_msg_spec(C2M_COLL_INIT)->payload, 1, out, sizeof out);
    CHECK(strcmp(out, "u64 tag, u64 count, u8 dtype, u8 op, u8 quant_algo, u8 quant_dtype, u8 kind, u8 flags, u64 rank_key, "
                      "u64 capacity, u32 max_world, u64 hash, u8 algo, u64 grant_seq (59)") == 0);
    render_layout(&wire_msg_spec(M2C_COLL_COMMENCE)->payload, 1, out, sizeof out);
    CHECK(strcmp(out, "u64 tag, u64 op_seq, u64 slots, world, u32 n, uuid[16][n] ring, u8 kind, u32 root, member[n], u8 algo") == 0);
    render_layout(&wire_msg_spec(M2C_SS_PLAN)->payload, 1, out, sizeof out);
    CHECK(strcmp(out, "u8 status, u64 revision, u8 nsrc, peer[nsrc] sources, u32 n, tensor[n] fetch, u32[n] holders, "
                      "u32 nranges, range[nranges]") == 0);
    render_layout(&wire_msg_spec(C2M_HEARTBEAT)->payload, 1, out, sizeof out);
    CHECK(strcmp(out, "—") == 0);
    render_layout(&wire_elems[WIRE_E_tensor], 0, out, sizeof out);
    CHECK(strcmp(out, "str key, u8 dtype, u8 allow_inequality, u64 count, u64 hash") == 0);
}

int main(void) {
    RUN_TEST(test_spec_rules);
    RUN_TEST(test_render);
    RUN_TEST(test_doc_messages);
    RUN_TEST(test_doc_elements);
    TEST_MAIN_END();
}
