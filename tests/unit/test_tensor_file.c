/* test_tensor_file.c - the npy / safetensors / raw locators of `pccl hash-tensor`
 * (cli/tensor_file.c, compiled in here) on files crafted byte by byte: every
 * header version, dtype and shape form, and every kind of bad file the command
 * must refuse with a reason instead of reading out of bounds. */
#include "../../cli/tensor_file.c"

#include "tinytest.h"

static uint8_t buf[4096];
static char err[512];

/* npy bytes: magic, version, header (padded so data starts 64-aligned), n data bytes of 0xab. */
static size_t npy(int major, const char *dict, size_t ndata) {
    size_t pre = major == 1 ? 10 : 12, hl = strlen(dict) + 1;
    hl += (64 - (pre + hl) % 64) % 64;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    for (int i = 0; i < (major == 1 ? 2 : 4); i++) buf[8 + i] = (uint8_t)(hl >> (8 * i));
    memset(buf + pre, ' ', hl);
    memcpy(buf + pre, dict, strlen(dict));
    buf[pre + hl - 1] = '\n';
    memset(buf + pre + hl, 0xab, ndata);
    return pre + hl + ndata;
}

static size_t st(const char *json, size_t ndata) {
    uint64_t hl = strlen(json);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(hl >> (8 * i));
    memcpy(buf + 8, json, hl);
    memset(buf + 8 + hl, 0xcd, ndata);
    return 8 + hl + ndata;
}

static int has(const char *s) { return strstr(err, s) != NULL; }

static void test_npy_ok(void) {
    tf_tensor_t t;
    size_t n = npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 48);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) == 0);
    CHECK(t.dtype == pcclFloat && t.ndim == 2 && t.shape[0] == 3 && t.shape[1] == 4);
    CHECK_EQ_U64(t.offset, n - 48);
    CHECK_EQ_U64(t.offset % 64, 0);
    CHECK_EQ_U64(t.nbytes, 48);
    n = npy(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }", 40);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) == 0 && t.dtype == pcclInt64 && t.ndim == 1 && t.shape[0] == 5);
    n = npy(3, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) == 0 && t.dtype == pcclUint8 && t.ndim == 0 && t.nbytes == 1);
    n = npy(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 0), }", 0);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) == 0 && t.dtype == pcclFloat16 && t.nbytes == 0);
    /* trailing bytes after the data are tolerated (the shape says what the tensor is) */
    n = npy(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }", 6);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) == 0 && t.dtype == pcclUint16 && t.nbytes == 4);
    const struct { const char *descr; pcclDataType_t dt; } types[] = {
        {"<f8", pcclDouble}, {"<i4", pcclInt32}, {"<u4", pcclUint32}, {"<i2", pcclInt16}, {"|i1", pcclInt8},
        {"<u8", pcclUint64}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char d[128];
        snprintf(d, sizeof d, "{'descr': '%s', 'fortran_order': False, 'shape': (1,), }", types[i].descr);
        n = npy(1, d, 8);
        CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) == 0 && t.dtype == types[i].dt);
    }
}

static void test_npy_bad(void) {
    tf_tensor_t t;
    size_t n = npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }", 48);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("fortran"));
    n = npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("big-endian"));
    n = npy(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", 24);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("no pccl equivalent"));
    n = npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 47); /* one byte short */
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("truncated"));
    n = npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 0);
    CHECK(tf_parse_npy(buf, 40, &t, err, sizeof err) != 0 && has("past the end")); /* header cut off */
    n = npy(1, "{'descr': '<f4', 'shape': (3, 4), }", 48);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("lacks"));
    n = npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, x), }", 48);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("shape"));
    n = npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", 0);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("overflow"));
    n = npy(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
    CHECK(tf_parse_npy(buf, n, &t, err, sizeof err) != 0 && has("version"));
    memcpy(buf, "NUMPY!", 6);
    CHECK(tf_parse_npy(buf, 64, &t, err, sizeof err) != 0 && has("magic"));
    CHECK(tf_parse_npy(buf, 3, &t, err, sizeof err) != 0);
}

static void test_safetensors(void) {
    tf_tensor_t *ts;
    size_t n, len;
    len = st("{\"__metadata__\":{\"a\":\"b\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}",
             32);
    CHECK(tf_parse_safetensors(buf, len, &ts, &n, err, sizeof err) == 0);
    CHECK_EQ_U64(n, 2);
    if (n == 2) {
        CHECK(!strcmp(ts[0].name, "w") && ts[0].dtype == pcclFloat && ts[0].ndim == 2 && ts[0].nbytes == 24);
        CHECK_EQ_U64(ts[0].offset, len - 32);
        CHECK(!strcmp(ts[1].name, "b") && ts[1].dtype == pcclBFloat16 && ts[1].offset == len - 8);
    }
    free(ts);
    len = st("{}", 0);
    CHECK(tf_parse_safetensors(buf, len, &ts, &n, err, sizeof err) == 0 && n == 0);
    free(ts);

    struct {
        const char *json;
        size_t ndata;
        const char *why;
    } bad[] = {
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 23, "out of range"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,4]}}", 24, "out of range"},
        {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, "needs 48 bytes"},
        {"{\"w\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, "no pccl equivalent"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "bad shape"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "lacks"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "not valid JSON"},
        {"[1,2]", 0, "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        len = st(bad[i].json, bad[i].ndata);
        int rc = tf_parse_safetensors(buf, len, &ts, &n, err, sizeof err);
        CHECK(rc != 0 && has(bad[i].why));
        if (rc == 0 || !has(bad[i].why)) fprintf(stderr, "  case %zu: %s\n", i, err);
    }
    /* header length past EOF, and a file too short to hold the length */
    len = st("{}", 0);
    buf[0] = 200;
    CHECK(tf_parse_safetensors(buf, len, &ts, &n, err, sizeof err) != 0 && has("past the end"));
    buf[0] = 0xff, buf[7] = 0xff; /* 2^64-ish: must not wrap around */
    CHECK(tf_parse_safetensors(buf, len, &ts, &n, err, sizeof err) != 0 && has("past the end"));
    CHECK(tf_parse_safetensors(buf, 5, &ts, &n, err, sizeof err) != 0 && has("truncated"));
}

static void test_raw_and_dtypes(void) {
    tf_tensor_t t;
    CHECK(tf_raw_range(48, pcclFloat, 0, -1, &t, err, sizeof err) == 0 && t.nbytes == 48 && t.shape[0] == 12);
    CHECK(tf_raw_range(48, pcclFloat, 8, 2, &t, err, sizeof err) == 0 && t.offset == 8 && t.nbytes == 8);
    CHECK(tf_raw_range(48, pcclFloat, 8, 10, &t, err, sizeof err) == 0);
    CHECK(tf_raw_range(48, pcclFloat, 8, 11, &t, err, sizeof err) != 0 && has("past the end"));
    CHECK(tf_raw_range(48, pcclFloat, 49, 0, &t, err, sizeof err) != 0 && has("past the end"));
    CHECK(tf_raw_range(48, pcclDouble, 4, -1, &t, err, sizeof err) != 0 && has("whole number"));
    CHECK(tf_raw_range(48, pcclDouble, 0, INT64_MAX, &t, err, sizeof err) != 0);
    pcclDataType_t dt;
    CHECK(tf_dtype_parse("f32", &dt) == 0 && dt == pcclFloat);
    CHECK(tf_dtype_parse("bfloat16", &dt) == 0 && dt == pcclBFloat16);
    CHECK(tf_dtype_parse("u8", &dt) == 0 && dt == pcclUint8);
    CHECK(tf_dtype_parse("double", &dt) == 0 && dt == pcclDouble);
    CHECK(tf_dtype_parse("f3", &dt) != 0 && tf_dtype_parse("", &dt) != 0 && tf_dtype_parse("float32 ", &dt) != 0);
    for (int d = pcclUint8; d <= pcclDouble; d++) {
        CHECK(tf_dtype_name((pcclDataType_t)d) != NULL);
        CHECK(tf_dtype_parse(tf_dtype_name((pcclDataType_t)d), &dt) == 0 && (int)dt == d);
    }
}

static void test_map(void) {
    char path[] = "/tmp/pccl-tf-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, "abcdef", 6) == 6);
    close(fd);
    const uint8_t *p;
    size_t len;
    CHECK(tf_map(path, &p, &len, err, sizeof err) == 0 && len == 6 && p && !memcmp(p, "abcdef", 6));
    tf_unmap(p, len);
    unlink(path);
    CHECK(tf_map(path, &p, &len, err, sizeof err) != 0 && has("cannot open"));
    CHECK(tf_map("/tmp", &p, &len, err, sizeof err) != 0 && has("regular file"));
}

int main(void) {
    RUN_TEST(test_npy_ok);
    RUN_TEST(test_npy_bad);
    RUN_TEST(test_safetensors);
    RUN_TEST(test_raw_and_dtypes);
    RUN_TEST(test_map);
    TEST_MAIN_END();
}
