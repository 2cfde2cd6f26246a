"""Fallback OpenAI-compatible engine (stdlib only) used inside test images *only* while
``bisectbot.demo.engine`` (the reference engine, issue 3) is not in the checkout.

``python3 mini_engine.py --port P --garbage-above N``: prompts longer than N tokens
(words) get ``!!!!!!...``; shorter ones get a coherent answer.
"""

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--garbage-above", type=int, default=10**9)
    ap.add_argument("--model", default="demo")
    a = ap.parse_args()

    class H(BaseHTTPRequestHandler):
        def _send(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": a.model, "object": "model"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path == "/tokenize":
                text = body.get("prompt") or " ".join(m.get("content", "") for m in body.get("messages", []))
                n = len(text.split())
                self._send(200, {"count": n, "max_model_len": 10**6, "tokens": list(range(n))})
            elif self.path == "/v1/chat/completions":
                text = " ".join(m.get("content", "") for m in body.get("messages", []))
                n = len(text.split())
                reply = "!" * 64 if n > a.garbage_above else "The answer is 4."
                self._send(200, {"id": "x", "object": "chat.completion", "model": a.model,
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": reply}}],
                                 "usage": {"prompt_tokens": n, "completion_tokens": len(reply.split()),
                                           "total_tokens": n + len(reply.split())}})
            else:
                self._send(404, {"error": "not found"})

        def log_message(self, *args):
            pass

    print(f"mini engine on {a.host}:{a.port}, garbage above {a.garbage_above} tokens", flush=True)
    ThreadingHTTPServer((a.host, a.port), H).serve_forever()


if __name__ == "__main__":
    main()
