/* netstamp_none.c: the plain-libc twin of netstamp.c, for programs that do
 * not link ll_netstamp. It defines no libc symbol: reads and writes are
 * libc's own, so no read carries a kernel stamp (loadgen times arrivals by
 * the write-callback clock and says so) and no write is timed (the engine
 * records send_ns -1). Each function answers as netstamp.h says for "not
 * linked". */
#include <errno.h>
#include <stddef.h>

#include "netstamp.h"

int ns_rx_available(void)
{
    return 0;
}

void ns_rx_attach(ns_rx *rx)
{
    if (rx)
        ns_rx_reset(rx);
}

int ns_rx_enable(int fd)
{
    (void)fd;
    errno = ENOSYS;
    return -1;
}

int ns_rx_keep_on(void)
{
    return -1;
}

int ns_tx_hook(ns_sent_fn fn)
{
    (void)fn;
    return -1;
}

void ns_tx_attach(int on)
{
    (void)on;
}
