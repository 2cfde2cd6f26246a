"""A reverse proxy in front of a real vLLM that makes its chat replies degenerate the way the
H200's random-weight model's were (issue 37, input 1): ``python degenerate_proxy.py UPSTREAM``
prints its port, then forwards every request to ``UPSTREAM`` unchanged (``/tokenize``,
``/metrics``, ``/v1/models``, ``/health``: the probe measures the real server) and replaces
the ``content`` of each unstreamed chat completion with :data:`FLOOD`, keeping ``usage`` and
``prompt_logprobs`` as vLLM sent them. Standard library only; one process per upstream.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: The H200 reply of the issue: a few words, then one 11-character unit repeated with no separator
#: (330 characters).
FLOOD = "SPACE z has" + "microsecond" * 29


def main(upstream: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def _forward(self, method: str) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            req = urllib.request.Request(upstream + self.path, data=body, method=method,
                                         headers={k: v for k, v in self.headers.items()
                                                  if k.lower() not in ("host", "content-length", "connection")})
            try:
                with urllib.request.urlopen(req, timeout=600) as r:
                    status, headers, data = r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                status, headers, data = e.code, e.headers, e.read()
            if (self.path.startswith("/v1/chat/completions") and status == 200
                    and headers.get("Content-Type", "").startswith("application/json")):
                doc = json.loads(data)
                for c in doc.get("choices") or []:
                    if isinstance(c.get("message"), dict):
                        c["message"]["content"] = FLOOD
                        c["message"]["reasoning_content"] = None
                data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's protocol
            self._forward("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._forward("POST")

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1].rstrip("/"))
