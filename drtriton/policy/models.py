"""Model-backed policies: an LLM writes the Triton, the search verifies it.

- `OpenAIPolicy`: any OpenAI-compatible endpoint (how vLLM's `vllm serve` and SGLang deploy a
  checkpoint, and what `drtriton serve-model` speaks), streaming server-sent events, with
  retries and backoff, timeouts and clear errors.
- `HFPolicy`: a local transformers checkpoint, streaming tokens as they are generated, several
  samples per call in one batch.

Both take the chat from `drtriton.prompting` and give back `Generation`s; the search turns them
into candidates (`drtriton.prompting.parse_reply`) and feeds the verdicts back as the history of
the next round.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable

OnText = Callable[[int, str], None]  # (sample index, new text)


class ModelError(Exception):
    """The model could not be reached or asked; the message says what to check."""


@dataclass
class Generation:
    text: str
    tokens: int
    seconds: float
    error: str = ""  # set when the stream broke off (the text so far is kept)


class ModelPolicy:
    name = "model"
    samples = 1  # candidates per request

    def generate(self, messages: list[dict], on_text: OnText, cancel: threading.Event | None = None) -> list[Generation]:
        raise NotImplementedError


# -- OpenAI-compatible endpoints --------------------------------------------------------------


class OpenAIPolicy(ModelPolicy):
    name = "openai"

    def __init__(self, endpoint: str, model: str, samples: int = 1, temperature: float = 0.7,
                 max_tokens: int = 4096, timeout_s: float = 60.0, retries: int = 3, backoff_s: float = 1.0):
        url = urllib.parse.urlparse(endpoint if "://" in endpoint else f"http://{endpoint}")
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint {endpoint!r}: expected http://host:port")
        self.endpoint = endpoint
        self.url = url
        self.base = url.path.rstrip("/")
        if not self.base.endswith("/v1"):
            self.base += "/v1"
        self.model = model
        self.samples = samples
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.url.scheme == "https" else http.client.HTTPConnection
        return cls(self.url.hostname, self.url.port, timeout=self.timeout_s)

    def models(self) -> list[str]:
        conn = self._connection()
        try:
            conn.request("GET", f"{self.base}/models")
            resp = conn.getresponse()
            body = resp.read()
        except OSError as e:
            raise ModelError(self._unreachable(e)) from None
        finally:
            conn.close()
        if resp.status != 200:
            raise ModelError(f"{self.endpoint}: GET /v1/models answered {resp.status}")
        return [m["id"] for m in json.loads(body).get("data", [])]

    def _unreachable(self, e: Exception) -> str:
        return f"cannot reach the endpoint {self.endpoint}: {e.strerror or e}" if isinstance(e, OSError) \
            else f"cannot reach the endpoint {self.endpoint}: {e}"

    def generate(self, messages, on_text, cancel=None) -> list[Generation]:
        body = json.dumps({"model": self.model, "messages": messages, "stream": True, "n": self.samples,
                           "temperature": self.temperature, "max_tokens": self.max_tokens}).encode()
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            try:
                return self._stream(body, on_text, cancel)
            except _Retry as e:
                if attempt == self.retries:
                    raise ModelError(str(e)) from None
                cancelled = cancel.wait(delay) if cancel is not None else time.sleep(delay)
                if cancelled:
                    raise ModelError("cancelled") from None
                delay *= 2
        raise AssertionError("unreachable")

    def _stream(self, body: bytes, on_text: OnText, cancel) -> list[Generation]:
        started = time.monotonic()
        conn = self._connection()
        try:
            conn.request("POST", f"{self.base}/chat/completions", body=body,
                         headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
            resp = conn.getresponse()
        except (ConnectionError, TimeoutError, OSError) as e:
            conn.close()
            raise _Retry(self._unreachable(e)) from None
        if resp.status in (429, 500, 502, 503, 504):
            conn.close()
            raise _Retry(f"{self.endpoint} answered {resp.status}")
        if resp.status != 200:
            detail = _error_detail(resp.read())
            conn.close()
            if resp.status == 404:
                raise ModelError(f"{self.endpoint} does not serve model {self.model!r}: {detail}")
            raise ModelError(f"{self.endpoint} answered {resp.status}: {detail}")
        texts = [""] * self.samples
        tokens = [0] * self.samples
        finished = [False] * self.samples
        error = ""
        try:
            for event in _sse_events(resp):
                if cancel is not None and cancel.is_set():
                    error = "cancelled"
                    break
                if event == "[DONE]":
                    finished = [True] * self.samples
                    break
                chunk = json.loads(event)
                if "error" in chunk:
                    error = f"the endpoint reported: {_error_detail(json.dumps(chunk).encode())}"
                    break
                for choice in chunk.get("choices", []):
                    i = int(choice.get("index", 0))
                    if i >= self.samples:
                        continue
                    delta = (choice.get("delta") or {}).get("content") or ""
                    if delta:
                        texts[i] += delta
                        tokens[i] += 1
                        on_text(i, delta)
                    if choice.get("finish_reason"):
                        finished[i] = True
            if not error and not all(finished):  # the connection closed before the answer was complete
                error = f"the stream from {self.endpoint} broke off before the end of the answer"
        except (OSError, http.client.HTTPException, ValueError) as e:
            error = f"the stream from {self.endpoint} broke off: {type(e).__name__}: {e}"
        finally:
            conn.close()
        seconds = time.monotonic() - started
        return [Generation(t, n, seconds, error) for t, n in zip(texts, tokens)]


class _Retry(Exception):
    pass


def _error_detail(body: bytes) -> str:
    try:
        d = json.loads(body)
        err = d.get("error", d)
        return err.get("message", str(err)) if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError):
        return body.decode(errors="replace")[:200]


def _sse_events(resp):
    """The `data:` payloads of a server-sent-event stream, one at a time."""
    data = []
    while True:
        raw = resp.readline()
        if not raw:
            if data:
                yield "\n".join(data)
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


# -- local transformers checkpoints ------------------------------------------------------------


class HFPolicy(ModelPolicy):
    name = "hf"

    def __init__(self, path: str, device: str = "cpu", samples: int = 1, temperature: float = 0.7,
                 max_new_tokens: int = 2048):
        from .local_model import LocalModel

        self.model = LocalModel(path, device)
        self.samples = samples
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    def generate(self, messages, on_text, cancel=None) -> list[Generation]:
        return self.model.generate(messages, self.samples, self.temperature, self.max_new_tokens, on_text, cancel)
