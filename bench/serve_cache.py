#!/usr/bin/env python3
"""Client side of bench/serve_cache.sh, against a running diffattn server.

  serve_cache.py ttft PORT PREFIX ROUNDS VOCAB
      Time to first token of a PREFIX-token prompt (random ids < VOCAB, a new
      prefix each round) plus a 16-token suffix: non-streamed, max_tokens 1,
      so the request's wall time is its prefill and first token. Per round:
      cold (a prefix no slot holds), cached (the same prefix, another suffix),
      and with cache_prompt false (the same prefix, a third suffix). Prints
      one JSON line.

  serve_cache.py turns PORT CONVS TURNS CACHE
      CONVS conversations at once of TURNS turns on a byte model (ids are
      bytes, so each answer goes back into the history exactly as generated):
      a shared 120-token system part, then per turn a 40-token user part and
      a 16-token greedy answer; the prompt of turn t is the whole history. Each
      turn is streamed; its time to first token is when the first chunk with
      text arrives. CACHE 0 sends cache_prompt false. Prints one JSON line.
"""
import http.client
import json
import random
import statistics
import sys
import threading
import time

SYSTEM, USER, ANSWER = 120, 40, 16  # tokens: the shared system part, each user part, each answer


def post(port, body, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    t0 = time.monotonic()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("status %d: %s" % (r.status, r.read()[:300]))
    if not stream:
        data = json.loads(r.read().decode("utf-8", "surrogateescape"))
        c.close()
        return time.monotonic() - t0, None, data
    first, text = None, b""
    while True:
        line = r.readline()  # the chunked framing undone; the connection stays open after [DONE]
        if not line or line.startswith(b"data: [DONE]"):
            break
        if not line.startswith(b"data: "):
            continue
        piece = json.loads(line[6:].decode("utf-8", "surrogateescape"))["choices"][0]["text"]
        if piece and first is None:
            first = time.monotonic() - t0
        text += piece.encode("utf-8", "surrogateescape")
    c.close()
    return time.monotonic() - t0, first, text


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    out = {}
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith("diffattn_prompt_tokens"):
            k, v = line.split()
            out[k] = float(v)
    c.close()
    return out


def ttft(port, prefix, rounds, vocab):
    res = {"cold": [], "cached": [], "no_cache": []}
    for r in range(rounds):
        rnd = random.Random(1000 + r)
        p = [rnd.randrange(1, vocab) for _ in range(prefix)]
        for kind, flag in (("cold", True), ("cached", True), ("no_cache", False)):
            suffix = [rnd.randrange(1, vocab) for _ in range(16)]
            body = {"prompt": p + suffix, "max_tokens": 1, "temperature": 0, "ignore_eos": True, "cache_prompt": flag}
            t, _, _ = post(port, body)
            res[kind].append(round(t, 4))
    m = {k: statistics.median(v) for k, v in res.items()}
    print(json.dumps({"prefix": prefix, "rounds": res, "median": m, "cached_over_cold": round(m["cached"] / m["cold"], 4),
                      "metrics": metrics(port)}))


def turns(port, convs, n_turns, cache):
    system = [random.Random(7).randrange(32, 127) for _ in range(SYSTEM)]
    firsts, lock = [], threading.Lock()

    def conversation(k):
        rnd = random.Random(k)
        history = list(system)
        for t in range(n_turns):
            history += [rnd.randrange(32, 127) for _ in range(USER)]
            body = {"prompt": history, "max_tokens": ANSWER, "temperature": 0, "ignore_eos": True, "stream": True,
                    "cache_prompt": bool(cache)}
            total, first, text = post(port, body, stream=True)
            with lock:
                firsts.append(first if first is not None else total)
            history += list(text)

    t0 = time.monotonic()
    threads = [threading.Thread(target=conversation, args=(k,)) for k in range(convs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - t0
    f = sorted(firsts)
    pct = lambda q: f[min(len(f) - 1, int(q * len(f)))]
    print(json.dumps({"cache": bool(cache), "requests": len(f), "ttft_p50": round(pct(0.5), 3),
                      "ttft_p90": round(pct(0.9), 3), "ttft_max": round(f[-1], 3), "total_s": round(wall, 2),
                      "metrics": metrics(port)}))


if __name__ == "__main__":
    if sys.argv[1] == "ttft":
        ttft(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        turns(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
