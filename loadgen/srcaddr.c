/* srcaddr.c: the local address of each new connection (srcaddr.h says why
 * and when). Parsing the spec, the auto count, and curl's open-socket hook. */
#include "srcaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "loadgen.h"

/* Linux's default ephemeral range, when /proc cannot say. */
#define LG_SRC_PORT_LO 32768L
#define LG_SRC_PORT_HI 60999L
/* "auto" never uses more than this many loopback addresses: 64 quarters of
 * the default range is 450k connections, past any open-file limit. */
#define LG_SRC_AUTO_MAX 64

static int push_v4(lg_src *s, uint32_t host_order)
{
    if (s->n_v4 + s->n_v6 >= LG_SRC_MAX)
        return LL_ERANGE;
    struct sockaddr_in *n = realloc(s->v4, (s->n_v4 + 1) * sizeof *n);
    if (!n)
        return LL_ENOMEM;
    s->v4 = n;
    n[s->n_v4++] = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(host_order)};
    return 0;
}

static int push_v6(lg_src *s, const struct in6_addr *a)
{
    if (s->n_v4 + s->n_v6 >= LG_SRC_MAX)
        return LL_ERANGE;
    struct sockaddr_in6 *n = realloc(s->v6, (s->n_v6 + 1) * sizeof *n);
    if (!n)
        return LL_ENOMEM;
    s->v6 = n;
    n[s->n_v6++] = (struct sockaddr_in6){.sin6_family = AF_INET6, .sin6_addr = *a};
    return 0;
}

/* One item: an IPv4 address, an IPv4 range "A-B" (A <= B, both included),
 * or an IPv6 address. */
static int parse_item(lg_src *s, const char *item, char *err, size_t errlen)
{
    char a[64], *dash;
    struct in_addr lo, hi;
    struct in6_addr v6;
    int rc = 0;
    if (strlen(item) >= sizeof a)
        goto bad;
    snprintf(a, sizeof a, "%s", item);
    if ((dash = strchr(a, '-'))) {
        *dash = '\0';
        if (inet_pton(AF_INET, a, &lo) != 1 || inet_pton(AF_INET, dash + 1, &hi) != 1 ||
            ntohl(lo.s_addr) > ntohl(hi.s_addr))
            goto bad;
        for (uint64_t x = ntohl(lo.s_addr); x <= ntohl(hi.s_addr) && rc == 0; x++)
            rc = push_v4(s, (uint32_t)x);
    } else if (inet_pton(AF_INET, a, &lo) == 1) {
        rc = push_v4(s, ntohl(lo.s_addr));
    } else if (inet_pton(AF_INET6, a, &v6) == 1) {
        rc = push_v6(s, &v6);
    } else {
        goto bad;
    }
    if (rc == LL_ERANGE)
        ll_errf(err, errlen, "more than %d addresses (at '%s')", LG_SRC_MAX, item);
    else if (rc)
        ll_errf(err, errlen, "out of memory");
    return rc;
bad:
    ll_errf(err, errlen, "'%s' is not an IPv4 address, an IPv4 range A-B with A <= B, or an IPv6 address "
                         "(or give \"auto\" or \"off\")", item);
    return LL_EINVAL;
}

int lg_src_parse(const char *spec, lg_src *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (!spec || !strcmp(spec, "auto"))
        return 0;
    if (!strcmp(spec, "off")) {
        s->mode = LG_SRC_OFF;
        return 0;
    }
    s->mode = LG_SRC_LIST;
    char item[128];
    for (const char *p = spec;;) {
        size_t l = strcspn(p, ",");
        snprintf(item, sizeof item, "%.*s", (int)(l < sizeof item ? l : sizeof item - 1), p);
        if (l == 0 || l >= sizeof item) {
            ll_errf(err, errlen, "expected \"auto\", \"off\" or a list like 127.0.0.1-127.0.0.8,10.0.0.5, "
                                 "got '%s'", spec);
            return LL_EINVAL;
        }
        int rc = parse_item(s, item, err, errlen);
        if (rc)
            return rc;
        if (!p[l])
            break;
        p += l + 1;
    }
    return 0;
}

int lg_src_auto_count(int64_t conns, long port_lo, long port_hi)
{
    int64_t per = (port_hi - port_lo + 1) / 4;
    if (per < 1)
        per = 1;
    int64_t k = conns > 0 ? (conns + per - 1) / per : 1;
    return k < 1 ? 1 : k > LG_SRC_AUTO_MAX ? LG_SRC_AUTO_MAX : (int)k;
}

void lg_src_port_range(long *lo, long *hi)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    *lo = LG_SRC_PORT_LO;
    *hi = LG_SRC_PORT_HI;
    if (!f)
        return;
    long a, b;
    if (fscanf(f, "%ld %ld", &a, &b) == 2 && a > 0 && b >= a && b < 65536) {
        *lo = a;
        *hi = b;
    }
    fclose(f);
}

/* The most connections this process may hold at once over the levels. */
static int64_t max_conns(const scn_scenario *scn)
{
    int64_t m = 0;
    for (size_t i = 0; i < scn->n_levels; i++) {
        int64_t c = scn->levels[i].concurrency;
        if (c <= 0) { /* open level without a cap: as many as it has descriptors for */
            struct rlimit rl;
            c = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (int64_t)rl.rlim_cur
                                                                                   : 1 << 20;
        }
        if (c > m)
            m = c;
    }
    return m;
}

static socklen_t addr_len(const struct sockaddr *sa)
{
    return sa->sa_family == AF_INET ? (socklen_t)sizeof(struct sockaddr_in) : (socklen_t)sizeof(struct sockaddr_in6);
}

/* Bind fd to sa with the port left to connect(). 0 or -errno. */
static int bind_no_port(int fd, const struct sockaddr *sa)
{
    int one = 1;
#ifdef IP_BIND_ADDRESS_NO_PORT
    /* without it bind() takes a port for the address alone, out of one
     * range shared by every server: still spread, with less room */
    (void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
#else
    (void)one;
#endif
    return bind(fd, sa, addr_len(sa)) == 0 ? 0 : -errno;
}

/* Every listed address can be bound here. */
static int probe(const lg_src *s, char *err, size_t errlen)
{
    for (size_t i = 0; i < s->n_v4 + s->n_v6; i++) {
        int v4 = i < s->n_v4;
        const struct sockaddr *sa =
            v4 ? (const struct sockaddr *)&s->v4[i] : (const struct sockaddr *)&s->v6[i - s->n_v4];
        const void *ip = v4 ? (const void *)&s->v4[i].sin_addr : (const void *)&s->v6[i - s->n_v4].sin6_addr;
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), e = fd < 0 ? -errno : bind_no_port(fd, sa);
        if (fd >= 0)
            close(fd);
        if (e) {
            char name[INET6_ADDRSTRLEN] = "?";
            inet_ntop(sa->sa_family, ip, name, sizeof name);
            ll_errf(err, errlen, "cannot bind %s here: %s", name, strerror(-e));
            return LL_EINVAL;
        }
    }
    return 0;
}

int lg_source_addrs_check(const char *spec, char *err, size_t errlen)
{
    lg_src s;
    int rc = lg_src_parse(spec, &s, err, errlen);
    if (rc == 0 && s.mode == LG_SRC_LIST)
        rc = probe(&s, err, errlen);
    lg_src_free(&s);
    return rc;
}

int lg_src_init(lg_src *s, const scn_scenario *scn, int first, char *err, size_t errlen)
{
    char why[512] = "";
    int rc = lg_src_parse(scn->source_addrs, s, why, sizeof why);
    if (rc == 0 && s->mode == LG_SRC_LIST)
        rc = probe(s, why, sizeof why);
    if (rc) {
        ll_errf(err, errlen, "load.source_addrs: %s", why);
        return rc;
    }
    if (s->mode == LG_SRC_AUTO) {
        long lo, hi;
        lg_src_port_range(&lo, &hi);
        int k = lg_src_auto_count(max_conns(scn), lo, hi);
        for (int i = 0; k > 1 && i < k && rc == 0; i++)
            rc = push_v4(s, 0x7f000001u + (uint32_t)i); /* 127.0.0.1 + i */
        if (rc) {
            ll_errf(err, errlen, "out of memory");
            return rc;
        }
    }
    if (first < 0)
        first = 0;
    s->next_v4 = s->n_v4 ? (size_t)first % s->n_v4 : 0;
    s->next_v6 = s->n_v6 ? (size_t)first % s->n_v6 : 0;
    return 0;
}

void lg_src_free(lg_src *s)
{
    free(s->v4);
    free(s->v6);
    memset(s, 0, sizeof *s);
}

/* The address a connection to `to` is bound to, or NULL: none. */
static const struct sockaddr *pick(lg_src *s, const struct sockaddr *to)
{
    if (to->sa_family == AF_INET && s->n_v4) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)to;
        if (s->mode == LG_SRC_AUTO && (ntohl(in->sin_addr.s_addr) >> 24) != 127)
            return NULL; /* auto: loopback servers only */
        const struct sockaddr_in *a = &s->v4[s->next_v4];
        s->next_v4 = (s->next_v4 + 1) % s->n_v4;
        return (const struct sockaddr *)a;
    }
    if (to->sa_family == AF_INET6 && s->n_v6) {
        const struct sockaddr_in6 *a = &s->v6[s->next_v6];
        s->next_v6 = (s->next_v6 + 1) % s->n_v6;
        return (const struct sockaddr *)a;
    }
    return NULL;
}

curl_socket_t lg_src_open(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    lg_src *s = ud;
    curl_socket_t fd = socket(a->family, a->socktype, a->protocol);
    if (fd == CURL_SOCKET_BAD || purpose != CURLSOCKTYPE_IPCXN || (size_t)a->addrlen < sizeof(struct sockaddr))
        return fd;
    const struct sockaddr *src = pick(s, &a->addr);
    if (!src)
        return fd;
    /* auto, on a host without that loopback address after all: a failed bind
     * leaves the socket unbound, and connect() picks as with "off" */
    if (bind_no_port(fd, src) != 0 && s->mode != LG_SRC_AUTO) {
        close(fd);
        fd = CURL_SOCKET_BAD;
    }
    return fd;
}
