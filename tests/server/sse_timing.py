#!/usr/bin/env python3
"""sse_timing.py PORT BODY — tests/test-server.sh's check that a stream is streamed: POST BODY
(a streaming completion) to 127.0.0.1:PORT/v1/completions, note when each SSE event arrives,
and compare the spread of the content chunks' arrival times with the generation time the
server reports in the finish chunk (hx.generation_tokens_per_s). A server that held the chunks
back until the end (or buffered them in bulk) delivers them all at once: spread near 0.

Exit 0 when the first content chunk arrived before the last by at least half the server's
generation time, 1 otherwise (with the figures), 2 if the stream itself was wrong."""
import http.client
import json
import sys
import time


def main():
    port, body = int(sys.argv[1]), sys.argv[2]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.monotonic()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        print(f"status {resp.status}: {resp.read()[:300]!r}")
        return 2
    content, finish, usage, done = [], None, None, False
    for raw in resp:  # http.client undoes the chunking; lines come as they arrive
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        t = time.monotonic() - t0
        if line == "data: [DONE]":
            done = True
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        ch = ev["choices"][0] if ev.get("choices") else None
        if ch and ch.get("finish_reason"):
            finish = ev
        elif ch and ch.get("text"):
            content.append(t)
    if not done or not finish or len(content) < 10:
        print(f"incomplete stream: done={done} finish={finish is not None} chunks={len(content)}")
        return 2
    tps = finish["hx"]["generation_tokens_per_s"]
    n_gen = usage["completion_tokens"] if usage else len(content)
    gen_s = (n_gen - 1) / tps if tps > 0 else 0.0
    spread = content[-1] - content[0]
    print(f"{len(content)} content chunks; first at {content[0] * 1e3:.0f} ms, last at "
          f"{content[-1] * 1e3:.0f} ms (spread {spread * 1e3:.0f} ms); server-side generation "
          f"{gen_s * 1e3:.0f} ms")
    if gen_s < 0.5:
        print("the generation was too short to tell streaming from buffering")
        return 2
    # half the chunks must also be spread out, not one early chunk and a late burst
    mid = content[len(content) // 2]
    ok = spread >= 0.5 * gen_s and mid - content[0] >= 0.25 * gen_s
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
