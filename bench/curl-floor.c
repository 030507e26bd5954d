/* The cost libcurl alone adds to every forwarded request: a client that does nothing but what
 * platform-proxy asks of libcurl per request (multi-socket on epoll as in ephiperfifo.c, reused
 * easy handles, pooled keep-alive connections, the same options and about as many header lines),
 * with no server side at all. It keeps CONCURRENCY transfers in flight against URL for SECONDS
 * and prints requests/s, its own CPU (user, system) per request and the connections it opened.
 *
 *   cc -O2 -o curl-floor bench/curl-floor.c -lcurl
 *   ./curl-floor http://127.0.0.1:8081/ 64 5
 *   CURL_CA_BUNDLE=ca.pem ./curl-floor https://127.0.0.1:8443/ 64 5
 *   ./curl-floor --rest        # RSS and PSS of libcurl and its libraries, initialised, idle
 *
 * https as the proxy does it: verification on, the CA from CURL_CA_BUNDLE, h2 by ALPN and
 * CURLOPT_PIPEWAIT (transfers wait to multiplex on one connection; PIPEWAIT=0 turns it off).
 * Used by bench/proxy.sh; see docs/performance.md.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>

static int epfd;
static CURLM *multi;
static long timeout_ms = -1;
static long done_count, error_count, connects;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)e; (void)userp;
    struct epoll_event ev = {0};
    ev.data.fd = s;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, s, NULL);
        curl_multi_assign(multi, s, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    if (socketp) {
        epoll_ctl(epfd, EPOLL_CTL_MOD, s, &ev);
    } else {
        epoll_ctl(epfd, EPOLL_CTL_ADD, s, &ev);
        curl_multi_assign(multi, s, (void *)1);
    }
    return 0;
}

static int on_timer(CURLM *m, long ms, void *userp) {
    (void)m; (void)userp;
    timeout_ms = ms;
    return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *u) { (void)p; (void)u; return size * n; }

static struct curl_slist *headers(void) {
    const char *lines[] = {
        "Authorization: Bearer bench-token-0123456789abcdef", "X-Authorization: Bearer bench-token-0123456789abcdef",
        "X-Forwarded-For: 127.0.0.1", "X-Forwarded-Proto: http", "X-Forwarded-Host: 127.0.0.1",
        "Via: 1.1 platform-proxy", "X-Request-ID: 0123456789ab-0-1", "Expect:", "accept:", "content-type:",
    };
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) list = curl_slist_append(list, lines[i]);
    return list;
}

static void start(CURL *easy) {
    curl_multi_add_handle(multi, easy);
}

static void drain(void) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(multi, &left))) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL *easy = msg->easy_handle;
        long n = 0;
        if (curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &n) == CURLE_OK) connects += n;
        if (msg->data.result == CURLE_OK) done_count++; else error_count++;
        curl_multi_remove_handle(multi, easy);
        start(easy);
    }
}

/* --rest: the memory libcurl and the libraries it loads hold once initialised (one multi and one
 * easy handle, no transfer): "rss_kb N pss_kb N". A floor under any libcurl client's RSS at rest. */
static int rest(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *m = curl_multi_init();
    CURL *e = curl_easy_init();
    long rss = -1, pss = -1;
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "VmRSS:", 6)) rss = atol(line + 6);
    if (f) fclose(f);
    f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "Pss:", 4)) pss = atol(line + 4);
    if (f) fclose(f);
    printf("rss_kb %ld pss_kb %ld\n", rss, pss);
    curl_easy_cleanup(e);
    curl_multi_cleanup(m);
    return rss < 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--rest")) return rest();
    if (argc != 4) {
        fprintf(stderr, "usage: %s URL CONCURRENCY SECONDS | %s --rest\n", argv[0], argv[0]);
        return 2;
    }
    const char *url = argv[1];
    int concurrency = atoi(argv[2]);
    double seconds = atof(argv[3]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 512L);
    struct curl_slist *list = headers();
    const char *ca = getenv("CURL_CA_BUNDLE");
    const char *pipewait = getenv("PIPEWAIT");
    long wait = strncmp(url, "https:", 6) == 0 && !(pipewait && strcmp(pipewait, "0") == 0);
    for (int i = 0; i < concurrency; i++) {
        CURL *easy = curl_easy_init();
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 65536L);
        curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, 30L);
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(easy, CURLOPT_PIPEWAIT, wait);
        if (ca && *ca) curl_easy_setopt(easy, CURLOPT_CAINFO, ca);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, discard);
        start(easy);
    }
    int running = 0;
    curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
    drain();

    struct epoll_event events[256];
    double begin = now_s(), warm = begin + 0.5, end = warm + seconds;
    long warm_count = -1;
    struct rusage before;
    while (now_s() < end) {
        if (warm_count < 0 && now_s() >= warm) {
            warm_count = done_count;
            getrusage(RUSAGE_SELF, &before);
        }
        int n = epoll_wait(epfd, events, 256, timeout_ms < 0 ? 100 : (int)timeout_ms);
        if (n == 0) {
            curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        for (int i = 0; i < n; i++) {
            int mask = (events[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) | (events[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0)
                     | (events[i].events & EPOLLERR ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(multi, events[i].data.fd, mask, &running);
        }
        if (timeout_ms == 0) curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running);
        drain();
    }
    struct rusage after;
    getrusage(RUSAGE_SELF, &after);
    long requests = done_count - warm_count;
    double user = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) + (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6;
    double sys = (after.ru_stime.tv_sec - before.ru_stime.tv_sec) + (after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
    printf("requests %ld errors %ld req/s %.0f user_us_per_request %.2f sys_us_per_request %.2f connections %ld\n", requests,
           error_count, requests / seconds, user * 1e6 / requests, sys * 1e6 / requests, connects);
    return error_count > 0 && requests == 0;
}
