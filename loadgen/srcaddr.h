/* srcaddr.h (internal to loadgen/): the local address each new connection is
 * bound to before connect() (scenario load.source_addrs, --source-addrs).
 *
 * DESIGN: Linux picks a connect()'s local port by walking the ephemeral range
 * (net.ipv4.ip_local_port_range, 32768-60999 by default: 28,232 ports) for one
 * not yet used toward the same server address and port, and since 4.6 it
 * walks the even ports first (__inet_hash_connect). From one source address
 * to one server the even half fills first; after that every connect() walks
 * all of it before it tries an odd port. Measured on loopback, one thread
 * connecting, 2 cores: 25-200 us per connect() up to 14,000 open, then 3-8 ms
 * (120-350 per second) from 14,116 on, all of it inside the system call, so
 * a worker thread opening a level's streams stops for seconds and the
 * streams it has already opened wait for their requests to be sent
 * (bench/scale.sh at C = 16384 reached 8,192 streams open at once, not
 * 16,384). The walk is per (source address, server): binding each socket to
 * one of K source addresses with IP_BIND_ADDRESS_NO_PORT (the port is still
 * chosen at connect(), per 4-tuple) gives each address its own range.
 *
 * Modes: "auto" (the default): a server on IPv4 loopback (127.0.0.0/8, every
 * address of which is local on Linux without configuration) gets connections
 * from 127.0.0.1 ... 127.0.0.K, K = lg_src_auto_count(the largest level's C);
 * K = 1 binds nothing, and no other server is ever bound to. "off": nothing is
 * bound. A list ("10.0.0.5,10.0.0.6", "127.0.0.1-127.0.0.8", IPv6
 * addresses): every connection to a server of an address's family is bound
 * to the next address of that family, round robin; a family the list does not
 * name is not bound.
 *
 * Threads: each worker owns its lg_src (its own copy of the addresses and
 * its own round-robin position), and curl calls lg_src_open on that worker's
 * thread: nothing is shared. */
#ifndef LOADLAW_LOADGEN_SRCADDR_H
#define LOADLAW_LOADGEN_SRCADDR_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "scenario.h"

/* The most addresses a list may name (ranges counted whole). */
#define LG_SRC_MAX 1024

typedef enum lg_src_mode { LG_SRC_AUTO, LG_SRC_OFF, LG_SRC_LIST } lg_src_mode;

typedef struct lg_src {
    lg_src_mode mode;
    struct sockaddr_in *v4;     /* list: its IPv4 addresses; auto: 127.0.0.1..K (none when K = 1) */
    size_t n_v4, next_v4;       /* next_v4: the one the next IPv4 connection gets */
    struct sockaddr_in6 *v6;    /* list only */
    size_t n_v6, next_v6;
} lg_src;

/* Parse a spec (NULL or "auto", "off", or a list; module comment) into *s,
 * with no addresses yet for auto. 0, or LL_EINVAL / LL_ENOMEM with a message
 * naming the item. The caller frees with lg_src_free (also after a failure). */
int lg_src_parse(const char *spec, lg_src *s, char *err, size_t errlen);

/* Source addresses "auto" uses for `conns` connections open at once toward
 * one loopback server, with the ephemeral range [port_lo, port_hi]: enough
 * that each holds at most a quarter of the range (half of the even ports
 * connect() takes first, the rest left to TIME_WAIT and other clients of the
 * same server); 1 up to that, at most 64. Pure. */
int lg_src_auto_count(int64_t conns, long port_lo, long port_hi);

/* This host's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), or
 * Linux's default 32768-60999 when it cannot be read. */
void lg_src_port_range(long *lo, long *hi);

/* Set up a worker's lg_src from the scenario: parse load.source_addrs; for
 * auto, K from the largest level's concurrency (a level without a cap counts
 * as the open-file limit, the most sockets the process can hold); for a
 * list, check that every address can be bound here (a clear message now,
 * not a connect error per request later). `first`: where this worker starts
 * in the rotation (rank * threads + worker index: workers and ranks on one
 * host spread evenly). 0 or a code with err. */
int lg_src_init(lg_src *s, const scn_scenario *scn, int first, char *err, size_t errlen);
void lg_src_free(lg_src *s);

/* CURLOPT_OPENSOCKETFUNCTION with CURLOPT_OPENSOCKETDATA = the worker's lg_src:
 * the socket for a connection to `a`, bound as the mode says. A failed bind
 * of a listed address fails the connection (CURL_SOCKET_BAD: a connect
 * error); of an auto one, the socket goes out unbound. */
curl_socket_t lg_src_open(void *ud, curlsocktype purpose, struct curl_sockaddr *a);

#endif
