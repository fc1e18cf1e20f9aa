#!/usr/bin/env python3
"""A load run against a running diffattn server (bench/serve_load.sh starts one).

N requests, C at a time; one in ten is bad, in turn: malformed JSON, a body
over --max-body, or a stream the client drops after its first event. Every
well-formed request must be answered 200 with a complete body; the server's
RSS (VmRSS of PID) is sampled after every 50 requests; the latency
percentiles of the well-formed ones are printed.

    serve_load.py PORT PID [N=2000] [C=32] [MAX_BODY=1048576] [ABANDON=0] [TERM_AT=0]
ABANDON=1 makes one in twenty a whole (non-streamed) request whose client hangs
up 0.2 s after sending it. TERM_AT=K sends SIGTERM to PID once K requests are
done: from then on a well-formed request may get 503 or find the server gone,
but one that gets its 200 must get all of it.
Exit 1 when a well-formed request went unanswered or cut, or the server died
(without TERM_AT)."""
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time

port, pid = int(sys.argv[1]), int(sys.argv[2])
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
C = int(sys.argv[4]) if len(sys.argv) > 4 else 32
MAX_BODY = int(sys.argv[5]) if len(sys.argv) > 5 else 1 << 20
ABANDON = len(sys.argv) > 6 and sys.argv[6] == "1"
TERM_AT = int(sys.argv[7]) if len(sys.argv) > 7 else 0
term = {"t": None}


def rss_kb():
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None


def one(i):
    """(kind, ok, seconds) of request i."""
    rnd = random.Random(i)
    kind = ["malformed", "oversized", "dropped"][(i // 10) % 3] if i % 10 == 9 else "good"
    if ABANDON and i % 20 == 4:
        kind = "abandoned"
    stream = kind == "dropped" or (kind == "good" and rnd.random() < 0.5)
    chat = rnd.random() < 0.5
    n = rnd.randint(4, 48)
    if chat:
        path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi %d" % i}]}
    else:
        path, body = "/v1/completions", {"prompt": [rnd.randint(1, 200) for _ in range(rnd.randint(1, 40))]}
    body.update({"max_tokens": n, "temperature": rnd.choice([0, 0.8]), "stream": stream, "ignore_eos": True})
    if kind == "abandoned":
        body.update({"max_tokens": 200, "stream": False})
    data = json.dumps(body).encode()
    if kind == "abandoned":  # the slot or queue place must be freed; the server's metrics tell
        t0 = time.time()
        try:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (path.encode(), len(data), data))
            time.sleep(0.2)
            s.close()
        except OSError:
            pass
        return kind, True, time.time() - t0
    if kind == "malformed":
        data = data[: len(data) // 2]
    elif kind == "oversized":
        data = b'{"prompt": "' + b"a" * (MAX_BODY + 100) + b'"}'
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    r = None
    try:
        c.request("POST", path, data, {"Content-Type": "application/json"})
        r = c.getresponse()
        if kind == "dropped":
            r.fp.readline()  # the first event, then hang up
            c.close()
            return kind, r.status == 200, time.time() - t0
        text = r.read()
        if kind != "good":
            want = 413 if kind == "oversized" else 400
            return kind, r.status == want and b'"error"' in text, time.time() - t0
        if r.status != 200:
            return ("refused" if term["t"] and r.status == 503 else kind), False, time.time() - t0
        if stream:
            ok = text.rstrip().endswith(b"data: [DONE]") and b'"finish_reason":"length"' in text
        else:
            j = json.loads(text.decode("utf-8", "surrogateescape"))
            ok = j["usage"]["completion_tokens"] == n
        return kind, ok, time.time() - t0
    except (OSError, http.client.HTTPException, ValueError) as e:
        if term["t"] and kind == "good" and r is None and isinstance(e, (OSError, http.client.RemoteDisconnected)):
            return "after_exit", False, time.time() - t0  # no answer begun: refused or reset as the server went
        # a 413 may close the connection before the whole body is sent
        return kind, kind == "oversized" and isinstance(e, (BrokenPipeError, ConnectionResetError)), time.time() - t0
    finally:
        c.close()


results, rss, lock, nxt = [None] * N, [], threading.Lock(), [0]


def worker():
    while True:
        with lock:
            i = nxt[0]
            nxt[0] += 1
        if i >= N:
            return
        results[i] = one(i) + (time.time(),)
        with lock:
            done = sum(r is not None for r in results)
            if TERM_AT and done >= TERM_AT and not term["t"]:
                term["t"] = time.time()
                os.kill(pid, signal.SIGTERM)
        if i % 50 == 49:
            with lock:
                rss.append((i + 1, rss_kb()))


t0 = time.time()
threads = [threading.Thread(target=worker) for _ in range(C)]
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.time() - t0
alive = rss_kb() is not None
good = [r for r in results if r[0] == "good"]
bad_ok = {k: sum(1 for r in results if r[0] == k and r[1]) for k in ("malformed", "oversized", "dropped")}
bad_n = {k: sum(1 for r in results if r[0] == k) for k in bad_ok}
lat = sorted(r[2] for r in good)
pct = lambda p: lat[min(len(lat) - 1, int(p / 100 * len(lat)))]
after = [kb for n, kb in rss if n > 200 and kb]
at200 = next((kb for n, kb in rss if n >= 200 and kb), None)
print(f"{N} requests, {C} at a time, {wall:.1f} s; server alive: {alive}")
print(f"well-formed: {sum(r[1] for r in good)} of {len(good)} answered completely")
if TERM_AT:
    print("after SIGTERM: %d refused with 503, %d found the server gone (no status line); %d others (cut or failed)"
          % (sum(r[0] == "refused" for r in results), sum(r[0] == "after_exit" for r in results),
             sum(not r[1] for r in good)))
if ABANDON:
    print(f"abandoned whole requests: {sum(r[0] == 'abandoned' for r in results)}")
for k in bad_ok:
    print(f"{k}: {bad_ok[k]} of {bad_n[k]} got the expected answer")
if TERM_AT:  # after SIGTERM a malformed or oversized request may find the server gone, a dropped stream 503
    print("malformed, oversized or dropped without the expected answer: %d before SIGTERM, %d after" % (
        sum(1 for r in results if r[0] in bad_ok and not r[1] and r[3] < term["t"]),
        sum(1 for r in results if r[0] in bad_ok and not r[1] and r[3] >= term["t"])))
print("latency of the well-formed (s): p50 %.3f  p90 %.3f  p99 %.3f  max %.3f" % (pct(50), pct(90), pct(99), lat[-1]))
print("RSS samples (requests done: MB): " + ", ".join("%d: %.1f" % (n, kb / 1024) for n, kb in rss if kb and n % 200 == 0))
if at200 and after:
    print(f"RSS: {at200 / 1024:.1f} MB after 200 requests, peak after that {max(after) / 1024:.1f} MB "
          f"({100 * (max(after) - at200) / at200:+.1f} %), at the end {after[-1] / 1024:.1f} MB")
sys.exit(0 if (alive or TERM_AT) and all(r[1] for r in good) else 1)
