"""`drtriton serve-model PATH`: a small OpenAI-compatible server over a local checkpoint.

For machines without vLLM, and for tests: it speaks the protocol the `openai` policy uses
against `vllm serve` — `GET /v1/models`, and `POST /v1/chat/completions` with `stream: true`
(server-sent events, one chunk per piece of text, `data: [DONE]` last) or without.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .policy.local_model import LocalModel

MAX_BODY = 8 << 20


class ModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, model: LocalModel, name: str):
        super().__init__(address, _Handler)
        self.model = model
        self.name = name

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: one line per request on stderr
        sys.stderr.write(f"[serve-model] {self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")

    def _json(self, status: int, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._json(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": self.server.name, "object": "model", "created": 0, "owned_by": "drtriton"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self):
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._error(404, f"no route {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._error(413, "request too large")
        try:
            req = json.loads(self.rfile.read(length))
            messages = req["messages"]
            assert isinstance(messages, list) and all("role" in m and "content" in m for m in messages)
        except (ValueError, KeyError, AssertionError):
            return self._error(400, "expected JSON with a list of messages")
        model = req.get("model", self.server.name)
        if model != self.server.name:
            return self._error(404, f"The model `{model}` does not exist.", "NotFoundError")
        n = max(1, min(int(req.get("n", 1)), 16))
        temperature = float(req.get("temperature", 0.7))
        max_tokens = max(1, min(int(req.get("max_tokens", 512)), 8192))
        if req.get("stream"):
            self._stream(messages, n, temperature, max_tokens)
        else:
            gens = self.server.model.generate(messages, n, temperature, max_tokens, lambda i, t: None)
            self._json(200, {
                "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": self.server.name,
                "choices": [{"index": i, "message": {"role": "assistant", "content": g.text}, "finish_reason": "stop"}
                            for i, g in enumerate(gens)],
                "usage": {"completion_tokens": sum(g.tokens for g in gens)},
            })

    def _stream(self, messages, n, temperature, max_tokens) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        gone = threading.Event()  # the client hung up: stop generating

        def chunk(choices) -> None:
            if gone.is_set():
                return
            payload = {"id": cid, "object": "chat.completion.chunk", "created": created,
                       "model": self.server.name, "choices": choices}
            try:
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()
            except OSError:
                gone.set()

        chunk([{"index": i, "delta": {"role": "assistant"}, "finish_reason": None} for i in range(n)])
        self.server.model.generate(
            messages, n, temperature, max_tokens,
            lambda i, text: chunk([{"index": i, "delta": {"content": text}, "finish_reason": None}]), gone)
        chunk([{"index": i, "delta": {}, "finish_reason": "stop"} for i in range(n)])
        if not gone.is_set():
            try:
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except OSError:
                pass
        self.close_connection = True


def serve(path: str, host: str = "127.0.0.1", port: int = 8000, name: str | None = None,
          device: str = "cpu") -> ModelServer:
    model = LocalModel(path, device)
    return ModelServer((host, port), model, name or path.rstrip("/").split("/")[-1])
