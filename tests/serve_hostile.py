#!/usr/bin/env python3
"""Hostile HTTP clients of diffattn serve, for tests/cli_serve_http.sh.

  serve_hostile.py raw PORT REQUEST
      Sends REQUEST (Python escapes: \\r\\n) in one piece and reads for 3 s or until
      the server closes. Prints the statuses of the answers, then EOF (closed by
      the server) or OPEN, e.g. "400 EOF".

  serve_hostile.py flood PORT N_SILENT N_TRICKLE WATCH_S
      Opens N_SILENT connections that send nothing and N_TRICKLE that send one
      byte of a request header every 3 s, asks /health on a fresh connection
      from the same address, and watches WATCH_S seconds which of them the
      server closes, and when (seconds after each was opened). Prints JSON.
"""
import codecs
import json
import re
import resource
import selectors
import socket
import sys
import threading
import time


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else n, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= n


def read_all(s, seconds):
    """What arrives until EOF or `seconds`; closed: whether the server closed."""
    data, end = b"", time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return data, False
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return data, False
        except OSError:
            return data, True
        if not chunk:
            return data, True
        data += chunk


def health(port, seconds, out):
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=seconds)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data, _ = read_all(s, seconds - (time.monotonic() - t0))
        s.close()
        m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
        out["health_status"] = int(m.group(1)) if m else 0
    except OSError as e:
        out["health_status"] = 0
        out["health_error"] = str(e)
    out["health_s"] = round(time.monotonic() - t0, 3)


def raw(port, request):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(codecs.decode(request, "unicode_escape").encode("latin-1"))
    data, closed = read_all(s, 3.0)
    s.close()
    statuses = re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)
    print(" ".join(x.decode() for x in statuses) + (" EOF" if closed else " OPEN"))
    sys.stdout.flush()


def flood(port, n_silent, n_trickle, watch_s):
    n = n_silent + n_trickle
    if not raise_nofile(n + 64):
        print(json.dumps({"skip": "the open-file limit is under %d" % (n + 64)}))
        return
    socks, kinds, opened_at = [], [], []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        opened_at.append(time.monotonic())
        s.setblocking(False)
        socks.append(s)
        kinds.append("silent" if i < n_silent else "trickle")
    t0 = time.monotonic()
    out = {"opened": n}
    probe = threading.Thread(target=health, args=(port, 15.0, out))
    probe.start()
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    header = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100000
    closed_at, sent, next_byte = {}, 0, t0
    while time.monotonic() - t0 < watch_s:
        now = time.monotonic()
        if n_trickle and now >= next_byte:
            for i in range(n_silent, n):
                if i not in closed_at:
                    try:
                        socks[i].send(header[sent:sent + 1])
                    except OSError:
                        pass
            sent += 1
            next_byte += 3.0
        for key, _ in sel.select(timeout=0.1):
            i = key.data
            try:
                chunk = socks[i].recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                closed_at[i] = time.monotonic() - opened_at[i]
                sel.unregister(socks[i])
    probe.join()
    for kind in ("silent", "trickle"):
        times = [closed_at[i] for i in closed_at if kinds[i] == kind]
        out[kind] = {"n": kinds.count(kind), "closed": len(times),
                     "first_close_s": round(min(times), 2) if times else None,
                     "last_close_s": round(max(times), 2) if times else None}
    print(json.dumps(out))
    sys.stdout.flush()
    for s in socks:
        s.close()


if __name__ == "__main__":
    if sys.argv[1] == "raw":
        raw(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "flood":
        flood(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
