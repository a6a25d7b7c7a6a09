/*
 * topo_matrix.h - reads a bandwidth matrix file for `pccl solve-topology`.
 *
 * Formats, told apart by content (first non-space character '[' or '{'
 * means JSON, anything else CSV):
 *   CSV:  n lines of n comma-separated numbers (Mbit/s); blank lines and
 *         '#' comments (to the end of the line) are skipped.
 *   JSON: [[...], ...] or {"bandwidth_mbps": [[...], ...]} (what `pccl
 *         bench-bandwidth --json` prints, with --master or --connect).
 * The path "-" reads standard input, so the two commands make a pipe.
 * Row i, column j is the bandwidth from peer i to peer j; rows and columns
 * are numbered from 0, like peer ids. The diagonal is ignored and may hold
 * anything (in JSON even null). Off-diagonal entries must be finite numbers
 * >= 0 (0 = unreachable).
 */
#ifndef PCCL_CLI_TOPO_MATRIX_H
#define PCCL_CLI_TOPO_MATRIX_H

#include <stddef.h>

/* On success returns 0 with *bw (row-major n x n, diagonal set to 0; free()
 * it) and *n >= 1. On failure returns -1 and writes a one-line message that
 * names the file and the problem (line, row, column) into err. */
int topo_matrix_read(const char *path, double **bw, int *n, char *err, size_t errlen);

#endif
