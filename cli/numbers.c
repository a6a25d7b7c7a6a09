/* numbers.c - number parsers for flag values: the whole word must be the number, or the flag is refused. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>

int cli_parse_u64(const char *s, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull would wrap "-1" around to the largest value. */
    if (errno || *end || end == s || s[0] == '-' || v > max) return -1;
    *out = v;
    return 0;
}

int cli_parse_float(const char *s, float *out) {
    char *end;
    float v = strtof(s, &end);
    if (*end || end == s || v != v) return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*end || end == s) return -1;
    *out = v;
    return 0;
}

int cli_parse_double(const char *s, double min, double max, double *out) {
    double v;
    if (parse_double(s, &v) != 0 || !(v >= min && v <= max)) return -1; /* written so that NaN fails */
    *out = v;
    return 0;
}

int cli_parse_positive(const char *s, double max, double *out) {
    double v;
    if (parse_double(s, &v) != 0 || !(v > 0 && v <= max)) return -1;
    *out = v;
    return 0;
}
