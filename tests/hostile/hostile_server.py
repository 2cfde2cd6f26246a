"""A hostile OpenAI-compatible server, run as its own process: ``python hostile_server.py MODE``.

Prints its port on the first line of stdout, then serves until killed. ``/health``, ``/v1/models``
answer normally (``/tokenize`` is 404); ``/v1/chat/completions`` misbehaves according to MODE:

* ``dribble`` -- status and headers at once, then the body one byte every 1.5 s (never ends)
* ``dribble-headers`` -- the status line and headers one byte every 1.5 s
* ``huge`` -- a valid 50 MB JSON reply without Content-Length (read until close)
* ``huge-declared`` -- a 50 MB reply announced by Content-Length
* ``gzip-bomb`` -- 1 GB of JSON compressed to ~1 MB (Content-Encoding: gzip)
* ``echo-key`` -- the reply content and a header echo the Authorization header
* ``echo-key-error`` -- a 400 whose error message echoes the Authorization header
"""

from __future__ import annotations

import gzip
import io
import json
import socket
import sys
import threading
import time

MODE = sys.argv[1]


def reply_json(content: str) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 3}}).encode()


def send(conn: socket.socket, status: str, body: bytes, headers: dict[str, str] | None = None) -> None:
    h = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
    head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    conn.sendall(head.encode() + body)


def read_request(conn: socket.socket) -> tuple[str, dict[str, str], bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        rest += conn.recv(65536)
    return lines[0], headers, rest


def handle(conn: socket.socket) -> None:
    try:
        while True:
            line, headers, _ = read_request(conn)
            path = line.split()[1]
            if path == "/health":
                send(conn, "200 OK", b"{}")
            elif path == "/v1/models":
                send(conn, "200 OK", json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode())
            elif path != "/v1/chat/completions":
                send(conn, "404 Not Found", b'{"error": "no"}')
            elif MODE == "dribble":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                while True:
                    conn.sendall(b" ")
                    time.sleep(1.5)
            elif MODE == "dribble-headers":
                for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"y" * 10000:
                    conn.sendall(bytes([b]))
                    time.sleep(1.5)
            elif MODE in ("huge", "huge-declared"):
                body = reply_json("word " * (10 * 1024 * 1024))  # ~50 MB
                if MODE == "huge":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
                    for i in range(0, len(body), 1 << 20):
                        conn.sendall(body[i:i + (1 << 20)])
                    conn.close()
                    return
                send(conn, "200 OK", body)
            elif MODE == "gzip-bomb":
                raw = io.BytesIO()
                with gzip.GzipFile(fileobj=raw, mode="wb") as gz:
                    gz.write(b'{"choices": [{"message": {"content": "')
                    block = b"a" * (1 << 20)
                    for _ in range(1024):
                        gz.write(block)
                    gz.write(b'"}}]}')
                send(conn, "200 OK", raw.getvalue(), {"Content-Encoding": "gzip"})
            elif MODE == "echo-key":
                auth = headers.get("authorization", "")
                send(conn, "200 OK", reply_json(f"your key is {auth}. The answer is 4."), {"X-Echo": auth})
            elif MODE == "echo-key-error":
                auth = headers.get("authorization", "")
                send(conn, "400 Bad Request", json.dumps({"error": {"message": f"bad key {auth}"}}).encode())
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()


def main() -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    print(srv.getsockname()[1], flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
