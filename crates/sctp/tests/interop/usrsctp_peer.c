/*
 * usrsctp peer for pepc-sctp interop tests, SCTP over UDP (RFC 6951).
 *
 *   usrsctp_peer client <local_udp> <remote_udp> <sctp_port> <n>
 *       connects to 127.0.0.1:<sctp_port> via UDP port <remote_udp>, sends n messages
 *       (PPID 18, streams 0/1, S1AP-sized, a few larger than one packet), and expects
 *       each echoed back reversed on the same stream with PPID 18.
 *   usrsctp_peer server <local_udp> <sctp_port> <n>
 *       accepts one association, echoes n messages reversed (checking PPID 18 and the
 *       stream), then waits for the peer's SHUTDOWN.
 *
 * Prints "OK <n>" on success; any failure prints "FAIL ..." and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <usrsctp.h>

#define PPID_S1AP 18

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "FAIL ");
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    fflush(stdout);
    va_end(ap);
    _exit(1);
}

static size_t msg_len(int i) {
    /* S1AP-sized messages, every 10th one larger than the 1200-byte PMTU. */
    return (i % 10 == 9) ? 3000 + i : 40 + (i * 37) % 400;
}

static void fill(unsigned char *b, size_t n, int i) {
    for (size_t j = 0; j < n; j++) b[j] = (unsigned char)(i * 13 + j * 7);
}

static void setup_socket(struct socket *s) {
    struct sctp_initmsg im;
    memset(&im, 0, sizeof im);
    im.sinit_num_ostreams = 2;
    im.sinit_max_instreams = 2;
    if (usrsctp_setsockopt(s, IPPROTO_SCTP, SCTP_INITMSG, &im, sizeof im) < 0)
        fail("SCTP_INITMSG: %s", strerror(errno));
    int on = 1;
    if (usrsctp_setsockopt(s, IPPROTO_SCTP, SCTP_RECVRCVINFO, &on, sizeof on) < 0)
        fail("SCTP_RECVRCVINFO: %s", strerror(errno));
    if (usrsctp_setsockopt(s, IPPROTO_SCTP, SCTP_NODELAY, &on, sizeof on) < 0)
        fail("SCTP_NODELAY: %s", strerror(errno));
}

/* Receives one whole message; returns its length, 0 on shutdown. */
static ssize_t recv_msg(struct socket *s, unsigned char *buf, size_t cap,
                        struct sctp_rcvinfo *rcv) {
    size_t got = 0;
    for (;;) {
        struct sockaddr_in from;
        socklen_t fromlen = sizeof from;
        socklen_t infolen = sizeof *rcv;
        unsigned int infotype = 0;
        int flags = 0;
        ssize_t n = usrsctp_recvv(s, buf + got, cap - got, (struct sockaddr *)&from, &fromlen,
                                  rcv, &infolen, &infotype, &flags);
        if (n < 0) fail("recvv: %s", strerror(errno));
        if (n == 0) return got ? (ssize_t)got : 0;
        if (flags & MSG_NOTIFICATION) continue;
        if (infotype != SCTP_RECVV_RCVINFO) fail("no rcvinfo (infotype %u)", infotype);
        got += (size_t)n;
        if (flags & MSG_EOR) return (ssize_t)got;
        if (got == cap) fail("message too large");
    }
}

static void send_msg(struct socket *s, const unsigned char *b, size_t n, uint16_t sid) {
    struct sctp_sndinfo si;
    memset(&si, 0, sizeof si);
    si.snd_sid = sid;
    si.snd_ppid = htonl(PPID_S1AP);
    if (usrsctp_sendv(s, b, n, NULL, 0, &si, sizeof si, SCTP_SENDV_SNDINFO, 0) < 0)
        fail("sendv: %s", strerror(errno));
}

static void set_encaps(struct socket *s, uint16_t remote_udp) {
    struct sctp_udpencaps enc;
    memset(&enc, 0, sizeof enc);
    enc.sue_address.ss_family = AF_INET;
    enc.sue_port = htons(remote_udp);
    if (usrsctp_setsockopt(s, IPPROTO_SCTP, SCTP_REMOTE_UDP_ENCAPS_PORT, &enc, sizeof enc) < 0)
        fail("SCTP_REMOTE_UDP_ENCAPS_PORT: %s", strerror(errno));
}

static void finish(void) {
    for (int i = 0; i < 300 && usrsctp_finish() != 0; i++) usleep(10000);
}

static unsigned char buf[65536], want[65536];

int main(int argc, char **argv) {
    alarm(60); /* hard bound on the run time */
    if (argc < 2) fail("usage");
    int client = strcmp(argv[1], "client") == 0;
    if (client && argc != 6) fail("usage: client <local_udp> <remote_udp> <sctp_port> <n>");
    if (!client && argc != 5) fail("usage: server <local_udp> <sctp_port> <n>");
    uint16_t local_udp = (uint16_t)atoi(argv[2]);
    usrsctp_init(local_udp, NULL, NULL);
    usrsctp_sysctl_set_sctp_blackhole(2);
    usrsctp_sysctl_set_sctp_ecn_enable(0);
    struct socket *s = usrsctp_socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
    if (!s) fail("usrsctp_socket: %s", strerror(errno));
    setup_socket(s);
    struct sctp_rcvinfo rcv;
    if (client) {
        uint16_t remote_udp = (uint16_t)atoi(argv[3]);
        uint16_t sctp_port = (uint16_t)atoi(argv[4]);
        int n = atoi(argv[5]);
        set_encaps(s, remote_udp);
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        sin.sin_port = htons(sctp_port);
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (usrsctp_connect(s, (struct sockaddr *)&sin, sizeof sin) < 0)
            fail("connect: %s", strerror(errno));
        for (int i = 0; i < n; i++) {
            size_t len = msg_len(i);
            fill(buf, len, i);
            send_msg(s, buf, len, (uint16_t)(i % 2));
        }
        /* Replies arrive in order per stream; streams may interleave. */
        int next[2] = {0, 1};
        for (int k = 0; k < n; k++) {
            ssize_t len = recv_msg(s, buf, sizeof buf, &rcv);
            if (len <= 0) fail("peer closed after %d replies", k);
            if (ntohl(rcv.rcv_ppid) != PPID_S1AP) fail("reply PPID %u", ntohl(rcv.rcv_ppid));
            int sid = rcv.rcv_sid;
            if (sid > 1) fail("reply on stream %d", sid);
            int i = next[sid];
            next[sid] += 2;
            size_t wl = msg_len(i);
            if ((size_t)len != wl) fail("reply %d: length %zd, want %zu", i, len, wl);
            fill(want, wl, i);
            for (size_t j = 0; j < wl; j++)
                if (buf[j] != want[wl - 1 - j]) fail("reply %d: byte %zu differs", i, j);
        }
        usrsctp_shutdown(s, SHUT_WR);
        /* Wait for the peer's side of the shutdown. */
        while (recv_msg(s, buf, sizeof buf, &rcv) > 0) {}
        usrsctp_close(s);
        printf("OK %d\n", n);
    } else {
        uint16_t sctp_port = (uint16_t)atoi(argv[3]);
        int n = atoi(argv[4]);
        struct sockaddr_in sin;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        sin.sin_port = htons(sctp_port);
        sin.sin_addr.s_addr = htonl(INADDR_ANY);
        if (usrsctp_bind(s, (struct sockaddr *)&sin, sizeof sin) < 0)
            fail("bind: %s", strerror(errno));
        if (usrsctp_listen(s, 1) < 0) fail("listen: %s", strerror(errno));
        printf("LISTENING\n");
        fflush(stdout);
        struct socket *c = usrsctp_accept(s, NULL, NULL);
        if (!c) fail("accept: %s", strerror(errno));
        int seen = 0;
        while (seen < n) {
            ssize_t len = recv_msg(c, buf, sizeof buf, &rcv);
            if (len <= 0) fail("peer closed after %d messages", seen);
            if (ntohl(rcv.rcv_ppid) != PPID_S1AP) fail("PPID %u", ntohl(rcv.rcv_ppid));
            for (ssize_t j = 0; j < len; j++) want[j] = buf[len - 1 - j];
            send_msg(c, want, (size_t)len, rcv.rcv_sid);
            seen++;
        }
        /* Our peer closes the association gracefully. */
        while (recv_msg(c, buf, sizeof buf, &rcv) > 0) {}
        usrsctp_close(c);
        usrsctp_close(s);
        printf("OK %d\n", n);
    }
    fflush(stdout);
    finish();
    return 0;
}
