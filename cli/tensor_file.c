/*
 * tensor_file.c - see tensor_file.h. Formats:
 *  - npy: "\x93NUMPY", major, minor, header length (u16 for 1.x, u32 for 2.x/3.x), then a
 *    Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded
 *    with spaces and a newline, then the data. Only the three keys are read.
 *  - safetensors: u64 little-endian header length N, N bytes of JSON
 *    {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, "__metadata__": {...}},
 *    then the data area; offsets are relative to its start.
 */
#include "tensor_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "pccl_kernels.h"

static int errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static const struct {
    pcclDataType_t dt;
    const char *name, *npy, *st, *aliases;
} DT[] = {
    {pcclUint8, "uint8", "u1", "U8", " u8 byte "},        {pcclInt8, "int8", "i1", "I8", " i8 "},
    {pcclInt16, "int16", "i2", "I16", " i16 short "},     {pcclUint16, "uint16", "u2", "U16", " u16 "},
    {pcclUint32, "uint32", "u4", "U32", " u32 "},         {pcclInt32, "int32", "i4", "I32", " i32 int "},
    {pcclUint64, "uint64", "u8", "U64", " u64 "},         {pcclInt64, "int64", "i8", "I64", " i64 long "},
    {pcclFloat16, "float16", "f2", "F16", " f16 fp16 half "}, {pcclBFloat16, "bfloat16", NULL, "BF16", " bf16 "},
    {pcclFloat, "float32", "f4", "F32", " f32 fp32 float "}, {pcclDouble, "float64", "f8", "F64", " f64 fp64 double "},
};
#define NDT (sizeof DT / sizeof DT[0])

const char *tf_dtype_name(pcclDataType_t dt) {
    for (size_t i = 0; i < NDT; i++)
        if (DT[i].dt == dt) return DT[i].name;
    return NULL;
}

int tf_dtype_parse(const char *s, pcclDataType_t *out) {
    char pad[40];
    if (!s || !*s || strlen(s) > 30) return -1;
    snprintf(pad, sizeof pad, " %s ", s);
    for (size_t i = 0; i < NDT; i++)
        if (!strcmp(s, DT[i].name) || strstr(DT[i].aliases, pad)) {
            *out = DT[i].dt;
            return 0;
        }
    return -1;
}

/* Product of dims times the element size, failing on overflow. */
static int shape_bytes(const uint64_t *shape, int ndim, size_t esize, uint64_t *out) {
    uint64_t n = esize;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && n > UINT64_MAX / shape[i]) return -1;
        n *= shape[i];
    }
    *out = n;
    return 0;
}

/* ---------- npy ---------- */

/* Finds 'key': in the header dict and returns a pointer to the value (spaces skipped), or NULL. */
static const char *npy_value(const char *h, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        if (!(p = strstr(h, pat))) return NULL;
    }
    p += strlen(pat);
    while (isspace((unsigned char)*p)) p++;
    if (*p++ != ':') return NULL;
    while (isspace((unsigned char)*p)) p++;
    return p;
}

int tf_parse_npy(const uint8_t *buf, size_t len, tf_tensor_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) return errf(err, errlen, "not an npy file (bad magic)");
    int major = buf[6];
    size_t hlen, hoff;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        hoff = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return errf(err, errlen, "npy file truncated in its preamble");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hoff = 12;
    } else {
        return errf(err, errlen, "unsupported npy format version %d.%d", major, buf[7]);
    }
    if (hlen > len - hoff) return errf(err, errlen, "npy header length %zu runs past the end of the file", hlen);
    char *h = malloc(hlen + 1);
    if (!h) return errf(err, errlen, "out of memory");
    memcpy(h, buf + hoff, hlen);
    h[hlen] = 0;
    int rc = -1;
    const char *d = npy_value(h, "descr"), *f = npy_value(h, "fortran_order"), *s = npy_value(h, "shape");
    if (!d || !f || !s) {
        errf(err, errlen, "npy header lacks descr, fortran_order or shape");
        goto out;
    }
    if (!strncmp(f, "True", 4)) {
        errf(err, errlen, "fortran-order npy arrays are not supported (C order only)");
        goto out;
    }
    if (strncmp(f, "False", 5) != 0) {
        errf(err, errlen, "npy header: bad fortran_order value");
        goto out;
    }
    /* descr: a quoted string like '<f4' ('|' for byte-order-free types, '=' is native = little here) */
    char q = *d;
    const char *de = (q == '\'' || q == '"') ? strchr(d + 1, q) : NULL;
    if (!de || de - d - 1 != 3 || !strchr("<|=>", d[1])) {
        errf(err, errlen, "npy dtype %.*s is not supported", de ? (int)(de - d + 1) : 8, d);
        goto out;
    }
    if (d[1] == '>' && d[3] != '1') {
        errf(err, errlen, "big-endian npy dtype %.3s is not supported", d + 1);
        goto out;
    }
    int found = 0;
    for (size_t i = 0; i < NDT; i++)
        if (DT[i].npy && !strncmp(d + 2, DT[i].npy, 2)) {
            out->dtype = DT[i].dt;
            found = 1;
        }
    if (!found) {
        errf(err, errlen, "npy dtype '%.3s' has no pccl equivalent", d + 1);
        goto out;
    }
    /* shape: a tuple of non-negative integers, "()" for a scalar, "(n,)" for one dimension */
    if (*s != '(') {
        errf(err, errlen, "npy header: shape is not a tuple");
        goto out;
    }
    s++;
    out->ndim = 0;
    for (;;) {
        while (isspace((unsigned char)*s)) s++;
        if (*s == ')') break;
        if (!isdigit((unsigned char)*s) || out->ndim == TF_MAX_DIMS) {
            errf(err, errlen, "npy header: bad shape");
            goto out;
        }
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno) {
            errf(err, errlen, "npy header: shape dimension out of range");
            goto out;
        }
        out->shape[out->ndim++] = v;
        s = end;
        while (isspace((unsigned char)*s)) s++;
        if (*s == ',') s++;
        else if (*s != ')') {
            errf(err, errlen, "npy header: bad shape");
            goto out;
        }
    }
    out->offset = hoff + hlen;
    if (shape_bytes(out->shape, out->ndim, pccl_dtype_size(out->dtype), &out->nbytes) != 0) {
        errf(err, errlen, "npy shape overflows");
        goto out;
    }
    if (out->nbytes > len - out->offset) {
        errf(err, errlen, "npy data truncated: shape needs %llu bytes, the file has %llu after the header",
             (unsigned long long)out->nbytes, (unsigned long long)(len - out->offset));
        goto out;
    }
    rc = 0;
out:
    free(h);
    return rc;
}

/* ---------- safetensors ---------- */

static int st_entry(const cJSON *e, uint64_t data_len, tf_tensor_t *t, char *err, size_t errlen) {
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs) ||
        cJSON_GetArraySize(offs) != 2)
        return errf(err, errlen, "safetensors tensor '%s' lacks dtype, shape or data_offsets", t->name);
    int found = 0;
    for (size_t i = 0; i < NDT; i++)
        if (!strcmp(dt->valuestring, DT[i].st)) {
            t->dtype = DT[i].dt;
            found = 1;
        }
    if (!found)
        return errf(err, errlen, "safetensors tensor '%s': dtype %s has no pccl equivalent", t->name,
                    dt->valuestring);
    t->ndim = cJSON_GetArraySize(shape);
    if (t->ndim > TF_MAX_DIMS) return errf(err, errlen, "safetensors tensor '%s' has too many dimensions", t->name);
    int k = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        if (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 9007199254740992.0 ||
            d->valuedouble != (double)(uint64_t)d->valuedouble)
            return errf(err, errlen, "safetensors tensor '%s': bad shape", t->name);
        t->shape[k++] = (uint64_t)d->valuedouble;
    }
    uint64_t o[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(offs, i);
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
            v->valuedouble != (double)(uint64_t)v->valuedouble)
            return errf(err, errlen, "safetensors tensor '%s': bad data_offsets", t->name);
        o[i] = (uint64_t)v->valuedouble;
    }
    if (o[0] > o[1] || o[1] > data_len)
        return errf(err, errlen,
                    "safetensors tensor '%s': data_offsets [%llu, %llu] out of range (data area %llu bytes)",
                    t->name, (unsigned long long)o[0], (unsigned long long)o[1], (unsigned long long)data_len);
    uint64_t need = 0;
    if (shape_bytes(t->shape, t->ndim, pccl_dtype_size(t->dtype), &need) != 0 || need != o[1] - o[0])
        return errf(err, errlen, "safetensors tensor '%s': %s with this shape needs %llu bytes, data_offsets span %llu",
                    t->name, dt->valuestring, (unsigned long long)need, (unsigned long long)(o[1] - o[0]));
    t->offset = o[0];
    t->nbytes = o[1] - o[0];
    return 0;
}

int tf_parse_safetensors(const uint8_t *buf, size_t len, tf_tensor_t **out, size_t *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    if (len < 8) return errf(err, errlen, "safetensors file truncated: no header length");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > len - 8)
        return errf(err, errlen, "safetensors header length %llu runs past the end of the file (%zu bytes)",
                    (unsigned long long)hlen, len);
    if (hlen < 2 || buf[8] != '{') return errf(err, errlen, "safetensors header is not a JSON object");
    cJSON *root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return errf(err, errlen, "safetensors header is not valid JSON");
    }
    uint64_t data_off = 8 + hlen, data_len = len - data_off;
    size_t cap = (size_t)cJSON_GetArraySize(root);
    tf_tensor_t *ts = calloc(cap ? cap : 1, sizeof *ts);
    int rc = ts ? 0 : errf(err, errlen, "out of memory");
    size_t k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (rc != 0) break;
        if (!strcmp(e->string, "__metadata__")) continue;
        if (strlen(e->string) >= TF_MAX_NAME) {
            rc = errf(err, errlen, "safetensors tensor name longer than %d bytes", TF_MAX_NAME - 1);
            break;
        }
        snprintf(ts[k].name, sizeof ts[k].name, "%s", e->string);
        rc = st_entry(e, data_len, &ts[k], err, errlen);
        ts[k].offset += data_off;
        k++;
    }
    cJSON_Delete(root);
    if (rc != 0) {
        free(ts);
        return -1;
    }
    *out = ts;
    *n = k;
    return 0;
}

/* ---------- raw ---------- */

int tf_raw_range(size_t len, pcclDataType_t dt, uint64_t offset, int64_t count, tf_tensor_t *out, char *err,
                 size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t es = pccl_dtype_size(dt);
    if (!es) return errf(err, errlen, "unknown dtype");
    if (offset > len)
        return errf(err, errlen, "offset %llu is past the end of the file (%zu bytes)", (unsigned long long)offset,
                    len);
    uint64_t avail = len - offset, nbytes;
    if (count < 0) {
        if (avail % es)
            return errf(err, errlen, "%llu bytes after offset %llu are not a whole number of %s elements",
                        (unsigned long long)avail, (unsigned long long)offset, tf_dtype_name(dt));
        nbytes = avail;
    } else {
        if ((uint64_t)count > avail / es)
            return errf(err, errlen, "%lld %s elements from offset %llu run past the end of the file (%zu bytes)",
                        (long long)count, tf_dtype_name(dt), (unsigned long long)offset, len);
        nbytes = (uint64_t)count * es;
    }
    out->dtype = dt;
    out->ndim = 1;
    out->shape[0] = nbytes / es;
    out->offset = offset;
    out->nbytes = nbytes;
    return 0;
}

/* ---------- files ---------- */

int tf_map(const char *path, const uint8_t **buf, size_t *len, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return errf(err, errlen, "%s is not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return errf(err, errlen, "cannot map %s: %s", path, strerror(errno));
        }
        *buf = p;
        *len = (size_t)st.st_size;
    }
    close(fd);
    return 0;
}

void tf_unmap(const uint8_t *buf, size_t len) {
    if (buf) munmap((void *)buf, len);
}
