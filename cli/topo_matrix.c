/* topo_matrix.c - CSV / JSON bandwidth matrix reader (see topo_matrix.h). */
#include "topo_matrix.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/server.h"

static int topo_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int topo_fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Whole file ("-": standard input), NUL-terminated; works for pipes too. */
static char *topo_slurp(const char *path, char *err, size_t errlen) {
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        topo_fail(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - 1 - len, f);
        if (ferror(f) || feof(f)) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    int read_error = ferror(f), saved = errno;
    if (!is_stdin) fclose(f);
    if (!buf) {
        topo_fail(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    if (read_error) {
        free(buf);
        topo_fail(err, errlen, "cannot read '%s': %s", path, strerror(saved));
        return NULL;
    }
    buf[len] = 0;
    return buf;
}

/* Classifies an off-diagonal entry: 0 ok, else the reason it is rejected. */
enum { TOPO_NUM_OK, TOPO_NUM_NAN, TOPO_NUM_NONFINITE, TOPO_NUM_NEGATIVE };

static int topo_check_value(double x) {
    if (!isfinite(x)) return TOPO_NUM_NONFINITE;
    if (x < 0) return TOPO_NUM_NEGATIVE;
    return TOPO_NUM_OK;
}

static const char *topo_reason(int why) {
    switch (why) {
    case TOPO_NUM_NAN: return "is not a number";
    case TOPO_NUM_NONFINITE: return "is not a finite number";
    default: return "is negative";
    }
}

static char *topo_trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static int topo_parse_csv(const char *path, char *buf, double **out, int *n_out, char *err, size_t errlen) {
    double *bw = NULL;
    int n = 0, row = 0, lineno = 0;
    for (char *line = buf; line; ) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *text = topo_trim(line);
        line = nl ? nl + 1 : NULL;
        if (!*text) continue;

        int count = 1;
        for (const char *p = text; *p; p++) count += *p == ',';
        if (row == 0) {
            if (count > TOPO_MAX_N) {
                free(bw);
                return topo_fail(err, errlen, "%s:%d: %d columns; at most %d peers are supported", path, lineno, count, TOPO_MAX_N);
            }
            n = count;
            bw = malloc((size_t)n * n * sizeof *bw);
            if (!bw) return topo_fail(err, errlen, "%s: out of memory", path);
        } else if (count != n) {
            free(bw);
            return topo_fail(err, errlen, "%s:%d: row %d has %d values, expected %d", path, lineno, row, count, n);
        }
        if (row >= n) {
            free(bw);
            return topo_fail(err, errlen, "%s:%d: more than %d rows; the matrix must be square (one row per peer)", path, lineno, n);
        }
        char *tok = text;
        for (int col = 0; col < n; col++) {
            char *comma = strchr(tok, ',');
            if (comma) *comma = 0;
            char *t = topo_trim(tok);
            tok = comma ? comma + 1 : tok + strlen(tok);
            if (col == row) { /* diagonal: ignored, may hold anything */
                bw[(size_t)row * n + col] = 0;
                continue;
            }
            char *end;
            double x = strtod(t, &end);
            int why = (end == t || *end) ? TOPO_NUM_NAN : topo_check_value(x);
            if (why != TOPO_NUM_OK) {
                free(bw);
                return topo_fail(err, errlen, "%s:%d: entry [%d][%d] %s ('%.32s')", path, lineno, row, col, topo_reason(why), t);
            }
            bw[(size_t)row * n + col] = x;
        }
        row++;
    }
    if (row == 0) return topo_fail(err, errlen, "%s: no matrix rows found", path);
    if (row != n) {
        free(bw);
        return topo_fail(err, errlen, "%s: %d rows of %d values; the matrix must be square (one row per peer)", path, row, n);
    }
    *out = bw;
    *n_out = n;
    return 0;
}

static int topo_parse_json(const char *path, const char *buf, double **out, int *n_out, char *err, size_t errlen) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(buf, &end, 1);
    if (!root) {
        int line = 1;
        for (const char *p = buf; end && p < end && *p; p++) line += *p == '\n';
        return topo_fail(err, errlen, "%s: invalid JSON near line %d", path, line);
    }
    const cJSON *rows = root;
    int rc = -1;
    double *bw = NULL;
    if (cJSON_IsObject(root)) {
        rows = cJSON_GetObjectItemCaseSensitive(root, "bandwidth_mbps");
        if (!rows) {
            topo_fail(err, errlen, "%s: JSON object has no \"bandwidth_mbps\" member", path);
            goto out;
        }
    }
    if (!cJSON_IsArray(rows)) {
        topo_fail(err, errlen, "%s: expected an array of rows, [[...], ...]", path);
        goto out;
    }
    int n = cJSON_GetArraySize(rows), cols = -1, r = 0;
    if (n == 0) {
        topo_fail(err, errlen, "%s: no matrix rows found", path);
        goto out;
    }
    if (n > TOPO_MAX_N) {
        topo_fail(err, errlen, "%s: %d rows; at most %d peers are supported", path, n, TOPO_MAX_N);
        goto out;
    }
    const cJSON *row;
    cJSON_ArrayForEach(row, rows) { /* shape first, so ragged rows are reported as such */
        if (!cJSON_IsArray(row)) {
            topo_fail(err, errlen, "%s: row %d is not an array", path, r);
            goto out;
        }
        int count = cJSON_GetArraySize(row);
        if (cols < 0) cols = count;
        else if (count != cols) {
            topo_fail(err, errlen, "%s: row %d has %d values, expected %d", path, r, count, cols);
            goto out;
        }
        r++;
    }
    if (cols != n) {
        topo_fail(err, errlen, "%s: %d rows of %d values; the matrix must be square (one row per peer)", path, n, cols);
        goto out;
    }
    bw = malloc((size_t)n * n * sizeof *bw);
    if (!bw) {
        topo_fail(err, errlen, "%s: out of memory", path);
        goto out;
    }
    r = 0;
    cJSON_ArrayForEach(row, rows) {
        int c = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, row) {
            double x = 0;
            if (r != c) {
                int why = cJSON_IsNumber(item) ? topo_check_value(item->valuedouble) : TOPO_NUM_NAN;
                if (why != TOPO_NUM_OK) {
                    topo_fail(err, errlen, "%s: entry [%d][%d] %s", path, r, c, topo_reason(why));
                    goto out;
                }
                x = item->valuedouble;
            }
            bw[(size_t)r * n + c++] = x;
        }
        r++;
    }
    *out = bw;
    *n_out = n;
    bw = NULL;
    rc = 0;
out:
    free(bw);
    cJSON_Delete(root);
    return rc;
}

int topo_matrix_read(const char *path, double **bw, int *n, char *err, size_t errlen) {
    char *buf = topo_slurp(path, err, errlen);
    if (!buf) return -1;
    const char *p = buf;
    while (isspace((unsigned char)*p)) p++;
    int rc = (*p == '[' || *p == '{') ? topo_parse_json(path, buf, bw, n, err, errlen)
                                      : topo_parse_csv(path, buf, bw, n, err, errlen);
    free(buf);
    return rc;
}
