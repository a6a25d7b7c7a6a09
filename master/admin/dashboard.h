/*
 * dashboard.h - the admin port's web dashboard: the files of master/dashboard/ (HTML, JavaScript, CSS),
 * compiled into the binary. The build (cmake/pcclEmbed.cmake) writes them as byte arrays into
 * dashboard_files.c of the build tree, so the master serves the page with nothing installed beside it.
 */
#ifndef PCCL_DASHBOARD_H
#define PCCL_DASHBOARD_H

#include <stddef.h>

typedef struct dashboard_file {
    const char *path; /* "/" and the file's name: "/index.html", "/dashboard.js" */
    const unsigned char *data;
    size_t len;
} dashboard_file_t;

extern const dashboard_file_t dashboard_files[];
extern const size_t dashboard_nfiles;

#endif
