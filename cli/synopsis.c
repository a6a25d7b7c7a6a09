/*
 * synopsis.c - a command's synopsis, from its template (cli_command_t.usage) and its flag table: the usage line
 * of --help and the SYNOPSIS of its man page (`pccl help --synopsis CMD`, spliced into man/pccl-CMD.1.scd by the
 * build), so that neither is written by hand. A template names each flag as --NAME alone; the flag's value (its
 * metavar, or its choices a|b, in brackets when optional) comes from the table. [ ] marks what is optional,
 * " | " alternatives (at the top level: forms of the command, each on its own line of the man page), "..." what
 * may repeat; any other word is a positional (FILE, UUID-PREFIX|NAME, OPTIONS).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#define MAN_WIDTH 100 /* a SYNOPSIS line wraps before this many bytes, at a top-level space */

typedef struct out {
    char *p;
    size_t cap, len;
} out_t;

static void put(out_t *o, const char *fmt, const char *a, const char *b) {
    int n = snprintf(o->p + o->len, o->len < o->cap ? o->cap - o->len : 0, fmt, a, b);
    if (n > 0) o->len = o->len + (size_t)n < o->cap ? o->len + (size_t)n : o->cap - 1;
}

/* One word of the template, w[0..n), rendered plain or with scdoc markup. @return 0, or -1: a flag the table
 * lacks. */
static int word(const cli_command_t *cmd, const char *w, size_t n, int man, out_t *o) {
    char text[96];
    snprintf(text, sizeof text, "%.*s", (int)n, w);
    if (n > 2 && w[0] == '-' && w[1] == '-') {
        const cli_flag_t *f = cli_flag_find(cmd, text + 2);
        if (!f) return -1;
        char meta[160];
        cli_flag_value(f, meta, sizeof meta);
        /* Choices are literal words; a metavar stands for a value (underlined in a man page). */
        int literal = !f->metavar;
        put(o, man ? "*%s*" : "%s", text, "");
        if (meta[0])
            put(o, f->optional_value ? (man && !literal ? " [_%s_]" : " [%s]") : (man && !literal ? " _%s_" : " %s"),
                meta, "");
        return 0;
    }
    if (!man || !strcmp(text, "|") || !strcmp(text, "...")) {
        put(o, "%s", text, "");
        return 0;
    }
    for (char *part = text, *bar; part; part = bar ? bar + 1 : NULL) { /* UUID-PREFIX|NAME: each underlined */
        bar = strchr(part, '|');
        if (bar) *bar = 0;
        put(o, bar ? "_%s_|" : "_%s_", part, "");
    }
    return 0;
}

/* Renders the template t[0..n) (brackets, spaces and words in order). @return 0 or -1 (word's). */
static int render(const cli_command_t *cmd, const char *t, size_t n, int man, out_t *o) {
    for (size_t i = 0; i < n;) {
        if (t[i] == '[' || t[i] == ']' || t[i] == ' ') {
            put(o, "%.1s", t + i, "");
            i++;
            continue;
        }
        size_t k = i;
        while (k < n && t[k] != ' ' && t[k] != '[' && t[k] != ']') k++;
        if (word(cmd, t + i, k - i, man, o) != 0) return -1;
        i = k;
    }
    return 0;
}

int cli_synopsis(const cli_command_t *cmd, char *buf, size_t cap) {
    out_t o = {buf, cap, 0};
    buf[0] = 0;
    return render(cmd, cmd->usage, strlen(cmd->usage), 0, &o);
}

/* The end of the top-level form that starts at t (at a " | " outside brackets, or the template's end). */
static const char *form_end(const char *t) {
    int depth = 0;
    for (; *t; t++) {
        depth += (*t == '[') - (*t == ']');
        if (depth == 0 && !strncmp(t, " | ", 3)) return t;
    }
    return t;
}

/* Writes one rendered form after "*pccl NAME* ", wrapped at top-level spaces; a continuation line that opens
 * with '[' escapes it (scdoc would read a table). */
static void print_wrapped(const char *name, const char *form) {
    size_t col = (size_t)printf("*pccl %s*", name);
    for (const char *p = form; *p;) {
        while (*p == ' ') p++;
        const char *q = p;
        for (int depth = 0; *q && (depth > 0 || *q != ' '); q++) depth += (*q == '[') - (*q == ']');
        size_t len = (size_t)(q - p);
        if (col + 1 + len > MAN_WIDTH) {
            printf("\n%s", *p == '[' ? "\\" : "");
            col = *p == '[';
        } else {
            printf(" ");
            col++;
        }
        printf("%.*s", (int)len, p);
        col += len;
        p = q;
    }
    printf("\n");
}

int cli_print_man_synopsis(const cli_command_t *cmd) {
    char buf[2048];
    for (const char *t = cmd->usage; *t;) {
        const char *end = form_end(t);
        out_t o = {buf, sizeof buf, 0};
        buf[0] = 0;
        if (render(cmd, t, (size_t)(end - t), 1, &o) != 0) return -1;
        if (t != cmd->usage) printf("\n");
        print_wrapped(cmd->name, buf);
        t = *end ? end + 3 : end;
    }
    return 0;
}
