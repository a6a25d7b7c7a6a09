/* doc_table.h - reading the markdown tables of the documents in docs/, so that tests can check a document against the
 * code's tables (row by row) and the two cannot drift. */
#ifndef DOC_TABLE_H
#define DOC_TABLE_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file, NUL-terminated (free it), or NULL. */
static inline char *doc_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* Splits a markdown table row into trimmed cells (backticks dropped); returns the count. */
static inline int doc_cells(const char *line, char out[][256], int max) {
    int n = 0;
    const char *p = strchr(line, '|');
    while (p && n < max) {
        const char *q = strchr(p + 1, '|');
        const char *nl = strchr(p + 1, '\n');
        if (!q || (nl && nl < q)) break;
        int k = 0;
        for (const char *c = p + 1; c < q && k < 255; c++)
            if (*c != '`') out[n][k++] = *c;
        out[n][k] = 0;
        char *s = out[n];
        while (isspace((unsigned char)*s)) memmove(s, s + 1, strlen(s));
        for (size_t l = strlen(s); l && isspace((unsigned char)s[l - 1]); l--) s[l - 1] = 0;
        n++;
        p = q;
    }
    return n;
}

#endif /* DOC_TABLE_H */
