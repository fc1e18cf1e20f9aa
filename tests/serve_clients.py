"""Concurrent raw-socket clients of diffattn serve for the SIGTERM tests (tests/cli_serve_lifecycle.sh).

    python3 serve_clients.py PORT PID SCENARIO TOKENS

sends the scenario's requests from threads, sends SIGTERM to PID when the scenario says, and prints each
answer's status, seconds after the signal, completion tokens and error message as JSON.
  running: every one of 3 slots busy: a large echo with 20 alternatives per position (read slowly) and
           two plain answers, TOKENS tokens each
  queued:  one slot busy with TOKENS tokens; a completion, a stream and a chat wait in the queue
"""
import json
import os
import signal
import socket
import sys
import threading
import time

port, pid, scenario, tokens = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
out = {}


def dechunk(data):
    body = b''
    while data:
        n, _, data = data.partition(b'\r\n')
        n = int(n, 16)
        if n == 0:
            break
        body, data = body + data[:n], data[n + 2:]
    return body


def whole(name, path, body, slow=False):
    """POSTs body and reads the answer to the end, 16 KB at a time (pausing 20 ms after each when slow)."""
    b = json.dumps(body).encode()
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n'
              b'Content-Length: %d\r\n\r\n%s' % (path.encode(), len(b), b))
    data = b''
    while True:
        try:
            chunk = s.recv(16384)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        if slow:
            time.sleep(0.02)
    r = {'t': time.time()}
    head, _, rest = data.partition(b'\r\n\r\n')
    r['status'] = int(head.split()[1]) if head else 0
    try:
        if b'transfer-encoding: chunked' in head.lower():
            rest = dechunk(rest)
        r['json'] = None if rest.startswith(b'data:') else json.loads(rest.decode('utf-8', 'surrogateescape'))
    except Exception as e:  # a cut answer
        r['error'] = repr(e)
    out[name] = r


def start(*a, **k):
    t = threading.Thread(target=whole, args=a, kwargs=k)
    t.start()
    return t


threads = []
if scenario == 'running':
    ids = [72, 101, 108, 108, 111] * 4
    threads.append(start('big', '/v1/completions', {"prompt": ids, "max_tokens": tokens, "ignore_eos": True,
                                                     "echo": True, "logprobs": 20}, slow=True))
    for k in ('p1', 'p2'):
        threads.append(start(k, '/v1/completions', {"prompt": k, "max_tokens": tokens, "ignore_eos": True}))
    time.sleep(0.5)
else:
    threads.append(start('run', '/v1/completions', {"prompt": "P", "max_tokens": tokens, "ignore_eos": True}))
    time.sleep(0.3)
    threads += [start('q1', '/v1/completions', {"prompt": "Q", "max_tokens": 1500, "ignore_eos": True}),
                start('q2', '/v1/completions', {"prompt": "R", "max_tokens": 1500, "ignore_eos": True,
                                                "stream": True}),
                start('q3', '/v1/chat/completions', {"messages": [{"role": "user", "content": "hi"}],
                                                     "max_tokens": 1500})]
    time.sleep(0.3)
t_term = time.time()
os.kill(pid, signal.SIGTERM)
for t in threads:
    t.join(600)
res = {}
for k, v in out.items():
    j = v.get('json') or {}
    res[k] = {'status': v['status'], 'after_term': round(v['t'] - t_term, 2),
              'tokens': (j.get('usage') or {}).get('completion_tokens'),
              'message': (j.get('error') or {}).get('message'), 'cut': v.get('error')}
    if k == 'big' and j.get('choices'):
        res[k]['positions'] = len(j['choices'][0]['logprobs']['tokens'])
print(json.dumps(res))
