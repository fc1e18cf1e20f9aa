#!/usr/bin/env python3
"""Conversations at once against a diffattn server (tests/cli_serve_cache.sh).

  serve_turns.py PORT CONVS TURNS CACHE [stranger]

CONVS threads each hold a conversation of TURNS turns on a byte model: a 40-token start of its own, then per turn
24 more prompt tokens and an 8-token greedy answer, sent back with the whole history (non-streamed completions,
token ids as the prompt). CACHE 0 sends cache_prompt false. With `stranger`, once two turns have
finished, a 64-token prompt that shares nothing is sent as well; the turns finished when it was sent and when it was
answered are printed. Prints one JSON line: the answers by "conversation.turn", and those two counts.
"""
import http.client
import json
import random
import sys
import threading
import time


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError("status %d: %s" % (r.status, data[:300]))
    return json.loads(data.decode("utf-8", "surrogateescape"))["choices"][0]["text"].encode("utf-8", "surrogateescape")


def main():
    port, convs, turns, cache = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    stranger = sys.argv[5:] == ["stranger"]
    done, answers, lock = [0] * convs, {}, threading.Lock()

    def conversation(k):
        rnd = random.Random(k)
        history = [rnd.randrange(97, 123) for _ in range(40)]
        for t in range(turns):
            history += [rnd.randrange(97, 123) for _ in range(24)]
            text = post(port, {"prompt": history, "max_tokens": 8, "temperature": 0, "ignore_eos": True,
                               "cache_prompt": cache})
            answers["%d.%d" % (k, t)] = text.decode("latin-1")
            history += list(text)
            with lock:
                done[k] += 1

    threads = [threading.Thread(target=conversation, args=(k,)) for k in range(convs)]
    for th in threads:
        th.start()
    sent = answered = None
    if stranger:
        while sum(done) < 2:
            time.sleep(0.005)
        with lock:
            sent = sum(done)
        post(port, {"prompt": [65] * 64, "max_tokens": 8, "temperature": 0, "ignore_eos": True})
        with lock:
            answered = sum(done)
    for th in threads:
        th.join()
    print(json.dumps({"answers": dict(sorted(answers.items())), "turns_at_send": sent, "turns_at_answer": answered}))


if __name__ == "__main__":
    main()
