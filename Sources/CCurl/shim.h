// Typed wrappers for libcurl's variadic setters, which Swift cannot call.
// No feature macros here: every shim in the package must agree on them.
#ifndef PLATFORM_PROXY_CCURL_SHIM_H
#define PLATFORM_PROXY_CCURL_SHIM_H

#include <curl/curl.h>

static inline CURLcode cc_easy_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cc_easy_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cc_easy_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cc_easy_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
/* A share handle holding TLS sessions (one per loop's client, so no lock functions). */
static inline CURLSHcode cc_share_tls_sessions(CURLSH *s) { return curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION); }
/* A TLS client key given as PEM bytes (libcurl copies them); NULL goes back to none. */
static inline CURLcode cc_easy_sslkey_blob(CURL *h, const void *data, size_t length) {
    struct curl_blob blob = { (void *)data, length, CURL_BLOB_COPY };
    return curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, data ? &blob : NULL);
}
static inline CURLcode cc_easy_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode cc_easy_curlu(CURL *h, CURLU *u) { return curl_easy_setopt(h, CURLOPT_CURLU, u); }

typedef size_t (*cc_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode cc_easy_write_function(CURL *h, cc_data_callback f) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode cc_easy_read_function(CURL *h, cc_data_callback f) { return curl_easy_setopt(h, CURLOPT_READFUNCTION, f); }
static inline CURLcode cc_easy_header_function(CURL *h, cc_data_callback f) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }

/* Connection sockets are opened and closed through the proxy (UpstreamClient), so it knows when
   a descriptor number names a new socket and when one goes away. */
typedef curl_socket_t (*cc_open_socket_callback)(void *clientp, curlsocktype purpose, struct curl_sockaddr *address);
typedef int (*cc_close_socket_callback)(void *clientp, curl_socket_t item);
static inline CURLcode cc_easy_open_socket_function(CURL *h, cc_open_socket_callback f) { return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f); }
/* Called before each send of a request, on a new or reused connection: libcurl sends an HTTP/1.1
   request again by itself when a reused connection died before any response, whatever the method. */
typedef int (*cc_prereq_callback)(void *clientp, char *primary_ip, char *local_ip, int primary_port, int local_port);
static inline CURLcode cc_easy_prereq_function(CURL *h, cc_prereq_callback f) { return curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, f); }
static const int CC_PREREQFUNC_OK = CURL_PREREQFUNC_OK;
static const int CC_PREREQFUNC_ABORT = CURL_PREREQFUNC_ABORT;
static inline CURLcode cc_easy_close_socket_function(CURL *h, cc_close_socket_callback f) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, f); }

static inline CURLcode cc_info_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode cc_info_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

typedef int (*cc_socket_callback)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*cc_timer_callback)(CURLM *multi, long timeout_ms, void *userp);
static inline CURLMcode cc_multi_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode cc_multi_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode cc_multi_socket_function(CURLM *m, cc_socket_callback f) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f); }
static inline CURLMcode cc_multi_timer_function(CURLM *m, cc_timer_callback f) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f); }

/* CURLMsg's result sits in a union; read it here. */
static inline CURLcode cc_msg_result(const CURLMsg *m) { return m->data.result; }

/* The macros Swift does not import. */
static const size_t CC_WRITEFUNC_PAUSE = CURL_WRITEFUNC_PAUSE;
static const size_t CC_READFUNC_PAUSE = CURL_READFUNC_PAUSE;
static const size_t CC_READFUNC_ABORT = CURL_READFUNC_ABORT;
static const int CC_SOCKET_TIMEOUT = CURL_SOCKET_TIMEOUT;
static const int CC_POLL_IN = CURL_POLL_IN;
static const int CC_POLL_OUT = CURL_POLL_OUT;
static const int CC_POLL_INOUT = CURL_POLL_INOUT;
static const int CC_POLL_REMOVE = CURL_POLL_REMOVE;
static const curl_socket_t CC_SOCKET_BAD = CURL_SOCKET_BAD;
static const int CC_CSELECT_IN = CURL_CSELECT_IN;
static const int CC_CSELECT_OUT = CURL_CSELECT_OUT;
static const int CC_CSELECT_ERR = CURL_CSELECT_ERR;
static const int CC_PAUSE_CONT = CURLPAUSE_CONT;
static const long CC_HTTP_VERSION_2TLS = CURL_HTTP_VERSION_2TLS;
static const long CC_PIPE_MULTIPLEX = CURLPIPE_MULTIPLEX;

/* A TLS HTTP/1.1 transfer's connection, to see whether its response left bytes in OpenSSL
   (Upstream/UpstreamTransfer.swift): libcurl reads a body only up to its Content-Length, so what an
   upstream sent past it in the same TLS record stays decrypted in OpenSSL, where no check of the
   socket sees it. SSL_has_pending is OpenSSL's (1.1 and 3); <openssl/ssl.h> is not imported, to
   keep its names out of Swift. */
extern int SSL_has_pending(const void *ssl);
static inline void *cc_info_openssl_connection(CURL *h) {
    struct curl_tlssessioninfo *info = 0;
    if (curl_easy_getinfo(h, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || !info) return 0;
    return info->backend == CURLSSLBACKEND_OPENSSL ? info->internals : 0;
}
static inline int cc_openssl_has_pending(const void *ssl) { return SSL_has_pending(ssl); }
/* libcurl 7.88 sets SSL_MODE_RELEASE_BUFFERS on every connection's SSL_CTX: OpenSSL then frees
   its 16.7 KB read buffer each time it is emptied and allocates it again for the next record,
   one malloc of that size and its free per response or more, which also makes glibc merge its
   fastbins (malloc_consolidate). The context callback, which libcurl calls after setting its
   modes and before making the connection's SSL, clears it: a pooled TLS connection keeps its
   buffers (Upstream/EasyHandle.swift). The OpenSSL names are spelled out, as above. */
extern long SSL_CTX_ctrl(void *ctx, int cmd, long larg, void *parg);
static CURLcode cc_keep_tls_buffers(CURL *h, void *ssl_ctx, void *p) {
    (void)h; (void)p;
    SSL_CTX_ctrl(ssl_ctx, 78 /* SSL_CTRL_CLEAR_MODE */, 0x10L /* SSL_MODE_RELEASE_BUFFERS */, 0);
    return CURLE_OK;
}
static inline CURLcode cc_easy_keep_tls_buffers(CURL *h) { return curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, cc_keep_tls_buffers); }
static inline CURLcode cc_info_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static const long CC_HTTP_VERSION_2_0 = CURL_HTTP_VERSION_2_0;

/* Socket and poll names for Upstream (Glibc alone misses some in files compiled in one batch). */
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* A connect-only handle's socket, for a tunnel (Upstream/UpstreamTunnel.swift):
   CURLINFO_ACTIVESOCKET writes a curl_socket_t, which is not a long. */
static inline curl_socket_t cc_info_active_socket(CURL *h) {
    curl_socket_t s = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK) return CURL_SOCKET_BAD;
    return s;
}
static const long CC_HTTP_VERSION_1_1 = CURL_HTTP_VERSION_1_1;

#endif
