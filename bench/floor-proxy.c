/* The floor of platform-proxy's design: the leanest reasonable C reverse proxy built the way
 * platform-proxy has to be built -- its own epoll HTTP/1.1 server half, and libcurl's multi
 * interface for every upstream request -- doing the job of bench/proxy.sh's peers: both credential
 * headers, X-Forwarded-For/-Proto/-Host, Via, X-Request-ID on the upstream request and on the
 * response, a keep-alive pool to the upstream. What it spends per request is what a proxy on
 * libcurl costs when the server half and the glue cost as little as C allows; bench/curl-floor.c
 * is libcurl alone, with no server half.
 *
 *   cc -O2 -Wall -Wextra -o floor-proxy bench/floor-proxy.c -lcurl -lpthread
 *   ./floor-proxy LISTEN_PORT UPSTREAM_URL THREADS        # e.g. 8080 http://127.0.0.1:8081/ 2
 *   CURL_CA_BUNDLE=ca.pem ./floor-proxy 8080 https://127.0.0.1:8443/ 2
 *
 * bench/proxy.sh runs it as one more target beside the peers ("floor"), built like curl-floor.c
 * (skipped without a C compiler or libcurl headers), started as `floor-proxy PORT UPSTREAM_URL
 * $(nproc)` on the same upstream and measured the same way (wrk, its CPU per request, c=1 p50): its
 * figures against a target's limit say whether the target is reachable with libcurl at all.
 * THREADS loops, each with its own epoll, its own listening socket on 127.0.0.1:LISTEN_PORT
 * (SO_REUSEPORT) and its own CURLM, driven as in curl's ephiperfifo.c.
 * libcurl options as platform-proxy's (Sources/Upstream): NOSIGNAL, PROTOCOLS_STR, PATH_AS_IS,
 * PROXY/NOPROXY "" (no proxy variable set), BUFFERSIZE 64 KiB, HTTP_VERSION 2TLS, LOW_SPEED, PIPEWAIT
 * for https, CA from CURL_CA_BUNDLE, blank Accept and Expect; easy handles reused, the header list
 * in memory we own (the client's lines NUL-terminated in place in the read buffer). Only GET and
 * HEAD without a body (501 otherwise); pipelined requests one at a time; no per-request logging.
 * CURLOPT_OPENSOCKET/CLOSESOCKETFUNCTION tell it which sockets are libcurl's connections and when
 * they close, so a pooled connection stays in epoll between transfers with no epoll_ctl at all
 * (platform-proxy does the same since this program showed the cost of one per request).
 * It answers libcurl's zero-timeout polls of sockets whose readiness its loop knows, and its reads
 * of a watched socket found empty in a loop turn, and holds libcurl's later sends to a socket in
 * one pass for the pass's end, as platform-proxy does (defining poll, recv and send, below).
 * It reads ahead below OpenSSL as platform-proxy does (Sources/CurlTuning/ReadAhead.swift, below);
 * READAHEAD=0 in its environment turns that off.
 * libcurl's reads of the monotonic clock during a pass cost one vDSO call, as platform-proxy's do
 * (Sources/CurlTuning/PassClock.swift; defining clock_gettime, below); PASSCLOCK=0 turns that off.
 * SIGTERM/SIGINT exit with status 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define IN_CAP 16384        /* a connection's read buffer: the largest request head */
#define HEAD_CAP 8192       /* the response head we build */
#define HEAD_RESERVE 256    /* kept free in it for our X-Request-ID, Content-Length, Connection */
#define MAX_LINES 80        /* request header lines to the upstream, ours included */
#define RID_MAX 128
#define BODY_MAX (64 << 20)
#define TAG_LISTEN 1u       /* epoll data: 1 = the listener, fd << 2 | 2 = a curl socket, else a conn */
#define TAG_CURL 2u
enum { S_IN = 1, S_OUT = 2, S_REG = 4, S_PARKED = 8, S_OWN = 16 }; /* curl socket table bits */

typedef struct loop loop;
typedef struct conn conn;
typedef struct slot { /* one transfer: an easy handle and what it owns while in flight */
    CURL *easy; loop *L; conn *c; struct slot *next;
    int status, nobody;
    size_t head_len, body_len, body_cap, rid_len;
    char *body, *rid;
    struct curl_slist lines[MAX_LINES];
    CURLU *url;        /* the upstream origin, parsed once; each request sets its path and query */
    int url_parts;     /* CURLOPT_CURLU is set (else CURLOPT_URL) */
    char extra[1024];   /* our per-request lines: X-Forwarded-For, X-Forwarded-Host, X-Request-ID */
    char head[HEAD_CAP];
} slot;
struct conn {
    loop *L; slot *s; conn *next_dead;
    int fd, dead, keepalive, http10, writing, iov_i, iov_n;
    uint32_t events;
    size_t in_len, req_len, peer_len;
    struct iovec iov[2];
    char peer[INET6_ADDRSTRLEN];
    char in[IN_CAP];
};
struct loop {
    int id, ep, lfd; CURLM *multi; long long deadline; unsigned long long requests;
    unsigned char *cs; slot *idle; conn *dead; char *url;
    unsigned iteration, dispatched, *parked_in, n_parked, *parked_fd; /* quiet parked sockets, below */
    /* one pass's sends and the sockets found empty this turn, below (a pass touches a handful) */
    int sent_fd[16], busy_fd[16], empty_fd[16];
    unsigned char sent_n[16], sent_held[16];
    unsigned n_sent, n_busy, n_empty, empty_iteration;
    int stalled; /* a pass left bytes read ahead that its reruns did not read: the next turn runs them */
};

static const char *base_url, *ca_bundle;
static size_t base_len;
static long pipewait;
static int proxy_env_set;
static unsigned max_fd, rid_prefix;

/* The loop whose curl_multi_socket_action runs on this thread (a pass), for send, recv and poll. */
static __thread loop *in_pass;
static int find(const int *a, unsigned n, int fd) {
    for (unsigned i = 0; i < n; i++) if (a[i] == fd) return (int)i;
    return -1;
}
static void drop(int *a, unsigned *n, int fd) {
    int i = find(a, *n, fd);
    if (i >= 0) a[i] = a[--*n];
}
/* A socket curl watches for reading (mark 3) stays registered for reading, level-triggered: once
 * the kernel found it empty in a loop turn (a poll that found nothing, a recv that would block),
 * the turn's later checks and reads get that answer with no system call, as platform-proxy's
 * (Sources/CurlTuning/CurlPass.swift, EmptySockets); what came meanwhile the next wait reports. */
static int found_empty(loop *L, int fd) { return L->empty_iteration == L->iteration && find(L->empty_fd, L->n_empty, fd) >= 0; }
static void note_empty(loop *L, int fd) {
    if (L->empty_iteration != L->iteration) { L->n_empty = 0; L->empty_iteration = L->iteration; }
    if (find(L->empty_fd, L->n_empty, fd) < 0 && L->n_empty < 16) L->empty_fd[L->n_empty++] = fd;
}
/* libcurl's zero-timeout checks for reading of a pooled connection (before reuse, after sending a
 * bodiless request) are answered from what the loop knows, as platform-proxy does
 * (Sources/CurlTuning/QuietSockets.swift): a parked socket stays registered for reading and is taken
 * out when it turns readable, so once a wait begun after its parking has been dispatched, nothing
 * came on it (1, quiet: "nothing ready", no system call). Until then (2, parked) the kernel
 * answers, and its "nothing" makes it quiet. The executable defines poll; libcurl binds to it. */
static unsigned char *marks;
extern int __poll(struct pollfd *fds, nfds_t n, int timeout);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized" /* glibc declares poll's array write-only */
/* Read-ahead below OpenSSL, as platform-proxy's (READAHEAD=0 turns it off). OpenSSL reads a TLS
 * record in two recv calls (its 5-byte header, then its body). Here a short recv of a watched
 * socket reads up to RA_CAP into the socket's own buffer, and later recvs are answered from it.
 * Bytes held there are invisible to epoll and to the kernel's poll, so: poll reports such a
 * socket readable (libcurl's transfers after the first on an h2 connection ask poll before
 * reading; without this some left held responses unread), at a pass's end each socket still
 * holding bytes is run again while that consumes some, and if one still holds bytes the loop's
 * next turn (a wait that does not block) runs it again, as a level-triggered wait would report
 * bytes in the kernel. Without that last step, a rerun read nothing twice in about 1.4M requests
 * (c=1 to 1,000), and those bytes waited for the connection's next event. */
#define RA_CAP 32768
static int readahead;
static unsigned char **ra_buf;
static unsigned *ra_off, *ra_len;
static __thread int ra_fds[16];
static __thread unsigned n_ra;
static int held(int fd) { return readahead && fd >= 0 && (unsigned)fd < max_fd && ra_len[fd] > ra_off[fd]; }
int poll(struct pollfd *f, nfds_t n, int timeout) {
    /* Bytes a read-ahead holds make their socket readable, as they would in the kernel. */
    if (readahead) {
        int any = 0;
        for (nfds_t i = 0; i < n; i++) any |= held(f[i].fd) && (f[i].events & POLLIN);
        if (any) {
            int r = __poll(f, n, 0);
            if (r < 0) return r;
            r = 0;
            for (nfds_t i = 0; i < n; i++) {
                if (held(f[i].fd) && (f[i].events & POLLIN)) f[i].revents |= POLLIN;
                if (f[i].revents) r++;
            }
            return r;
        }
    }
    if (timeout == 0 && n == 1 && f[0].fd >= 0 && (unsigned)f[0].fd < max_fd
        && !(f[0].events & ~(POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND))) {
        unsigned char m = __atomic_load_n(&marks[f[0].fd], __ATOMIC_RELAXED);
        if (m == 1) { f[0].revents = 0; return 0; }
        if (m == 2) {
            int r = __poll(f, 1, 0);
            if (r == 0) __atomic_store_n(&marks[f[0].fd], 1, __ATOMIC_RELAXED);
            return r;
        }
        if (m == 3 && in_pass) {
            if (found_empty(in_pass, f[0].fd)) { f[0].revents = 0; return 0; }
            int r = __poll(f, 1, 0);
            if (r == 0) note_empty(in_pass, f[0].fd);
            return r;
        }
    }
    return __poll(f, n, timeout);
}
#pragma GCC diagnostic pop
static void mark(int fd, unsigned char m) { __atomic_store_n(&marks[fd], m, __ATOMIC_RELAXED); }

ssize_t recv(int fd, void *b, size_t n, int flags) {
    loop *L = in_pass;
    if (!flags && held(fd)) {
        size_t k = ra_len[fd] - ra_off[fd]; if (k > n) k = n;
        memcpy(b, ra_buf[fd] + ra_off[fd], k); ra_off[fd] += (unsigned)k;
        if (ra_off[fd] == ra_len[fd]) ra_off[fd] = ra_len[fd] = 0;
        return (ssize_t)k;
    }
    if (!L || flags || fd < 0 || (unsigned)fd >= max_fd || marks[fd] != 3) return recvfrom(fd, b, n, flags, NULL, NULL);
    if (found_empty(L, fd)) { errno = EAGAIN; return -1; }
    /* A short read (a TLS record's header) goes through the socket's read-ahead buffer while the
     * rerun list has room. */
    int ahead = readahead && n <= 16 && (n_ra < 16 || find(ra_fds, n_ra, fd) >= 0);
    if (ahead && !ra_buf[fd]) ra_buf[fd] = malloc(RA_CAP);
    ahead = ahead && ra_buf[fd];
    ssize_t r = recvfrom(fd, ahead ? ra_buf[fd] : b, ahead ? RA_CAP : n, 0, NULL, NULL);
    if (r < 0 && errno == EAGAIN) note_empty(L, fd);
    if (!ahead || r <= 0) return r;
    size_t k = (size_t)r < n ? (size_t)r : n;
    memcpy(b, ra_buf[fd], k);
    if (k < (size_t)r) {
        ra_off[fd] = (unsigned)k; ra_len[fd] = (unsigned)r;
        if (find(ra_fds, n_ra, fd) < 0) ra_fds[n_ra++] = fd;
    }
    return (ssize_t)k;
}
/* libcurl's sends during one pass leave together per socket, as platform-proxy's
 * (Sources/CurlTuning/SendBatch.swift): the first send to a socket in a pass goes at once, later
 * ones (and the first to a socket that had several in its last pass) carry MSG_MORE, and the
 * pass's end pushes them (TCP_CORK cleared). Over h2, one pass that starts twelve requests sends
 * one segment, not twelve. */
ssize_t send(int fd, const void *b, size_t n, int flags) {
    loop *L = in_pass;
    if (L) {
        int i = find(L->sent_fd, L->n_sent, fd);
        if (i >= 0) { L->sent_n[i]++; L->sent_held[i] = 1; flags |= MSG_MORE; }
        else if (L->n_sent < 16) {
            int busy = find(L->busy_fd, L->n_busy, fd) >= 0;
            L->sent_fd[L->n_sent] = fd; L->sent_n[L->n_sent] = 1; L->sent_held[L->n_sent++] = (unsigned char)busy;
            if (busy) flags |= MSG_MORE;
        }
    }
    return sendto(fd, b, n, flags, NULL, 0);
}
/* libcurl reads CLOCK_MONOTONIC about 35 times per request (Curl_now). During a pass the first
 * read is glibc's, and so is the first after body bytes moved (on_body); each other one is the last
 * answer plus a nanosecond: never ahead of the real clock, and a transfer that yields after 100
 * reads of a busy connection (its run-now timer) is run again in the next loop turn, not in the
 * same sweep of due timers (Sources/CurlTuning/PassClock.swift). Other clocks and reads outside a
 * pass are glibc's. */
static int passclock = 1;
static __thread struct timespec pass_clock;
static __thread int pass_clock_read;
int clock_gettime(clockid_t c, struct timespec *t) {
    static int (*system_clock)(clockid_t, struct timespec *);
    if (!system_clock) system_clock = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    if (c != CLOCK_MONOTONIC || !in_pass || !passclock) return system_clock(c, t);
    if (pass_clock_read) {
        if (pass_clock.tv_nsec < 999999999) pass_clock.tv_nsec++; else { pass_clock.tv_sec++; pass_clock.tv_nsec = 0; }
        *t = pass_clock;
        return 0;
    }
    int r = system_clock(c, t);
    if (r == 0) { pass_clock = *t; pass_clock_read = 1; }
    return r;
}
static void action(loop *L, int fd, int events) {
    int running, off = 0;
    in_pass = L;
    pass_clock_read = 0;
    curl_multi_socket_action(L->multi, fd, events, &running);
    /* What a read-ahead holds, no wait will report: run its socket again while that helps. */
    for (int again = 1, rounds = 0; readahead && again && rounds < 64; rounds++) {
        again = 0;
        for (unsigned i = 0; i < n_ra; i++) {
            int s = ra_fds[i];
            if (!held(s)) { ra_fds[i--] = ra_fds[--n_ra]; continue; }
            if (!(L->cs[s] & S_IN) || (L->cs[s] & S_PARKED)) continue;
            unsigned before = ra_len[s] - ra_off[s];
            curl_multi_socket_action(L->multi, s, CURL_CSELECT_IN, &running);
            if (!held(s) || ra_len[s] - ra_off[s] < before) again = 1;
        }
    }
    for (unsigned i = 0; readahead && i < n_ra; i++)
        if (held(ra_fds[i]) && (L->cs[ra_fds[i]] & S_IN) && !(L->cs[ra_fds[i]] & S_PARKED)) L->stalled = 1;
    in_pass = NULL;
    for (unsigned i = 0; i < L->n_sent; i++) {
        int s = L->sent_fd[i], b = find(L->busy_fd, L->n_busy, s);
        if (L->sent_held[i]) setsockopt(s, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
        if (L->sent_n[i] > 1) { if (b < 0 && L->n_busy < 16) L->busy_fd[L->n_busy++] = s; }
        else if (b >= 0) L->busy_fd[b] = L->busy_fd[--L->n_busy];
    }
    L->n_sent = 0;
}
/* Sockets parked before the last dispatched batch's iteration, and parked still, become quiet. */
static void promote(loop *L) {
    if (!L->n_parked || L->parked_in[L->parked_fd[0]] >= L->dispatched) return;
    unsigned kept = 0;
    for (unsigned i = 0; i < L->n_parked; i++) {
        int fd = (int)L->parked_fd[i];
        if (L->parked_in[fd] >= L->dispatched) { L->parked_fd[kept++] = fd; continue; }
        if ((L->cs[fd] & (S_PARKED | S_IN)) == (S_PARKED | S_IN) && marks[fd] == 2) mark(fd, 1);
    }
    L->n_parked = kept;
}

static const char *const static_lines[] = {
    "Authorization: Bearer bench-token-0123456789abcdef", "X-Authorization: Bearer bench-token-0123456789abcdef",
    "X-Forwarded-Proto: http", "Via: 1.1 floor-proxy", "Expect:", "accept:",
};
#define N_STATIC (int)(sizeof static_lines / sizeof *static_lines)

/* Header names we handle. resp: also dropped from the upstream's response. */
enum { H_HOST, H_RID, H_XFF, H_CONNECTION, H_CLEN, H_TENC };
static const struct { const char *name; unsigned char len, resp; } names[] = {
    {"host", 4, 0}, {"x-request-id", 12, 1}, {"x-forwarded-for", 15, 0}, {"connection", 10, 1},
    {"content-length", 14, 1}, {"transfer-encoding", 17, 1}, {"keep-alive", 10, 1}, {"proxy-connection", 16, 1},
    {"te", 2, 1}, {"trailer", 7, 1}, {"upgrade", 7, 1}, {"expect", 6, 0}, {"authorization", 13, 0},
    {"x-authorization", 15, 0}, {"x-forwarded-proto", 17, 0}, {"x-forwarded-host", 16, 0}, {"via", 3, 0},
    {"proxy-authorization", 19, 0},
};
static int lookup(const char *p, size_t n) {
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (names[i].len == n && !strncasecmp(p, names[i].name, n)) return i;
    return -1;
}

static char *put(char *p, const void *s, size_t n) { memcpy(p, s, n); return p + n; }
#define PUTS(p, lit) put(p, lit, sizeof lit - 1)
static char *num(char *p, unsigned long long v, unsigned base) { /* decimal or hex digits */
    char t[24]; int i = 0;
    do t[i++] = "0123456789abcdef"[v % base]; while (v /= base);
    while (i) *p++ = t[--i];
    return p;
}
static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}
static int ctl(loop *L, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event e = {.events = events, .data.u64 = data};
    return epoll_ctl(L->ep, op, fd, &e);
}
static void set_events(conn *c, uint32_t events) {
    if (c->events != events) ctl(c->L, EPOLL_CTL_MOD, c->fd, events, (uintptr_t)c);
    c->events = events;
}

/* ---- libcurl callbacks: they only record what to watch and collect the response */

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)e; (void)socketp;
    loop *L = userp;
    unsigned char st = L->cs[s], want = (what & CURL_POLL_IN ? S_IN : 0) | (what & CURL_POLL_OUT ? S_OUT : 0);
    uint64_t tag = (uint64_t)s << 2 | TAG_CURL;
    uint32_t events = (want & S_IN ? EPOLLIN : 0) | (want & S_OUT ? EPOLLOUT : 0);
    if (what == CURL_POLL_REMOVE) {
        if (!(st & S_REG)) return 0;
        if (st & S_OWN) { /* pooled: stays registered */
            L->cs[s] = st | S_PARKED;
            if (st & S_IN && L->n_parked < max_fd) {
                mark(s, 2);
                L->parked_in[s] = L->iteration;
                L->parked_fd[L->n_parked++] = s;
            }
            return 0;
        }
        ctl(L, EPOLL_CTL_DEL, s, 0, 0);
        L->cs[s] = 0;
        return 0;
    }
    if (!(st & S_REG)) ctl(L, EPOLL_CTL_ADD, s, events, tag);
    else if ((st & (S_IN | S_OUT)) != want && ctl(L, EPOLL_CTL_MOD, s, events, tag) < 0 && errno == ENOENT)
        ctl(L, EPOLL_CTL_ADD, s, events, tag);
    L->cs[s] = (st & S_OWN) | S_REG | want;
    mark(s, st & S_OWN && want & S_IN ? 3 : 0);
    return 0;
}
static int on_timer(CURLM *m, long ms, void *userp) {
    (void)m;
    ((loop *)userp)->deadline = ms < 0 ? -1 : now_ms() + ms;
    return 0;
}
static curl_socket_t on_open(void *userp, curlsocktype purpose, struct curl_sockaddr *a) {
    (void)purpose;
    int s = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (s >= 0 && (unsigned)s >= max_fd) { close(s); return CURL_SOCKET_BAD; }
    if (s >= 0) ((loop *)userp)->cs[s] = S_OWN;
    return s;
}
static int on_close(void *userp, curl_socket_t s) {
    loop *L = userp;
    L->cs[s] = 0; /* closing removes it from epoll */
    mark(s, 0);
    if (readahead) ra_off[s] = ra_len[s] = 0;
    drop(L->busy_fd, &L->n_busy, s);
    drop(L->empty_fd, &L->n_empty, s);
    int i = find(L->sent_fd, L->n_sent, s), off = 0; /* what it holds leaves before the close */
    if (i >= 0 && L->sent_held[i]) setsockopt(s, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
    if (i >= 0) { L->n_sent--; L->sent_fd[i] = L->sent_fd[L->n_sent]; L->sent_n[i] = L->sent_n[L->n_sent]; L->sent_held[i] = L->sent_held[L->n_sent]; }
    return close(s);
}

static const char *reason(int status) { /* for HTTP/2 status lines, which have none */
    return status == 200 ? "OK" : status == 204 ? "No Content" : status == 304 ? "Not Modified"
         : status == 404 ? "Not Found" : status == 502 ? "Bad Gateway" : "";
}
static size_t on_header(char *d, size_t size, size_t n, void *u) {
    slot *s = u;
    size_t len = size * n;
    if (s->head_len + len + 32 > HEAD_CAP - HEAD_RESERVE) return 0; /* too large: 502 */
    if (len > 12 && !memcmp(d, "HTTP/", 5)) { /* a status line (again after a 1xx): start over */
        char *sp = memchr(d, ' ', len), *r, *end = d + len;
        if (!sp || end - sp < 4 || (unsigned)(sp[1] - '1') > 4 || (unsigned)(sp[2] - '0') > 9 || (unsigned)(sp[3] - '0') > 9)
            return 0;
        s->status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
        for (r = sp + 4; r < end && *r == ' '; r++) {}
        while (end > r && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
        char *p = PUTS(s->head, "HTTP/1.1 ");
        p = put(p, sp + 1, 3);
        *p++ = ' ';
        p = end > r ? put(p, r, end - r) : put(p, reason(s->status), strlen(reason(s->status)));
        p = PUTS(p, "\r\n");
        s->head_len = p - s->head;
        return len;
    }
    char *colon = memchr(d, ':', len);
    if (!colon || len < 3) return len; /* the blank line ending the head */
    int k = lookup(d, colon - d);
    if (k >= 0 && names[k].resp && !(k == H_CLEN && (s->nobody || s->status == 304))) return len;
    memcpy(s->head + s->head_len, d, len);
    s->head_len += len;
    return len;
}
static size_t on_body(char *d, size_t size, size_t n, void *u) {
    pass_clock_read = 0; /* body bytes moved: libcurl's next clock read is the real one */
    slot *s = u;
    size_t len = size * n;
    if (s->body_len + len > s->body_cap) {
        size_t cap = s->body_cap ? s->body_cap : 16384;
        while (cap < s->body_len + len) cap *= 2;
        char *b = cap <= BODY_MAX ? realloc(s->body, cap) : NULL;
        if (!b) return 0;
        s->body = b;
        s->body_cap = cap;
    }
    memcpy(s->body + s->body_len, d, len);
    s->body_len += len;
    return len;
}

/* ---- transfers */

static slot *slot_get(loop *L) {
    slot *s = L->idle;
    if (s) { L->idle = s->next; return s; }
    s = calloc(1, sizeof *s);
    CURL *e = s->easy = curl_easy_init();
    s->L = L;
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 65536L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, pipewait);
    if (ca_bundle) curl_easy_setopt(e, CURLOPT_CAINFO, ca_bundle);
    if (!proxy_env_set) { curl_easy_setopt(e, CURLOPT_PROXY, ""); curl_easy_setopt(e, CURLOPT_NOPROXY, ""); }
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(e, CURLOPT_PRIVATE, s);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->lines); /* relinked per request, read by curl */
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, L);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, L);
    s->url = curl_url();
    const char *authority = strstr(base_url, "://");
    if (!authority || memchr(authority + 3, '/', base_len - (size_t)(authority + 3 - base_url))
        || curl_url_set(s->url, CURLUPART_URL, base_url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS)) {
        curl_url_cleanup(s->url);
        s->url = NULL;
    }
    return s;
}

/* Whether libcurl sends p[0..n) byte for byte both parsed out of a URL string and set as a URL part
 * (platform-proxy's RequestURL.partIsVerbatim): nothing the parse refuses or splits at, and no
 * percent-encoding with an upper-case hex digit, which setting a part lowercases. */
static int verbatim(const char *p, size_t n, int query) {
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)p[i];
        if (b <= 0x20 || b == 0x7f || b == '#' || (b == '?' && !query)) return 0;
        if (b == '%' && i + 2 < n && isxdigit((unsigned char)p[i + 1]) && isxdigit((unsigned char)p[i + 2])
            && (isupper((unsigned char)p[i + 1]) || isupper((unsigned char)p[i + 2]))) return 0;
    }
    return 1;
}

/* The request's URL: libcurl parses a URL string anew per transfer (~10k instructions); given a
 * URL handle it copies the parts. The path and query are set when they go through unchanged. */
static void set_url(loop *L, slot *s, char *target, size_t len) {
    char *q = memchr(target, '?', len);
    size_t path_len = q ? (size_t)(q - target) : len;
    if (s->url && len && target[0] == '/' && verbatim(target, path_len, 0) && (!q || verbatim(q + 1, len - path_len - 1, 1))) {
        char save = target[len];
        target[len] = 0;
        if (q) *q = 0;
        curl_url_set(s->url, CURLUPART_PATH, target, 0);
        curl_url_set(s->url, CURLUPART_QUERY, q ? q + 1 : NULL, 0);
        if (q) *q = '?';
        target[len] = save;
        if (!s->url_parts) curl_easy_setopt(s->easy, CURLOPT_CURLU, s->url);
        s->url_parts = 1;
        return;
    }
    if (s->url_parts) curl_easy_setopt(s->easy, CURLOPT_CURLU, NULL);
    s->url_parts = 0;
    memcpy(L->url + base_len, target, len);
    L->url[base_len + len] = 0;
    curl_easy_setopt(s->easy, CURLOPT_URL, L->url);
}
static void slot_put(loop *L, slot *s) { s->c = NULL; s->next = L->idle; L->idle = s; }

static void conn_close(conn *c) {
    if (c->dead) return;
    c->dead = 1;
    if (c->s) {
        if (!c->writing) curl_multi_remove_handle(c->L->multi, c->s->easy);
        slot_put(c->L, c->s);
        c->s = NULL;
    }
    close(c->fd); /* freed after this round of events: later events of the round may name it */
    c->next_dead = c->L->dead;
    c->L->dead = c;
}
static void reply_close(conn *c, const char *response) {
    if (write(c->fd, response, strlen(response)) < 0) {}
    conn_close(c);
}
#define ERROR_RESPONSE(status) "HTTP/1.1 " status "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

static void start_request(conn *c);

static void flush(conn *c) {
    while (c->iov_i < c->iov_n) {
        ssize_t n = writev(c->fd, c->iov + c->iov_i, c->iov_n - c->iov_i);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) { set_events(c, EPOLLIN | EPOLLOUT); return; }
        if (n < 0) { conn_close(c); return; }
        for (; n > 0 && (size_t)n >= c->iov[c->iov_i].iov_len; c->iov_i++) n -= c->iov[c->iov_i].iov_len;
        if (n > 0) { c->iov[c->iov_i].iov_base = (char *)c->iov[c->iov_i].iov_base + n; c->iov[c->iov_i].iov_len -= n; }
    }
    /* The response went out: the next request, buffered or to come. */
    slot_put(c->L, c->s);
    c->s = NULL;
    c->writing = 0;
    if (!c->keepalive) { conn_close(c); return; }
    set_events(c, EPOLLIN);
    c->in_len -= c->req_len;
    memmove(c->in, c->in + c->req_len, c->in_len);
    c->req_len = 0;
    if (c->in_len) start_request(c);
}

static void finish(slot *s, CURLcode rc) {
    conn *c = s->c;
    if (rc != CURLE_OK || s->status < 200) {
        s->status = 502;
        s->head_len = PUTS(s->head, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n") - s->head;
        s->body_len = 0;
        if (!s->nobody) on_body("bad gateway\n", 1, 12, s);
    }
    char *p = s->head + s->head_len;
    p = put(PUTS(p, "X-Request-ID: "), s->rid, s->rid_len);
    p = PUTS(p, "\r\n");
    if (!s->nobody && s->status != 204 && s->status != 304) p = PUTS(num(PUTS(p, "Content-Length: "), s->body_len, 10), "\r\n");
    if (!c->keepalive) p = PUTS(p, "Connection: close\r\n");
    else if (c->http10) p = PUTS(p, "Connection: keep-alive\r\n");
    p = PUTS(p, "\r\n");
    c->iov[0] = (struct iovec){s->head, p - s->head};
    c->iov[1] = (struct iovec){s->body, s->body_len};
    c->iov_i = 0;
    c->iov_n = s->body_len && !s->nobody ? 2 : 1;
    c->writing = 1;
    flush(c);
}

/* Parses the request head at the start of c->in, if it is all there, and starts its transfer. */
static void start_request(conn *c) {
    loop *L = c->L;
    char *p = c->in, *end = memmem(p, c->in_len, "\r\n\r\n", 4);
    if (!end) { if (c->in_len == IN_CAP) reply_close(c, ERROR_RESPONSE("431 Request Header Fields Too Large")); return; }
    c->req_len = end + 4 - p;
    char *eol = memchr(p, '\r', end + 2 - p), *sp1 = memchr(p, ' ', eol - p), *sp2 = NULL;
    if (sp1) sp2 = memchr(sp1 + 1, ' ', eol - sp1 - 1);
    const char *error = NULL;
    int head = sp1 - p == 4 && !memcmp(p, "HEAD", 4);
    if (!sp2 || sp1[1] != '/' || eol - sp2 != 9 || memcmp(sp2 + 1, "HTTP/1.", 7) || (sp2[8] != '0' && sp2[8] != '1'))
        error = ERROR_RESPONSE("400 Bad Request");
    else if (!head && !(sp1 - p == 3 && !memcmp(p, "GET", 3)))
        error = ERROR_RESPONSE("501 Not Implemented");
    if (error) { reply_close(c, error); return; }
    c->http10 = sp2[8] == '0';
    c->keepalive = !c->http10;
    slot *s = slot_get(L);
    const char *host = NULL, *rid = NULL, *xff = NULL;
    size_t host_len = 0, rid_len = 0, xff_len = 0;
    int n = 0;
    for (char *q = eol + 2, *le; q <= end && !error; q = le + 2) {
        le = memchr(q, '\r', end + 1 - q);
        char *colon = memchr(q, ':', le - q), *v, *ve = le;
        if (!colon) { error = ERROR_RESPONSE("400 Bad Request"); break; }
        for (v = colon + 1; v < le && (*v == ' ' || *v == '\t'); v++) {}
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        switch (lookup(q, colon - q)) {
        case H_HOST: host = v; host_len = ve - v; break;
        case H_RID: if (ve > v && ve - v <= RID_MAX) { rid = v; rid_len = ve - v; } break;
        case H_XFF: xff = v; xff_len = ve - v; break;
        case H_CONNECTION:
            for (char *t = v; t + 5 <= ve; t++) if (!strncasecmp(t, "close", 5)) c->keepalive = 0;
            if (c->http10 && ve - v == 10 && !strncasecmp(v, "keep-alive", 10)) c->keepalive = 1;
            break;
        case H_CLEN: if (ve - v != 1 || *v != '0') error = ERROR_RESPONSE("501 Not Implemented"); break;
        case H_TENC: error = ERROR_RESPONSE("501 Not Implemented"); break;
        case -1: /* passed through as it is, NUL-terminated in place */
            if (n == MAX_LINES - N_STATIC - 3) { error = ERROR_RESPONSE("431 Request Header Fields Too Large"); break; }
            *le = 0;
            s->lines[n++].data = q;
            break;
        default: break; /* replaced by ours, or hop-by-hop */
        }
    }
    if (!error && xff_len + host_len > 700) error = ERROR_RESPONSE("431 Request Header Fields Too Large");
    if (error) { slot_put(L, s); reply_close(c, error); return; }
    for (int i = 0; i < N_STATIC; i++) s->lines[n++].data = (char *)static_lines[i];
    char *x = s->extra;
    s->lines[n++].data = x;
    x = PUTS(x, "X-Forwarded-For: ");
    if (xff_len) x = PUTS(put(x, xff, xff_len), ", ");
    x = put(x, c->peer, c->peer_len);
    *x++ = 0;
    if (host) {
        s->lines[n++].data = x;
        x = put(PUTS(x, "X-Forwarded-Host: "), host, host_len);
        *x++ = 0;
    }
    s->lines[n++].data = x;
    x = PUTS(x, "X-Request-ID: ");
    s->rid = x;
    if (rid) x = put(x, rid, rid_len);
    else x = num(PUTS(num(PUTS(num(x, rid_prefix, 16), "-"), L->id, 16), "-"), ++L->requests, 16);
    s->rid_len = x - s->rid;
    *x = 0;
    for (int i = 0; i < n; i++) s->lines[i].next = i + 1 < n ? &s->lines[i + 1] : NULL;
    set_url(L, s, sp1 + 1, sp2 - sp1 - 1);
    if (s->nobody != head) curl_easy_setopt(s->easy, CURLOPT_NOBODY, (long)(s->nobody = head));
    s->c = c;
    c->s = s;
    s->status = 0;
    s->head_len = s->body_len = 0;
    if (curl_multi_add_handle(L->multi, s->easy) != CURLM_OK) {
        c->writing = 1; /* not in the multi handle */
        finish(s, CURLE_FAILED_INIT);
    }
}

static void on_client(conn *c, uint32_t events) {
    if ((events & EPOLLOUT) && c->writing) flush(c);
    if (c->dead || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
    if (c->in_len == IN_CAP) { set_events(c, c->events & ~EPOLLIN); return; } /* full while busy: pause */
    ssize_t n = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) { conn_close(c); return; }
    if (n < 0) return;
    c->in_len += n;
    if (!c->s) start_request(c);
}

static void on_accept(loop *L) {
    for (int k = 0; k < 64; k++) {
        struct sockaddr_storage a;
        socklen_t al = sizeof a;
        int fd = accept4(L->lfd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        if (fd < 0) return;
        conn *c = (unsigned)fd < max_fd ? malloc(sizeof *c) : NULL;
        if (!c) { close(fd); continue; }
        memset(c, 0, offsetof(conn, in));
        c->L = L;
        c->fd = fd;
        c->events = EPOLLIN;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        void *addr = a.ss_family == AF_INET6 ? (void *)&((struct sockaddr_in6 *)&a)->sin6_addr : (void *)&((struct sockaddr_in *)&a)->sin_addr;
        c->peer_len = inet_ntop(a.ss_family, addr, c->peer, sizeof c->peer) ? strlen(c->peer) : 0;
        L->cs[fd] = 0;
        ctl(L, EPOLL_CTL_ADD, fd, EPOLLIN, (uintptr_t)c);
    }
}

static int drain(loop *L) {
    CURLMsg *m;
    int left, done = 0;
    while ((m = curl_multi_info_read(L->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        CURL *e = m->easy_handle;
        CURLcode rc = m->data.result;
        slot *s;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&s);
        curl_multi_remove_handle(L->multi, e);
        finish(s, rc);
        done++;
    }
    return done;
}

static void *run(void *arg) {
    loop *L = arg;
    struct epoll_event ev[256];
    for (;;) {
        int timeout = L->stalled ? 0 : -1;
        if (L->deadline >= 0 && timeout) {
            long long d = L->deadline - now_ms();
            timeout = d < 0 ? 0 : d > INT_MAX ? INT_MAX : (int)d;
        }
        int n = epoll_wait(L->ep, ev, 256, timeout);
        L->iteration++;
        for (int i = 0; i < n; i++) {
            uint64_t d = ev[i].data.u64;
            if (d == TAG_LISTEN) { on_accept(L); continue; }
            if (!(d & TAG_CURL)) { conn *c = (conn *)(uintptr_t)d; if (!c->dead) on_client(c, ev[i].events); continue; }
            int fd = (int)(d >> 2);
            if (L->cs[fd] & S_PARKED) { /* a pooled connection woke between transfers: closed by its server */
                ctl(L, EPOLL_CTL_DEL, fd, 0, 0);
                L->cs[fd] &= S_OWN;
                mark(fd, 0);
                continue;
            }
            promote(L);
            uint32_t e = ev[i].events;
            action(L, fd, (e & EPOLLIN ? CURL_CSELECT_IN : 0) | (e & EPOLLOUT ? CURL_CSELECT_OUT : 0)
                          | (e & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0));
        }
        L->dispatched = L->iteration;
        promote(L);
        if (L->stalled) { /* bytes read ahead that no wait reports: curl reads their sockets again */
            L->stalled = 0;
            int again[16]; unsigned n_again = 0;
            for (unsigned i = 0; i < n_ra; i++)
                if (held(ra_fds[i]) && (L->cs[ra_fds[i]] & S_IN) && !(L->cs[ra_fds[i]] & S_PARKED)) again[n_again++] = ra_fds[i];
            for (unsigned i = 0; i < n_again; i++) action(L, again[i], CURL_CSELECT_IN);
        }
        /* New transfers set a timeout of 0: run them now rather than after another epoll_wait. */
        for (int k = 0; k < 64; k++) {
            int due = L->deadline >= 0 && L->deadline <= now_ms();
            if (due) { L->deadline = -1; action(L, CURL_SOCKET_TIMEOUT, 0); }
            if (!drain(L) && !due) break;
        }
        while (L->dead) { conn *c = L->dead; L->dead = c->next_dead; free(c); }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s LISTEN_PORT UPSTREAM_URL THREADS\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), threads = atoi(argv[3]);
    base_url = argv[2];
    for (base_len = strlen(base_url); base_len && base_url[base_len - 1] == '/'; base_len--) {}
    pipewait = strncmp(base_url, "https:", 6) == 0;
    ca_bundle = getenv("CURL_CA_BUNDLE");
    if (ca_bundle && !*ca_bundle) ca_bundle = NULL;
    const char *proxy_vars[] = {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"};
    for (size_t i = 0; i < sizeof proxy_vars / sizeof *proxy_vars; i++) proxy_env_set |= getenv(proxy_vars[i]) != NULL;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    max_fd = rl.rlim_cur > (1u << 20) ? (1u << 20) : (unsigned)rl.rlim_cur;
    marks = calloc(max_fd, 1);
    passclock = !getenv("PASSCLOCK") || atoi(getenv("PASSCLOCK"));
    if (!getenv("READAHEAD") || atoi(getenv("READAHEAD"))) {
        ra_buf = calloc(max_fd, sizeof *ra_buf); ra_off = calloc(max_fd, sizeof *ra_off); ra_len = calloc(max_fd, sizeof *ra_len);
        readahead = ra_buf && ra_off && ra_len;
    }
    rid_prefix = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    if (port <= 0 || threads <= 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 2;
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    for (int i = 0; i < threads; i++) {
        loop *L = calloc(1, sizeof *L);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int one = 1;
        L->id = i;
        L->deadline = -1;
        L->cs = calloc(max_fd, 1);
        L->parked_in = calloc(max_fd, sizeof *L->parked_in);
        L->parked_fd = calloc(max_fd, sizeof *L->parked_fd);
        L->url = malloc(base_len + IN_CAP + 1);
        memcpy(L->url, base_url, base_len);
        L->ep = epoll_create1(EPOLL_CLOEXEC);
        L->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        setsockopt(L->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(L->lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        if (bind(L->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(L->lfd, 4096) < 0) {
            perror("floor-proxy: bind/listen");
            return 1;
        }
        ctl(L, EPOLL_CTL_ADD, L->lfd, EPOLLIN, TAG_LISTEN);
        L->multi = curl_multi_init();
        curl_multi_setopt(L->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(L->multi, CURLMOPT_SOCKETDATA, L);
        curl_multi_setopt(L->multi, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(L->multi, CURLMOPT_TIMERDATA, L);
        curl_multi_setopt(L->multi, CURLMOPT_MAXCONNECTS, 512L);
        curl_multi_setopt(L->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
        pthread_t t;
        pthread_create(&t, NULL, run, L);
    }
    int sig;
    sigwait(&stop, &sig);
    _exit(0); /* the loops hold nothing that must be flushed */
}
