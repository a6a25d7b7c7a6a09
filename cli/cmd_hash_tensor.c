/*
 * cmd_hash_tensor.c - `pccl hash-tensor`: the SimpleHash pccl's shared-state
 * sync would compute for tensors stored in a file, to check a checkpoint
 * against the hashes a run logs without starting a run.
 */
#include "cli.h"
#include "opts/shared.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pccl_kernels.h"
#include "tensor_file.h"

static const cli_flag_t flags[] = {
#include "opts/hash_tensor.def"
    {0},
};

static int run(int argc, char **argv);

const cli_command_t cli_cmd_hash_tensor = {
    .name = "hash-tensor",
    .alias = NULL,
    .summary = "print the SimpleHash of each tensor in a raw, npy or safetensors file",
    .usage = "FILE [--format] [--dtype] [--offset] [--count] [--device] [--json]",
    .flags = flags,
    .run = run,
};

enum { FMT_AUTO, FMT_RAW, FMT_NPY, FMT_SAFETENSORS };

/* Offsets and counts as C literals (strtoull base 0: 0x40, 0100), unlike the decimal cli_parse_u64; an overflow
 * saturates at UINT64_MAX. */
static int parse_uint_literal(const char *s, uint64_t *out) {
    char *end;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 0);
    if (*end) return -1;
    *out = v;
    return 0;
}

/* Hash of one tensor's bytes on the chosen device; 0 on success. */
static int hash_bytes(const uint8_t *p, uint64_t n, int cuda, uint64_t *h, char *err, size_t errlen) {
    if (!cuda) {
        *h = pccl_simplehash(p, (size_t)n);
        return 0;
    }
#ifdef PCCL_HAS_CUDA
    if (!pccl_cuda_available()) return snprintf(err, errlen, "--device cuda: no CUDA device is available"), -1;
    void *d = NULL;
    int rc = pccl_cuda_alloc(&d, (size_t)n);
    if (rc == 0) rc = pccl_cuda_copy_h2d(d, p, (size_t)n);
    if (rc == 0) rc = pccl_simplehash_cuda(d, (size_t)n, h);
    pccl_cuda_free(d);
    if (rc != 0) snprintf(err, errlen, "--device cuda: hashing on the GPU failed");
    return rc;
#else
    (void)p, (void)n, (void)h;
    snprintf(err, errlen, "--device cuda: this pccl was built without CUDA support");
    return -1;
#endif
}

static void shape_str(const tf_tensor_t *t, char *out, size_t len) {
    size_t k = (size_t)snprintf(out, len, "[");
    for (int i = 0; i < t->ndim && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%s%" PRIu64, i ? "," : "", t->shape[i]);
    if (k < len) snprintf(out + k, len - k, "]");
}

/* Flag values of `pccl hash-tensor`, filled by on_flag. */
typedef struct {
    int fmt, json, cuda, have_dtype, have_offset;
    pcclDataType_t dtype;
    uint64_t offset;
    int64_t scount; /* -1: to the end of the file */
} hash_args_t;

static int on_flag(void *ctx, const char *name, const char *value) {
    const cli_command_t *cmd = &cli_cmd_hash_tensor;
    hash_args_t *a = ctx;
    uint64_t count = 0;
    if (!strcmp(name, "format")) {
        if (!strcmp(value, "raw")) a->fmt = FMT_RAW;
        else if (!strcmp(value, "npy")) a->fmt = FMT_NPY;
        else if (!strcmp(value, "safetensors")) a->fmt = FMT_SAFETENSORS;
        else return cli_usage_error(cmd, "--format wants raw, npy or safetensors, got '%s'", value);
    } else if (!strcmp(name, "dtype")) {
        if (tf_dtype_parse(value, &a->dtype) != 0) return cli_usage_error(cmd, "unknown dtype '%s'", value);
        a->have_dtype = 1;
    } else if (!strcmp(name, "offset")) {
        if (parse_uint_literal(value, &a->offset) != 0)
            return cli_usage_error(cmd, "--offset wants a byte count, got '%s'", value);
        a->have_offset = 1;
    } else if (!strcmp(name, "count")) {
        if (parse_uint_literal(value, &count) != 0 || count > INT64_MAX)
            return cli_usage_error(cmd, "--count wants a number of elements, got '%s'", value);
        a->scount = (int64_t)count;
    } else if (!strcmp(name, "device")) {
        if (!strcmp(value, "cpu")) a->cuda = 0;
        else if (!strcmp(value, "cuda")) a->cuda = 1;
        else return cli_usage_error(cmd, "--device wants cpu or cuda, got '%s'", value);
    } else if (!strcmp(name, "json")) {
        a->json = 1;
    }
    return 0;
}

static int run(int argc, char **argv) {
    const cli_command_t *cmd = &cli_cmd_hash_tensor;
    hash_args_t a = {.fmt = FMT_AUTO, .dtype = pcclUint8, .scount = -1};
    int first = argc;
    int rc = cli_parse_flags(cmd, argc, argv, on_flag, &a, &first);
    if (rc != CLI_FLAGS_GO_ON) return rc;
    if (first >= argc) return cli_usage_error(cmd, "FILE is required");
    if (first + 1 < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[first + 1]);
    const char *path = argv[first];

    char err[512];
    const uint8_t *buf;
    size_t len;
    if (tf_map(path, &buf, &len, err, sizeof err) != 0) {
        cli_err("pccl %s: %s\n", cmd->name, err);
        return CLI_EXIT_FAIL;
    }
    if (a.fmt == FMT_AUTO) {
        size_t pl = strlen(path);
        if (len >= 6 && !memcmp(buf, "\x93NUMPY", 6)) a.fmt = FMT_NPY;
        else if (pl > 12 && !strcmp(path + pl - 12, ".safetensors")) a.fmt = FMT_SAFETENSORS;
        else a.fmt = FMT_RAW;
    }
    rc = CLI_EXIT_OK;
    if (a.fmt == FMT_RAW && !a.have_dtype) rc = cli_usage_error(cmd, "raw data needs --dtype");
    else if (a.fmt != FMT_RAW && (a.have_offset || a.scount >= 0))
        rc = cli_usage_error(cmd, "--offset and --count apply to raw data only");
    if (rc != CLI_EXIT_OK) {
        tf_unmap(buf, len);
        return rc;
    }

    tf_tensor_t one, *ts = &one;
    size_t n = 1;
    int prc;
    if (a.fmt == FMT_NPY) prc = tf_parse_npy(buf, len, &one, err, sizeof err);
    else if (a.fmt == FMT_SAFETENSORS) prc = tf_parse_safetensors(buf, len, &ts, &n, err, sizeof err);
    else prc = tf_raw_range(len, a.dtype, a.offset, a.scount, &one, err, sizeof err);
    if (prc == 0 && a.fmt != FMT_SAFETENSORS) {
        const char *base = strrchr(path, '/');
        snprintf(one.name, sizeof one.name, "%s", base ? base + 1 : path);
    }
    for (size_t i = 0; prc == 0 && a.have_dtype && a.fmt != FMT_RAW && i < n; i++)
        if (ts[i].dtype != a.dtype) {
            snprintf(err, sizeof err, "tensor '%s' is %s, --dtype says %s", ts[i].name, tf_dtype_name(ts[i].dtype),
                     tf_dtype_name(a.dtype));
            prc = -1;
        }
    cJSON *root = NULL, *arr = NULL;
    if (prc == 0 && a.json) {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "file", path);
        const char *fname = a.fmt == FMT_NPY ? "npy" : a.fmt == FMT_SAFETENSORS ? "safetensors" : "raw";
        cJSON_AddStringToObject(root, "format", fname);
        cJSON_AddStringToObject(root, "device", a.cuda ? "cuda" : "cpu");
        arr = cJSON_AddArrayToObject(root, "tensors");
    }
    for (size_t i = 0; prc == 0 && i < n; i++) {
        const tf_tensor_t *t = &ts[i];
        uint64_t h;
        const uint8_t *bytes = buf ? buf + t->offset : (const uint8_t *)""; /* an empty file maps to NULL */
        if ((prc = hash_bytes(bytes, t->nbytes, a.cuda, &h, err, sizeof err)) != 0) break;
        char hex[17], shape[512];
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        shape_str(t, shape, sizeof shape);
        if (!a.json) {
            printf("%s %s %s %s\n", t->name, tf_dtype_name(t->dtype), shape, hex);
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", tf_dtype_name(t->dtype));
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddNumberToObject(o, "offset", (double)t->offset);
        cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
        cJSON_AddStringToObject(o, "hash", hex);
        cJSON_AddItemToArray(arr, o);
    }
    if (prc != 0) {
        cli_err("pccl %s: %s: %s\n", cmd->name, path, err);
        rc = CLI_EXIT_FAIL;
    } else if (root) {
        char *s = cJSON_PrintUnformatted(root);
        if (s) printf("%s\n", s);
        free(s);
    }
    cJSON_Delete(root);
    if (ts != &one) free(ts);
    tf_unmap(buf, len);
    return rc;
}
