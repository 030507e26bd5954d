// The C side of CurlTuning: glibc's own definitions of the calls the executable overrides, and the
// per-descriptor and thread-local words those overrides read. No feature macros here: every shim
// in the package must agree on them.
#ifndef PLATFORM_PROXY_CCURLTUNING_SHIM_H
#define PLATFORM_PROXY_CCURLTUNING_SHIM_H

#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* Whether the tuning is on (CurlTuning/CurlTuning.swift): set once at start, before any loop thread,
   and read by each override first; off, every override is glibc's call and nothing else. A weak
   definition, so every module that includes this header shares one. */
__attribute__((weak)) int cc_tuning_on = 0;
static inline int cc_tuning_enabled(void) { return __atomic_load_n(&cc_tuning_on, __ATOMIC_RELAXED); }
static inline void cc_set_tuning_enabled(int on) { __atomic_store_n(&cc_tuning_on, on, __ATOMIC_RELAXED); }

/* glibc's poll, which it also exports as __poll. */
extern int __poll(struct pollfd *fds, nfds_t nfds, int timeout);
static inline int cc_kernel_poll(struct pollfd *fds, nfds_t nfds, int timeout) { return __poll(fds, nfds, timeout); }

/* Sends held with MSG_MORE are pushed at a pass's end by clearing TCP_CORK, which transmits what
   the socket holds and leaves its options as they were (CurlTuning/SendBatch.swift). */
static inline int cc_push_held(int fd) { int off = 0; return setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof off); }

/* One byte per descriptor, written by the loop that owns the socket and read by whichever thread
   polls that descriptor: relaxed atomics, so the compiler neither tears nor caches them. */
static inline unsigned char cc_load_byte(const unsigned char *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void cc_store_byte(unsigned char *p, unsigned char v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
/* The same for one pointer per descriptor (CurlTuning/ReadAhead.swift). */
static inline void *cc_load_pointer(void *const *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void cc_store_pointer(void **p, void *v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

/* The thread's pass of a loop's client (CurlTuning/CurlPass.swift) and whether its connection
   checks are all the kernel's (QuietSockets.asking): thread-local words that the executable's
   poll, recv, send and clock_gettime read on every call, a load each (pthread_getspecific with a
   key in a lazily initialised Swift global costs a call into libc and a swift_once check per
   lookup; bench/cost-profile.sh counts them). Weak definitions, so every module that includes
   this header shares one of each; initial-exec, as the executable holds them; read and written
   only through these functions, as Swift does not import thread-local variables. */
__attribute__((weak, tls_model("initial-exec"))) __thread void *cc_thread_pass = 0;
__attribute__((weak, tls_model("initial-exec"))) __thread int cc_thread_strict = 0;
static inline void *cc_current_pass(void) { return cc_thread_pass; }
static inline void cc_set_current_pass(void *pass) { cc_thread_pass = pass; }
static inline int cc_strict_checks(void) { return cc_thread_strict; }
static inline void cc_set_strict_checks(int strict) { cc_thread_strict = strict; }

/* glibc's clock_gettime, the next definition after the executable's (dlsym(RTLD_NEXT), spelled
   as the handle -1 so no feature macro is needed), looked up at the first call. */
typedef int (*cc_clock_read)(clockid_t clock, struct timespec *time);
__attribute__((weak)) cc_clock_read cc_glibc_clock_read = 0;
static inline int cc_glibc_clock_gettime(clockid_t clock, struct timespec *time) {
    cc_clock_read read = __atomic_load_n(&cc_glibc_clock_read, __ATOMIC_RELAXED);
    if (__builtin_expect(read == 0, 0)) {
        read = (cc_clock_read)dlsym((void *)-1l, "clock_gettime");
        if (!read) {
            fputs("platform-proxy: dlsym(RTLD_NEXT, \"clock_gettime\") found nothing\n", stderr);
            abort();
        }
        __atomic_store_n(&cc_glibc_clock_read, read, __ATOMIC_RELAXED);
    }
    return read(clock, time);
}

#endif
