#!/usr/bin/env python3
"""A check of baton's HTTP edge from outside, with raw sockets, against a
release build: what an attacker at either end can do, each with the time
it took. It starts its own simulated providers (a steady one, one that
closes after reading a request, one that sends interim heads 30 ms apart)
and `baton serve` on free loopback ports with a SQLite store, runs every
check, prints one line a check, and exits non-zero when one fails.

    cargo build --release && python3 benches/hostile_check.py [path/to/baton]
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

BATON = sys.argv[1] if len(sys.argv) > 1 else "target/release/baton"
ANSWER = (
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    '"choices":[{"index":0,"delta":{"content":"steady"},"finish_reason":null}]}\n\n'
    'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
).encode()
CHAT = json.dumps({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}).encode()
failures = []


def read_request(conn):
    """Reads one request (head and content-length body); False at the close."""
    head = b""
    while b"\r\n\r\n" not in head:
        got = conn.recv(1)
        if not got:
            return False
        head += got
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while length > 0:
        got = conn.recv(min(length, 65536))
        if not got:
            return False
        length -= len(got)
    return True


def provider(act):
    """A raw provider on a free port that runs act(conn, n) for its n-th request."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    counts = {"requests": 0, "connections": 0}

    def serve(conn):
        with conn:
            while read_request(conn):
                counts["requests"] += 1
                if not act(conn, counts["requests"]):
                    return

    def accept():
        while True:
            conn, _ = listener.accept()
            counts["connections"] += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1], counts


def steady(conn, _n):
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
    return True


def closer(conn, n):
    # The first request on a connection is answered; the next is read whole, then the connection closes.
    return steady(conn, n) if n % 2 == 1 else False


def interim(conn, _n):
    try:
        for _ in range(30):
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            time.sleep(0.03)
        time.sleep(30)
    except OSError:
        pass
    return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange(port, wire, timeout=10):
    """Sends wire and reads until the close (or the timeout): the bytes and the seconds taken."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(wire)
        got = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except socket.timeout:
            pass
    return got, time.monotonic() - started


def post(port, body, model="chat", extra=b""):
    body = body.replace(b'"chat"', json.dumps(model).encode())
    return exchange(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                    b"connection: close\r\n%scontent-length: %d\r\n\r\n%s" % (extra, len(body), body))


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    if not ok:
        failures.append(name)


def main():
    steady_port, _ = provider(steady)
    closer_port, closer_counts = provider(closer)
    interim_port, _ = provider(interim)
    port = free_port()
    folder = tempfile.mkdtemp(prefix="baton-hostile-")
    config = os.path.join(folder, "baton.toml")
    with open(config, "w") as f:
        f.write(f'''listen = "127.0.0.1:{port}"
allowed_hosts = ["127.0.0.1"]
[store]
backend = "sqlite"
path = "baton.db"
''')
        for name, p in [("steady", steady_port), ("closer", closer_port), ("interim", interim_port)]:
            f.write(f'[[providers]]\nname = "{name}"\nkind = "openai"\nbase_url = "http://127.0.0.1:{p}/v1"\n')
        f.write('[[routes]]\nmodel = "chat"\nfirst_token_timeout_ms = 20000\ntargets = [{ provider = "steady", model = "m" }]\n')
        f.write('[[routes]]\nmodel = "closer"\nfirst_token_timeout_ms = 20000\ntargets = [{ provider = "closer", model = "m" }]\n')
        f.write('[[routes]]\nmodel = "interim"\nfirst_token_timeout_ms = 20000\n'
                'targets = [{ provider = "interim", model = "m" }, { provider = "steady", model = "m" }]\n')
    baton = subprocess.Popen([BATON, "serve", "--config", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)

        heads = []
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                      b"content-length: 33554432\r\n\r\n")
            heads.append(s)
        time.sleep(0.5)
        got, took = post(port, CHAT)
        check("eight 32 MiB heads held open", got.startswith(b"HTTP/1.1 200") and took < 5,
              f"a small POST answered {got[:12].decode(errors='replace')!r} in {took * 1000:.0f} ms")
        for s in heads:
            s.close()

        got, took = exchange(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                             b"transfer-encoding: chunked\r\n\r\n2;\nZZ\r\n28\r\n0\r\n\r\nGET /SMUGGLED HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        check("a bare LF in a chunk extension", got.count(b"HTTP/1.1 ") == 1 and got.startswith(b"HTTP/1.1 400"),
              f"{got.count(b'HTTP/1.1 ')} answer(s), the first {got[:12].decode()!r}, in {took * 1000:.0f} ms")

        sent = 0
        for _ in range(6):
            post(port, CHAT, model="closer")
            sent += 1
        check("a provider that closes after reading a request", closer_counts["requests"] == sent,
              f"{sent} requests sent, {closer_counts['requests']} received on {closer_counts['connections']} connections")

        got, took = exchange(port, b"POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\nconnection: keep-alive\r\n"
                             b"transfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        check("HTTP/1.0 with transfer-encoding", got.startswith(b"HTTP/1.1 400") and got.count(b"HTTP/1.1 ") == 1,
              f"{got.count(b'HTTP/1.1 ')} answer(s), the first {got[:12].decode()!r}, then closed")

        for label, wire in [
            ("no Host", b"GET /v1/models HTTP/1.1\r\n\r\n"),
            ("two Hosts", b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n"),
            ("Host: a b@c/d", b"GET /v1/models HTTP/1.1\r\nHost: a b@c/d\r\n\r\n"),
            ("a foreign absolute target", b"GET http://evil.example/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\n\r\n"),
        ]:
            got, _ = exchange(port, wire)
            status = got[9:12].decode(errors="replace")
            check(f"bad host: {label}", status in ("400", "403"), f"answered {status}")

        got, took = post(port, CHAT, model="interim")
        check("30 interim heads 30 ms apart", got.startswith(b"HTTP/1.1 200") and b"steady" in got and took < 2,
              f"answered by the next target in {took * 1000:.0f} ms (deadline 20 s)")

        env = dict(os.environ)
        made = subprocess.run([BATON, "keys", "create", "--config", config, "only"], capture_output=True, env=env)
        secret = made.stdout.decode().strip()
        time.sleep(1.5)
        keyed, _ = post(port, CHAT, extra=b"authorization: Bearer " + secret.encode() + b"\r\n")
        revoked = subprocess.run([BATON, "keys", "revoke", "--config", config, "only"], capture_output=True, env=env)
        time.sleep(1.5)
        keyless, _ = post(port, CHAT)
        check("the last key revoked", keyed.startswith(b"HTTP/1.1 200") and keyless.startswith(b"HTTP/1.1 401"),
              f"with the key {keyed[9:12].decode()}, keyless after the revoke {keyless[9:12].decode()}; "
              f"the command said: {revoked.stderr.decode().strip()!r}")
    finally:
        baton.terminate()
        baton.wait()
    print(f"{len(failures)} failed" if failures else "every check held")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
