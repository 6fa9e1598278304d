#!/usr/bin/env python3
"""mem_per_stream.py: the engine server's memory per open stream.

Usage: bench/engine/mem_per_stream.py LOADLAW [COUNTS] [-- SERVE ARGS...]
  e.g. bench/engine/mem_per_stream.py build/loadlaw 500,2000 -- --conn-memory 32k

Starts `LOADLAW serve --port 0 --law 1000 --max-running 4096` (one token a
second per stream, so streams stay open and nearly idle), opens COUNTS
streaming requests in steps, drains what they received, and prints the
server's VmRSS at each step and the slope between the first and last step
(KB per stream): the figure that matters, not the total. The slope between
the steps leaves out the start-up cost; the client side is Python sockets,
which cost the server nothing but their connection.
Measured (2026-11, a 2-core machine, 500 -> 2000 streams): 32.6 KB/stream with
libmicrohttpd's default 32 KiB pool, 8.6 KB/stream at --conn-memory 8k.
"""
import socket
import subprocess
import sys
import time


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return -1


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    counts = [int(x) for x in (args[1] if len(args) > 1 else "500,2000").split(",")]
    srv = subprocess.Popen([args[0], "serve", "--port", "0", "--law", "1000", "--max-running", "4096",
                            "--max-connections", str(max(counts) + 64)] + extra,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = srv.stdout.readline().strip()
        port = int(url.rsplit(":", 1)[1])
        body = b'{"prompt":"a b c","max_tokens":100000,"ignore_eos":true,"stream":true}'
        req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
        socks, points = [], []
        time.sleep(0.5)
        print(f"streams 0 rss_kb {rss_kb(srv.pid)}", flush=True)
        for c in counts:
            while len(socks) < c:
                s = socket.create_connection(("127.0.0.1", port))
                s.sendall(req)
                socks.append(s)
            time.sleep(3)
            for s in socks:  # drain, so queued bytes are not what we measure
                s.setblocking(False)
                try:
                    while s.recv(65536):
                        pass
                except BlockingIOError:
                    pass
            time.sleep(2)
            points.append((c, rss_kb(srv.pid)))
            print(f"streams {c} rss_kb {points[-1][1]}", flush=True)
        if len(points) >= 2:
            (c0, r0), (c1, r1) = points[0], points[-1]
            print(f"slope_kb_per_stream {(r1 - r0) / (c1 - c0):.1f} ({c0} -> {c1} streams)")
        for s in socks:
            s.close()
    finally:
        srv.terminate()
        srv.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
