// Header-only shim for the Linux calls Glibc's Swift overlay does not export.
// No feature macros here: every shim in the package must agree on them.
#ifndef PLATFORM_PROXY_CLINUX_SHIM_H
#define PLATFORM_PROXY_CLINUX_SHIM_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/un.h>
#include <unistd.h>
#include <malloc.h>

/* accept4(2) is declared only under _GNU_SOURCE; declare it ourselves. */
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

static inline int cl_accept4(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/* sched_getaffinity(2) is declared only under _GNU_SOURCE; declare it ourselves, mask as bytes. */
extern int sched_getaffinity(pid_t pid, size_t cpusetsize, void *mask);

/* CPUs in this thread's affinity mask, or 0 if it cannot be read. */
static inline int cl_affinity_cpu_count(void) {
    unsigned char mask[1024];
    if (sched_getaffinity(0, sizeof mask, mask) != 0) return 0;
    int count = 0;
    for (size_t i = 0; i < sizeof mask; i++) count += __builtin_popcount(mask[i]);
    return count;
}

static inline int cl_errno(void) { return errno; }

static inline int cl_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static inline int cl_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

static inline int cl_epoll_wait(int epfd, struct epoll_event *events, int max, int timeout) {
    return epoll_wait(epfd, events, max, timeout);
}

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441 /* the same number on every architecture (Linux 5.11) */
#endif

/* epoll_wait with a nanosecond timeout (negative: forever), so the loop's timers need no
 * timerfd. -1 with errno ENOSYS (kernel before 5.11) or EPERM (a seccomp profile that does not
 * know the call) means: use cl_epoll_wait. */
static inline int cl_epoll_pwait2(int epfd, struct epoll_event *events, int max, int64_t timeout_ns) {
    struct timespec ts;
    ts.tv_sec = timeout_ns / 1000000000;
    ts.tv_nsec = timeout_ns % 1000000000;
    return (int)syscall(SYS_epoll_pwait2, epfd, events, max, timeout_ns < 0 ? NULL : &ts, NULL, (size_t)8);
}

static inline uint64_t cl_epoll_event_data(const struct epoll_event *ev) { return ev->data.u64; }
static inline uint32_t cl_epoll_event_events(const struct epoll_event *ev) { return ev->events; }

static inline int cl_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/* The dynamic loader's address as the kernel passed it (AT_BASE): 0 when the loader itself was the
   program started (`ld.so BINARY ...`), so /proc/self/exe names the loader. */
#include <sys/auxv.h>
static inline unsigned long cl_loader_base(void) { return getauxval(AT_BASE); }

/* Blocks SIGINT, SIGTERM, SIGHUP (delivered through a signalfd) and ignores SIGPIPE. */
static inline int cl_signalfd_for_lifecycle(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    signal(SIGPIPE, SIG_IGN);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Reads one signal from a signalfd; returns its number, 0 when none is pending, -1 on error. */
static inline int cl_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof info);
    if (n == (ssize_t)sizeof info) return (int)info.ssi_signo;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
}

static inline int cl_monotonic_now(int64_t *out) {
    struct timespec ts;
    int r = clock_gettime(CLOCK_MONOTONIC, &ts);
    *out = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return r;
}

static inline int cl_set_int_option(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value);
}

/// Returns free heap memory at the top and in the middle of glibc's arenas to the kernel.
static inline void cl_malloc_trim(void) { (void)malloc_trim(0); }

#endif
