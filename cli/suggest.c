/* suggest.c - "did you mean": the closest of a list of words to a mistyped one. */
#include "cli.h"

#include <string.h>

#define SUGGEST_MAX_LEN 64

/* Optimal string alignment distance: insertions, deletions, substitutions and adjacent transpositions. */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    int d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *cli_suggest(const char *word, size_t len, const char *const *candidates, size_t n) {
    if (len == 0 || len > SUGGEST_MAX_LEN) return NULL;
    /* A third of the word may be wrong (at least one edit), so "stauts" finds "status" but "x" finds nothing. */
    int limit = len >= 6 ? (int)len / 3 : 1, best_d = limit + 1;
    const char *best = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t lc = strlen(candidates[i]);
        if (lc > SUGGEST_MAX_LEN) continue;
        int dist = edit_distance(word, len, candidates[i], lc);
        if (dist < best_d) {
            best_d = dist;
            best = candidates[i];
        }
    }
    return best;
}
