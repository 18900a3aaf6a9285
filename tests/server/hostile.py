#!/usr/bin/env python3
"""hostile.py PORT PID — tests/test-server-hostile.sh's raw-socket client: what a hostile or
old client does at the HTTP level, against a running `engine serve` (stories260K, --timeout 2)
on 127.0.0.1:PORT whose process is PID. Prints "ok   ..." / "FAIL ..." per check; exit 1 if
any failed.

Checks: requests pipelined faster than they are read do not grow the server's memory (its
VmRSS) by more than 48 MiB, and every one is answered, in order, once the client reads; an
HTTP/1.0 stream has no chunked coding (the bare events, ended by the close) while HTTP/1.1's
is chunked; pipelined generations in one write and a request split into 1-byte writes are
answered; a head that never ends gets 408; JSON nested 10,000 deep, a Content-Length over the
limit, an unknown method, a 100 KB URL and invalid UTF-8 get their 4xx; response formats with
an enum of 100,000 values and 60,000 required properties are answered within 10 s; a stream cut
by the client frees its slot."""
import json
import re
import socket
import sys
import threading
import time

PORT, PID = int(sys.argv[1]), int(sys.argv[2])
SANITIZED = len(sys.argv) > 3 and sys.argv[3] == "sanitized"  # ASan's quarantine inflates RSS
failed = False


def check(name, cond, detail=""):
    global failed
    print(("ok   " if cond else "FAIL ") + name + (f" ({detail})" if detail else ""))
    failed |= not cond


def connect(timeout=60):
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(timeout)
    return s


def read_all(s):
    parts = []
    try:
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            parts.append(b)
    except OSError as e:  # a timeout is a failure the caller sees in what came back
        parts.append(f"<<{type(e).__name__}>>".encode())
    return b"".join(parts)


def exchange(data, timeout=60):
    s = connect(timeout)
    s.sendall(data)
    out = read_all(s)
    s.close()
    return out


def statuses(out):
    return [int(x) for x in re.findall(rb"HTTP/1\.1 (\d{3}) ", out)]


def rss_kib():
    with open(f"/proc/{PID}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


def post(path, body, version="HTTP/1.1", close=True):
    head = f"POST {path} {version}\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    return (head + ("Connection: close\r\n" if close else "") + "\r\n").encode() + body


def metric(name):
    out = exchange(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
    m = re.search(rb"\n" + re.escape(name.encode()) + rb" (\S+)", out)
    return float(m.group(1)) if m else 0.0  # a counter not yet counted is 0


# ---- pipelined requests not read: bounded memory, all answered in order ------------------------
N = 40000
get = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
s = connect(120)
last = get.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
sender = threading.Thread(target=lambda: s.sendall(get * (N - 1) + last))
count = 'hx_requests_total{route="/metrics",status="200"}'
answered0 = metric(count)
before = rss_kib()
sender.start()
peak = before
t_end = time.monotonic() + 4  # the client reads nothing for 4 s
while time.monotonic() < t_end:
    peak = max(peak, rss_kib())
    time.sleep(0.05)
answered = metric(count) - answered0 - 1  # less the first query itself
out = read_all(s)
sender.join()
s.close()
# what fits in 1 MiB of queued answers plus the kernel's socket buffers (< 10 MiB): 2.4 KB each
check("pipelined requests not read: at most 10,000 of 40,000 answered meanwhile",
      answered <= 10000, f"{answered:.0f}")
grown = (peak - before) // 1024
if not SANITIZED:
    check("... and the server's memory grows by at most 48 MiB", grown <= 48, f"{grown} MiB")
st = statuses(out)
ids = [int(x) for x in re.findall(rb"x-request-id: (\d+)", out)]
check(f"... and all {N} are answered 200 once read, in order",
      len(st) == N and set(st) == {200} and ids == sorted(ids), f"{len(st)} answers")

# ---- more than the read pause (about 4.3 MB) pipelined behind a generation: reading resumes ----
# While a generation runs, the server buffers what follows and stops reading past ~4.3 MB;
# once the generation is done and the buffer drains, it reads again and answers the rest.
pad = b"X-Pad: " + b"p" * 8000 + b"\r\n"
padded = get.replace(b"\r\n\r\n", b"\r\n" + pad + b"\r\n")
M = 700  # 700 x 8 KB = 5.6 MB
gen_long = post("/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 200,
                                               "temperature": 0}).encode(), close=False)
s = connect(120)
sender = threading.Thread(target=lambda: s.sendall(
    gen_long + padded * (M - 1) + padded.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")))
sender.start()
out = read_all(s)
sender.join()
s.close()
st = statuses(out)
check(f"a generation then {M} pipelined 8 KB requests (past the read pause): all {M + 1} answered",
      len(st) == M + 1 and set(st) == {200}, f"{len(st)} answers")

# ---- HTTP/1.0 streams are not chunked; HTTP/1.1 streams are -------------------------------------
body = json.dumps({"prompt": "Once upon a time", "max_tokens": 6, "stream": True}).encode()
out = exchange(post("/v1/completions", body, "HTTP/1.0", close=False))
head, _, rest = out.partition(b"\r\n\r\n")
events = [e for e in rest.split(b"\n\n") if e]
check("HTTP/1.0 stream: 200, no Transfer-Encoding, Connection: close",
      statuses(head) == [200] and b"transfer-encoding" not in head.lower()
      and b"connection: close" in head.lower(), head.split(b"\r\n")[0].decode())
check("... its body is the bare events, the last data: [DONE]",
      len(events) >= 2 and all(e.startswith(b"data: ") for e in events)
      and events[-1] == b"data: [DONE]", repr(rest[:80]))
out = exchange(post("/v1/completions", body))
head, _, rest = out.partition(b"\r\n\r\n")
check("HTTP/1.1 stream: chunked, ends with the last chunk",
      b"transfer-encoding: chunked" in head.lower() and rest.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"))

# ---- framing ----------------------------------------------------------------------------------
gen = json.dumps({"prompt": "Once", "max_tokens": 3, "temperature": 0}).encode()
out = exchange(post("/v1/completions", gen, close=False) * 4 + post("/v1/completions", gen))
texts = [json.loads(a.partition(b"\r\n\r\n")[2])["choices"][0]["text"] for a in out.split(b"HTTP/1.1 ")[1:]]
check("five generations pipelined in one write: five 200s, the same greedy text",
      statuses(out) == [200] * 5 and len(texts) == 5 and len(set(texts)) == 1, f"{statuses(out)}")
s = connect()
for b in post("/v1/completions", gen):
    s.send(bytes([b]))
out = read_all(s)
s.close()
check("a request in 1-byte writes: 200", statuses(out) == [200], repr(out[:40]))
t0 = time.monotonic()
s = connect(30)
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
try:
    for i in range(40):  # a header line every 0.2 s: the head never ends
        s.sendall(b"X-%d: a\r\n" % i)
        time.sleep(0.2)
except OSError:
    pass
out = read_all(s)
s.close()
check("a head that never ends: 408 after --timeout", statuses(out) == [408]
      and time.monotonic() - t0 < 8, f"{statuses(out)} after {time.monotonic() - t0:.1f} s")
nested = b'{"prompt":"a","x":' + b"[" * 10000 + b"]" * 10000 + b"}"
for name, req, want in [
    ("JSON nested 10000 deep", post("/v1/completions", nested), 400),
    ("Content-Length over 4 MiB", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5000000\r\n\r\n", 413),
    ("an unknown method", b"BREW /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("a 100 KB URL", b"GET /health?" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n", 431),
    ("invalid UTF-8 in a prompt", post("/v1/completions", b'{"prompt":"a\xff\xfe"}'), 400),
]:
    out = exchange(req)
    check(f"{name}: {want} with an error object",
          statuses(out) == [want] and b'"error":{"message"' in out, repr(out[:60]))

# ---- big schemas compile in time linear-ish in their size (they are compiled on the loop
# thread, which answers nobody meanwhile): an enum of 100,000 values took 46 s, 60,000 required
# properties about 30 s, when each value or name was compared with every other ----------------
for name, schema in [
    ("an enum of 100,000 integers", {"enum": list(range(100000))}),
    ("60,000 required properties", {"type": "object",
                                    "properties": {f"k{i}": {"type": "integer"} for i in range(60000)},
                                    "required": [f"k{i}" for i in range(60000)]}),
]:
    body = json.dumps({"prompt": "a", "max_tokens": 1, "response_format": {
        "type": "json_schema", "json_schema": {"name": "big", "schema": schema}}}).encode()
    t0 = time.monotonic()
    out = exchange(post("/v1/completions", body))
    dt = time.monotonic() - t0
    check(f"response_format with {name} ({len(body) >> 10} KiB): 200 within 10 s",
          statuses(out) == [200] and dt < 10, f"{statuses(out)} in {dt:.1f} s")

# ---- a stream cut by the client frees its slot ----------------------------------------------------
s = connect()
s.sendall(post("/v1/completions", json.dumps({"prompt": "Once", "max_tokens": 200, "stream": True}).encode()))
got = b""
while got.count(b"data: ") < 3:
    got += s.recv(4096)
s.close()
for _ in range(100):
    if metric("hx_requests_in_flight") == 0 and metric("hx_active_slots") == 0:
        break
    time.sleep(0.05)
check("a stream cut by the client: no request in flight, no slot active afterwards",
      metric("hx_requests_in_flight") == 0 and metric("hx_active_slots") == 0)
out = exchange(post("/v1/completions", gen))
check("... and the server answers the next request", statuses(out) == [200])
sys.exit(1 if failed else 0)
