/* test_sec_frame.c - AEAD framing of encrypted runs (sec_frame.c) and the link that carries it
 * over sockets (sec_link.c): frames open only unaltered, in order and once; a link delivers a
 * byte stream exactly, blocking or not, and reports a forged or truncated stream; the blocking
 * handshake driver keeps its deadline and leaves the bytes after the handshake in the socket. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback_pair.h"
#include "base/net.h"
#include "sec/sec_frame.h"
#include "sec/sec_link.h"
#include "sec_pair.h"
#include "tinytest.h"

static const char *KEY = "frame-test-key-0123456789abcdef0123456789";

static const int CIPHERS[] = {SEC_CIPHER_AES256GCM, SEC_CIPHER_CHACHA20POLY1305};

/* The cipher states of both ends of one session, as a handshake that agreed on cipher leaves them. */
static void aead_pair(int cipher, sec_aead_t *a, sec_aead_t *b, sec_session_t *sa, sec_session_t *sb) {
    CHECK(session_pair_cipher(KEY, cipher, sa, sb) == 0 && sa->cipher == cipher);
    CHECK(sec_aead_init(a, sa) == 0 && sec_aead_init(b, sb) == 0);
}

static void roundtrip_and_tamper(int cipher) {
    sec_session_t sa, sb;
    sec_aead_t a, b, bb, a2;
    aead_pair(cipher, &a, &b, &sa, &sb);
    uint8_t pt[1000], fr[1000 + SEC_FRAME_OVERHEAD], copy[sizeof fr];
    for (size_t k = 0; k < sizeof pt; k++) pt[k] = (uint8_t)(k * 7);
    CHECK(sec_frame_seal(&a, pt, sizeof pt, fr) == 0);
    CHECK(sec_frame_size(fr) == sizeof fr);
    CHECK(memcmp(fr + SEC_FRAME_HDR, pt, 64) != 0); /* not in the clear */
    /* Every region altered: length, ciphertext, tag. A failed open leaves zeros, not plaintext. */
    static const size_t at[] = {3, 4, 500, 1003, sizeof fr - 1};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
        CHECK(sec_aead_init(&bb, &sb) == 0);
        memcpy(copy, fr, sizeof fr);
        copy[at[k]] ^= 0x10;
        size_t fs = sec_frame_size(copy);
        CHECK(fs != sizeof fr || sec_frame_open(&bb, copy, fs) != 0);
        CHECK(bb.rx_seq == 0);
        if (fs == sizeof fr) CHECK(copy[SEC_FRAME_HDR] == 0 && copy[SEC_FRAME_HDR + 999] == 0);
        sec_aead_free(&bb);
    }
    memcpy(copy, fr, sizeof fr);
    CHECK(sec_frame_open(&b, copy, sizeof copy) == 0);
    CHECK(memcmp(copy + SEC_FRAME_HDR, pt, sizeof pt) == 0);
    /* Replayed: the counter moved on. */
    memcpy(copy, fr, sizeof fr);
    CHECK(sec_frame_open(&b, copy, sizeof copy) != 0);
    /* The other direction uses the other key: a frame does not open where it came from. */
    CHECK(sec_aead_init(&a2, &sa) == 0);
    memcpy(copy, fr, sizeof fr);
    CHECK(sec_frame_open(&a2, copy, sizeof copy) != 0);
    /* Sealed from one buffer into another (the link's path) equals sealed in place. */
    uint8_t inplace[sizeof fr];
    CHECK(sec_aead_init(&bb, &sa) == 0);
    memcpy(inplace + SEC_FRAME_HDR, pt, sizeof pt);
    CHECK(sec_frame_seal(&bb, inplace + SEC_FRAME_HDR, sizeof pt, inplace) == 0);
    CHECK(memcmp(inplace, fr, sizeof fr) == 0);
    sec_aead_free(&bb);
    sec_aead_free(&a2);
    sec_aead_free(&a);
    sec_aead_free(&b);
}

static void order_and_sizes(int cipher) {
    sec_session_t sa, sb;
    sec_aead_t a, b, bb;
    aead_pair(cipher, &a, &b, &sa, &sb);
    uint8_t f1[10 + SEC_FRAME_OVERHEAD], f2[10 + SEC_FRAME_OVERHEAD];
    CHECK(sec_frame_seal(&a, (const uint8_t *)"first-one!", 10, f1) == 0);
    CHECK(sec_frame_seal(&a, (const uint8_t *)"second-one", 10, f2) == 0);
    CHECK(sec_aead_init(&bb, &sb) == 0);
    uint8_t c2[sizeof f2];
    memcpy(c2, f2, sizeof f2);
    CHECK(sec_frame_open(&bb, c2, sizeof c2) != 0); /* reordered */
    sec_aead_free(&bb);
    CHECK(sec_frame_open(&b, f1, sizeof f1) == 0 && sec_frame_open(&b, f2, sizeof f2) == 0);
    CHECK(memcmp(f1 + SEC_FRAME_HDR, "first-one!", 10) == 0 && memcmp(f2 + SEC_FRAME_HDR, "second-one", 10) == 0);
    /* Frames of the largest size, and sizes outside the range refused by the sealer. */
    size_t big = SEC_FRAME_MAX;
    uint8_t *p = malloc(big), *fr = malloc(big + SEC_FRAME_OVERHEAD);
    for (size_t k = 0; k < big; k++) p[k] = (uint8_t)(k >> 3);
    CHECK(sec_frame_seal(&a, p, big, fr) == 0 && sec_frame_open(&b, fr, big + SEC_FRAME_OVERHEAD) == 0);
    CHECK(memcmp(fr + SEC_FRAME_HDR, p, big) == 0);
    CHECK(sec_frame_seal(&a, p, 0, fr) != 0 && sec_frame_seal(&a, p, big + 1, fr) != 0);
    /* The last counter value is never used: the sender refuses rather than wrap the nonce. */
    a.tx_seq = UINT64_MAX - 1;
    CHECK(sec_frame_seal(&a, p, 16, fr) == 0 && a.tx_seq == UINT64_MAX);
    CHECK(sec_frame_seal(&a, p, 16, fr) != 0 && a.tx_seq == UINT64_MAX);
    free(p);
    free(fr);
    uint8_t h[4] = {0, 0, 0, 0};
    CHECK(sec_frame_size(h) == 0);
    wire_put_u32(h, (uint32_t)SEC_FRAME_MAX + 1);
    CHECK(sec_frame_size(h) == 0);
    wire_put_u32(h, (uint32_t)SEC_FRAME_MAX);
    CHECK(sec_frame_size(h) == SEC_FRAME_MAX + SEC_FRAME_OVERHEAD);
    sec_aead_free(&a);
    sec_aead_free(&b);
}

/* The two ciphers are different ciphers: a frame of one does not open under the other. */
static void test_frames_both_ciphers(void) {
    for (size_t c = 0; c < sizeof CIPHERS / sizeof CIPHERS[0]; c++) {
        roundtrip_and_tamper(CIPHERS[c]);
        order_and_sizes(CIPHERS[c]);
    }
    sec_session_t sa, sb;
    CHECK(session_pair_cipher(KEY, SEC_CIPHER_AES256GCM, &sa, &sb) == 0);
    sec_session_t sb_other = sb;
    sb_other.cipher = SEC_CIPHER_CHACHA20POLY1305;
    sec_aead_t a, b;
    CHECK(sec_aead_init(&a, &sa) == 0 && sec_aead_init(&b, &sb_other) == 0);
    uint8_t fr[32 + SEC_FRAME_OVERHEAD], pt[32] = {9};
    CHECK(sec_frame_seal(&a, pt, sizeof pt, fr) == 0 && sec_frame_open(&b, fr, sizeof fr) != 0);
    sec_aead_free(&a);
    sec_aead_free(&b);
    sec_session_t none = sa;
    none.cipher = SEC_CIPHER_NONE;
    CHECK(sec_aead_init(&a, &none) != 0);
    sec_aead_free(&a);
}


/* A session pair and a loopback connection between its two ends. */
typedef struct fixture {
    sec_session_t a, b;
    int ls, cfd, afd;
} fixture_t;

/* cipher 0: this machine's preference. */
static int fixture_open_cipher(fixture_t *f, int cipher) {
    CHECK(session_pair_cipher(KEY, cipher, &f->a, &f->b) == 0);
    return loopback_pair(&f->ls, &f->cfd, &f->afd);
}

static void fixture_close(fixture_t *f) {
    close(f->cfd);
    close(f->afd);
    close(f->ls);
}

typedef struct xfer {
    sec_link_t *l;
    int fd;
    const uint8_t *data;
    size_t len;
    int rc;
} xfer_t;

static void *send_all_thread(void *p) {
    xfer_t *x = p;
    x->rc = link_send_all(x->l, x->fd, x->data, x->len);
    return NULL;
}

static int fixture_open(fixture_t *f) { return fixture_open_cipher(f, 0); }

/* Blocking: several frames' worth, received in odd-sized reads, under each cipher. */
static void link_blocking(int cipher) {
    fixture_t f;
    CHECK(fixture_open_cipher(&f, cipher) == 0);
    int cfd = f.cfd, afd = f.afd;
    net_set_timeouts(cfd, 5000);
    net_set_timeouts(afd, 5000);
    size_t n = 3 * SEC_FRAME_MAX + 12345;
    uint8_t *src = malloc(n), *dst = malloc(n);
    for (size_t k = 0; k < n; k++) src[k] = (uint8_t)(k * 2654435761u >> 13);
    sec_link_t *la = sec_link_new(&f.a), *lb = sec_link_new(&f.b);
    xfer_t x = {.l = la, .fd = cfd, .data = src, .len = n};
    pthread_t t;
    pthread_create(&t, NULL, send_all_thread, &x);
    size_t got = 0, step = 1;
    while (got < n) {
        size_t want = n - got < step ? n - got : step;
        if (link_recv_all(lb, afd, dst + got, want) != 0) break;
        got += want;
        step = step * 3 + 1;
    }
    pthread_join(t, NULL);
    CHECK(x.rc == 0 && got == n && memcmp(src, dst, n) == 0);
    /* What crossed the socket was not the plaintext: a raw look at a fresh frame. */
    CHECK(link_send_all(la, cfd, src, 64) == 0);
    uint8_t raw[64 + SEC_FRAME_OVERHEAD];
    CHECK(net_recv_all(afd, raw, sizeof raw) == 0 && memcmp(raw + SEC_FRAME_HDR, src, 64) != 0);
    sec_link_free(la);
    sec_link_free(lb);
    free(src);
    free(dst);
    fixture_close(&f);
}

static void test_link_blocking(void) {
    for (size_t c = 0; c < sizeof CIPHERS / sizeof CIPHERS[0]; c++) link_blocking(CIPHERS[c]);
}

/* Non-blocking, as the ring uses it: EAGAIN only when nothing is buffered, then poll wakes it. */
static void test_link_nonblocking(void) {
    fixture_t f;
    CHECK(fixture_open(&f) == 0);
    int cfd = f.cfd, afd = f.afd;
    net_set_nonblock(cfd, 1);
    net_set_nonblock(afd, 1);
    sec_link_t *la = sec_link_new(&f.a), *lb = sec_link_new(&f.b);
    uint8_t tmp[64];
    errno = 0;
    CHECK(sec_link_recv(lb, afd, tmp, sizeof tmp) == -1 && errno == EAGAIN);
    size_t n = 8u << 20, sent = 0, got = 0;
    uint8_t *src = malloc(n), *dst = malloc(n);
    for (size_t k = 0; k < n; k++) src[k] = (uint8_t)(k ^ (k >> 9));
    uint64_t deadline = net_now_ms() + 20000;
    while ((got < n || sec_link_pending(la)) && net_now_ms() < deadline) {
        int moved = 0;
        if (sent < n || sec_link_pending(la)) {
            ssize_t w = sec_link_send(la, cfd, src + sent, n - sent);
            if (w > 0) sent += (size_t)w, moved = 1;
            else CHECK(w == 0 || errno == EAGAIN);
        }
        ssize_t r = sec_link_recv(lb, afd, dst + got, 100000);
        if (r > 0) got += (size_t)r, moved = 1;
        else CHECK(r == -1 && errno == EAGAIN);
        if (!moved) {
            struct pollfd p[2] = {{.fd = cfd, .events = sec_link_pending(la) ? POLLOUT : 0},
                                  {.fd = afd, .events = POLLIN}};
            poll(p, 2, 100);
        }
    }
    CHECK(sent == n && got == n && memcmp(src, dst, n) == 0);
    sec_link_free(la);
    sec_link_free(lb);
    free(src);
    free(dst);
    fixture_close(&f);
}

/* A frame altered on the wire fails the stream; a stream cut inside a frame is not an end. */
static void test_link_forged_and_truncated(void) {
    fixture_t f;
    CHECK(fixture_open(&f) == 0);
    int cfd = f.cfd, afd = f.afd;
    net_set_timeouts(afd, 5000);
    uint8_t pt[100] = {1, 2, 3}, fr[100 + SEC_FRAME_OVERHEAD], out[100];
    sec_aead_t a2;
    CHECK(sec_aead_init(&a2, &f.a) == 0 && sec_frame_seal(&a2, pt, sizeof pt, fr) == 0);
    sec_aead_free(&a2);
    fr[50] ^= 1;
    CHECK(net_send_all(cfd, fr, sizeof fr) == 0);
    sec_link_t *lb = sec_link_new(&f.b);
    errno = 0;
    CHECK(sec_link_recv(lb, afd, out, sizeof out) == -1 && errno == EBADMSG);
    sec_link_free(lb);
    /* Half a frame, then the end. */
    lb = sec_link_new(&f.b);
    CHECK(sec_aead_init(&a2, &f.a) == 0 && sec_frame_seal(&a2, pt, sizeof pt, fr) == 0);
    sec_aead_free(&a2);
    CHECK(net_send_all(cfd, fr, 60) == 0);
    shutdown(cfd, SHUT_WR);
    /* (the forged frame's bytes were consumed above; this link sees only the half frame) */
    errno = 0;
    CHECK(sec_link_recv(lb, afd, out, sizeof out) == -1 && errno == EPROTO);
    sec_link_free(lb);
    fixture_close(&f);
}

typedef struct hs_side {
    int fd, role, rc;
    const char *key;
    uint64_t deadline;
    sec_hs_t hs;
    char err[160];
} hs_side_t;

static void *hs_thread(void *p) {
    hs_side_t *s = p;
    sec_cfg_t k = test_key(s->key);
    sec_hs_params_t prm = {.role = s->role, .purpose = SEC_PURPOSE_CONTROL, .flags = s->role == SEC_INITIATOR ? -1 : 0};
    s->rc = sec_hs_start(&s->hs, &k, &prm) == 0 ? sec_handshake_fd(s->fd, &s->hs, s->deadline, NULL, s->err,
                                                                     sizeof s->err) : -PERR_INVALID;
    return NULL;
}

static void test_handshake_fd(void) {
    int ls, cfd, afd;
    CHECK(loopback_pair(&ls, &cfd, &afd) == 0);
    uint64_t dl = net_now_ms() + 5000;
    hs_side_t i = {.fd = cfd, .role = SEC_INITIATOR, .key = KEY, .deadline = dl};
    hs_side_t r = {.fd = afd, .role = SEC_RESPONDER, .key = KEY, .deadline = dl};
    pthread_t ti, tr;
    pthread_create(&ti, NULL, hs_thread, &i);
    pthread_create(&tr, NULL, hs_thread, &r);
    pthread_join(ti, NULL);
    pthread_join(tr, NULL);
    CHECK(i.rc == 0 && r.rc == 0);
    /* The initiator may speak right after MSG3: the responder read only the handshake, so the
     * protocol's first bytes are still in the socket. */
    CHECK(net_send_all(cfd, "after", 5) == 0);
    char buf[5];
    net_set_timeouts(afd, 2000);
    CHECK(net_recv_all(afd, buf, 5) == 0 && memcmp(buf, "after", 5) == 0);
    close(cfd);
    close(afd);
    close(ls);
    /* A silent other side: the deadline ends it. */
    CHECK(loopback_pair(&ls, &cfd, &afd) == 0);
    uint64_t t0 = net_now_ms();
    hs_side_t lone = {.fd = afd, .role = SEC_RESPONDER, .key = KEY, .deadline = t0 + 300};
    hs_thread(&lone);
    uint64_t took = net_now_ms() - t0;
    CHECK(lone.rc == -PERR_TIMEOUT && strstr(lone.err, "in time") != NULL && took >= 250 && took < 3000);
    /* The other side hangs up halfway (a wrong key: the initiator stops after MSG2). */
    hs_side_t bad = {.fd = cfd, .role = SEC_INITIATOR, .key = "another-key-0123456789abcdef0123456789",
                     .deadline = net_now_ms() + 5000};
    hs_side_t good = {.fd = afd, .role = SEC_RESPONDER, .key = KEY, .deadline = net_now_ms() + 5000};
    pthread_create(&ti, NULL, hs_thread, &bad);
    pthread_create(&tr, NULL, hs_thread, &good);
    pthread_join(ti, NULL);
    close(cfd); /* what a failed side does */
    pthread_join(tr, NULL);
    CHECK(bad.rc == -PERR_REFUSED && good.rc == -PERR_IO && net_now_ms() - t0 < 3000);
    CHECK(strstr(good.err, "closed") != NULL);
    close(afd);
    close(ls);
}

int main(void) {
    RUN_TEST(test_frames_both_ciphers);
    RUN_TEST(test_link_blocking);
    RUN_TEST(test_link_nonblocking);
    RUN_TEST(test_link_forged_and_truncated);
    RUN_TEST(test_handshake_fd);
    TEST_MAIN_END();
}
