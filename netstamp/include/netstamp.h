/* netstamp.h: the seam between the libraries and the kernel's socket stamps.
 * netstamp/ is the one module that defines libc symbols (recv, poll, send,
 * sendmsg, in netstamp.c); loadgen and the engine only call the functions
 * below, so a program gets the definitions only when it links ll_netstamp
 * (the loadlaw binary, the benches and the tests that check stamps). Every
 * other program gets netstamp_none.c, the plain-libc twin: no stamps,
 * ns_rx_available() and ns_tx_hook() say so, and loadgen times arrivals by
 * the write-callback clock (as load.arrival_stamp "user") while the engine
 * records send_ns -1.
 *
 * Receive side (loadgen's workers): the kernel's receive time of the bytes a
 * worker reads, so a token is stamped when it reached this host, not when
 * the worker got round to it.
 *
 * DESIGN: at C = 1024 a step's 1,024 tokens arrive within a few hundred
 * microseconds and one worker thread reads them one socket at a time; with a
 * clock read in the write callback the last of them is stamped milliseconds
 * late (bench_loadgen: client lag p99 ~29 ms on 2 shared cores), and that
 * lateness is the client's, not the server's (bench_loadgen with kernel
 * stamps: the worker's own read lag at C = 1024 was p99 ~6 ms). Linux stamps every received
 * packet (SO_TIMESTAMPNS) and hands the stamp back beside the data from
 * recvmsg(). libcurl reads with recv() and offers no hook for the ancillary
 * data (netstamp.c says what was tried), so netstamp.c defines recv(): the
 * executable's definition comes first in the dynamic linker's lookup, and
 * libcurl's calls land there. On a thread that has not attached an ns_rx (the engine's, the
 * records writer, anything else) it is plain recvfrom(); on a worker thread
 * it is recvmsg() with room for the stamp, which it leaves in that worker's
 * ns_rx with the descriptor it came from. loadgen/xfer_recv.c takes the stamp only for its
 * own socket and only when it is not later than the clock at the callback,
 * else it falls back to the clock and counts the fallback (level_end
 * "client".reads_kstamp, docs/records.md), so a libcurl that reads some
 * other way costs precision, never correctness.
 *
 * Since the fields of ns_rx are this thread's, nothing here takes a lock.
 *
 * The same definition answers one question without a system call: after
 * every read libcurl 7.88 asks poll(), with a zero timeout, whether the
 * socket has more (transfer.c data_pending), ~7% of a worker's time in a
 * profile. When the read just made on that socket, in the same curl call,
 * returned fewer bytes than asked, the socket was empty microseconds ago:
 * poll() says so (0) without asking the kernel. Bytes that arrive in between
 * are not lost: the worker's epoll set is level-triggered and reports the
 * socket again at once. Any other poll() goes to the kernel (ppoll).
 *
 * A read's stamp is that of the last packet it copied. After a loss, TCP
 * holds later packets back until the retransmission arrives and may merge
 * them with it, so a read can carry a stamp from before its first bytes
 * arrived. Such a read is recognised, with no system call, when its stamp
 * is older than the last moment the transfer's socket was found empty
 * (read_at_ns of a read that drained it: whatever was in order then was
 * read then), less 1 ms for the packets stamped but not yet queued to the
 * socket at that moment; xfer_recv.c then takes the clock. A held-back packet
 * that arrived after that moment (or within the 1 ms) still passes: early
 * by at most the time from its arrival to the retransmission's.
 *
 * The stamp is CLOCK_REALTIME; the run's clock is CLOCK_MONOTONIC. The offset
 * between them is sampled once per epoll wake-up (ns_rx_clock): an NTP slew
 * moves it by at most ~0.5 us per ms. A step of the wall clock between two
 * wake-ups can put a stamp in the future or before its request was sent:
 * xfer_recv.c then takes the clock instead (counted as above). */
#ifndef LOADLAW_NETSTAMP_H
#define LOADLAW_NETSTAMP_H

#include <stdint.h>

typedef struct ns_rx {
    int fd;             /* the socket of the last read that returned data, -1 none */
    int64_t t_ns;       /* its kernel receive time (CLOCK_MONOTONIC), -1 none */
    int64_t read_at_ns; /* the clock just before that read (CLOCK_MONOTONIC) */
    int drained_fd;     /* a socket a read emptied (fewer bytes than asked) since the
                         * worker last cleared it (worker.c drive), -1 none */
    int64_t rt_minus_mono; /* CLOCK_REALTIME - CLOCK_MONOTONIC at the last ns_rx_clock */
} ns_rx;

/* 1 when this program links netstamp.c (reads can carry the kernel's stamp),
 * 0 with the plain twin (ns_rx_attach then stamps nothing). */
int ns_rx_available(void);
/* Forget the last read (no stamp, no socket found empty). */
void ns_rx_reset(ns_rx *rx);
/* Stamp this thread's recv() calls into rx from now on; NULL stops it. */
void ns_rx_attach(ns_rx *rx);
/* Sample the realtime-to-monotonic offset (each wake-up, before reading). */
void ns_rx_clock(ns_rx *rx);
/* Ask the kernel to stamp what fd receives (SO_TIMESTAMPNS). 0 or -1 (errno). */
int ns_rx_enable(int fd);
/* A socket that only asks for stamps, opened once per process and kept:
 * Linux switches stamping on for all packets some time after the first
 * socket asks (a deferred static-key update) and off when the last one
 * closes, so without it the first packets of each run went unstamped. The
 * first call waits (at most ~1 s; usually not at all) until a datagram it
 * sends itself comes back stamped on arrival (not in recvmsg(), where the
 * kernel stamps a datagram that came unstamped, and a TCP segment never).
 * Its fd, or -1 (then stamps come when the kernel is ready). */
int ns_rx_keep_on(void);

/* Send side (the engine's handoff records, send_ns): the moment a socket
 * write returned. MHD writes with send() (sendmsg() when headers and body go
 * out together) and offers no hook after a write, so netstamp.c defines both.
 * On a thread that called ns_tx_attach(1), a write that took every byte it
 * was asked for calls the registered hook with its descriptor (errno is kept
 * across the call); every other write goes straight to the kernel.
 * ns_tx_hook: register fn (one per process; NULL removes it). 0, or -1 with
 * the plain twin (no send stamps: the caller records -1). */
typedef void (*ns_sent_fn)(int fd);
int ns_tx_hook(ns_sent_fn fn);
/* This thread's writes call the hook (1) or not (0). */
void ns_tx_attach(int on);

#endif
