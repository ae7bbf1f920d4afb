"""Model-backed policies end to end on CPU: the prompt format and reply parsing, an
OpenAI-compatible endpoint (scripted, and `drtriton serve-model` over a tiny model built here)
with streaming and refinement from verdicts, a local checkpoint (`hf`), and every way a model
or an endpoint can fail without the built-in result being lost."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from drtriton.policy.models import HFPolicy, ModelError, OpenAIPolicy
from drtriton.problem import from_source
from drtriton.prompting import build_messages, feedback_message, parse_reply
from drtriton.search import Search, SearchConfig
from drtriton.verify import Trial, Verdict
from verifier_cases import HACKS, RELU, RELU_OK

os.environ.setdefault("HF_HUB_OFFLINE", "1")

WRONG = RELU_OK.replace("tl.maximum(x, 0.0)", "tl.minimum(x, 0.0)")  # runs, computes something else
CHEAT = HACKS["row1_pytorch_does_the_work_kernel_unused"][1]


def fenced(code: str, before: str = "Here is the module.\n") -> str:
    return f"{before}```python\n{code}\n```\nIt fuses everything."


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from drtriton.training.tiny import build_tiny_model, corpus_from_package

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny"), corpus_from_package(150_000), vocab_size=1024))


# -- a scripted OpenAI-compatible endpoint ---------------------------------------------------


class Scripted(ThreadingHTTPServer):
    """Answers chat completions from a list of replies (streamed in small pieces); records the
    requests. A reply may be {"status": 404} or {"die_after": k} (close after k pieces)."""

    daemon_threads = True

    def __init__(self, replies, handler=None):
        super().__init__(("127.0.0.1", 0), handler or _ScriptedHandler)
        self.replies = list(replies)
        self.requests = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _ScriptedHandler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        reply = self.server.replies.pop(0) if self.server.replies else "no more replies"
        if isinstance(reply, dict) and "status" in reply:
            payload = json.dumps({"error": {"message": reply.get("message", "nope")}}).encode()
            self.send_response(reply["status"])
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        die_after = reply.get("die_after") if isinstance(reply, dict) else None
        text = reply["text"] if isinstance(reply, dict) else reply
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        pieces = [text[i:i + 40] for i in range(0, len(text), 40)]
        for k, piece in enumerate(pieces):
            if die_after is not None and k == die_after:
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")


def search(verifier, policies, builtin=True, rounds=2, source=RELU):
    s = Search(from_source(source, name="relu"), verifier,
               SearchConfig(budget_s=300, builtin=builtin, rounds=rounds), policies=policies)
    events = list(s.run())
    return s.result, events


# -- the prompt format -----------------------------------------------------------------------


def test_messages_carry_instruction_example_task_and_feedback():
    verdict = Verdict(correct=False, status="incorrect", reasons=["wrong output on trial 1: 10 of 64 elements"],
                      trials=[Trial(0, "initial", False, 0.5, 2.0, 0.3, 10, 64)])
    msgs = build_messages(RELU, "ModelNew", history=[("previous reply", verdict)])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "ModelNew" in msgs[3]["content"] and "torch.relu" in msgs[3]["content"]
    assert msgs[4]["content"] == "previous reply"
    fb = msgs[5]["content"]
    assert "incorrect" in fb and "wrong output on trial 1" in fb and "max abs error 0.5" in fb
    assert "Fix it" in feedback_message(verdict)


@pytest.mark.parametrize("reply,ok,why", [
    (fenced(RELU_OK), True, None),
    (f"```\n{RELU_OK}\n```", True, None),
    (f"<think>consider tiling</think>\n{fenced(RELU_OK)}", True, None),
    (f"Sure:\n{RELU_OK}", True, None),  # unfenced: from the first import on
    ("I cannot help with that.", False, "no code"),
    ("", False, "empty"),
    (fenced("import torch\ndef (:"), False, "does not parse"),
    (fenced("import torch\nclass Other:\n    pass"), False, "does not define class ModelNew"),
])
def test_parse_reply(reply, ok, why):
    parsed = parse_reply(reply, "ModelNew")
    assert parsed.ok == ok
    if why:
        assert why in parsed.error


def test_parse_prefers_the_block_that_defines_the_class():
    reply = fenced("x = 1") + "\nand the module:\n" + fenced(RELU_OK)
    assert "class ModelNew" in parse_reply(reply, "ModelNew").code


# -- the openai policy -----------------------------------------------------------------------


def test_refinement_rounds_receive_the_previous_verdict(cpu_verifier):
    server = Scripted([fenced(WRONG), fenced(RELU_OK)])
    result, events = search(cpu_verifier, [OpenAIPolicy(server.url, "drtriton-7b")], builtin=False)
    assert result.correct and result.policy == "openai", (result.reason, result.notes)
    assert len(server.requests) == 2
    assert server.requests[0]["stream"] is True and server.requests[0]["model"] == "drtriton-7b"
    second = server.requests[1]["messages"]
    assert second[-2]["role"] == "assistant" and "tl.minimum" in second[-2]["content"]
    assert "incorrect" in second[-1]["content"] and "wrong output" in second[-1]["content"]
    texts = [e for e in events if e.kind == "text" and e.data["policy"] == "openai"]
    assert len(texts) > 5  # streamed in pieces as they arrived
    attempts = [a for a in result.attempts if a.policy == "openai"]
    assert [a.verdict.status for a in attempts] == ["incorrect", "correct"]
    assert all(a.tokens and a.generation_s is not None for a in attempts)


def test_bad_replies_are_reported_and_the_builtin_result_stands(cpu_verifier):
    server = Scripted(["no code here, sorry", fenced("import torch\ndef (:"), fenced(CHEAT)])
    policy = OpenAIPolicy(server.url, "m")
    result, _ = search(cpu_verifier, [policy], rounds=3)
    assert result.correct and result.policy == "builtin"
    model = [a for a in result.attempts if a.policy == "openai"]
    assert len(model) == 3
    assert "no code" in model[0].verdict.reasons[0]
    assert "does not parse" in model[1].verdict.reasons[0]
    assert model[2].verdict.status == "rejected" and "no Triton kernel" in model[2].verdict.reasons[0]


def test_an_endpoint_that_dies_mid_stream(cpu_verifier):
    server = Scripted([{"text": fenced(RELU_OK), "die_after": 3}])
    result, _ = search(cpu_verifier, [OpenAIPolicy(server.url, "m")], rounds=1)
    assert result.correct and result.policy == "builtin"
    attempt = next(a for a in result.attempts if a.policy == "openai")
    assert not attempt.verdict.correct
    assert "broke off" in " ".join(attempt.verdict.reasons) or "stream" in " ".join(attempt.verdict.reasons)


def test_unreachable_endpoint_and_unknown_model(cpu_verifier):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    dead = OpenAIPolicy(f"http://127.0.0.1:{port}/v1", "m", retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(ModelError, match="cannot reach the endpoint"):
        dead.generate([{"role": "user", "content": "hi"}], lambda i, t: None)
    result, _ = search(cpu_verifier, [dead])
    assert result.correct and any("cannot reach the endpoint" in n for n in result.notes)

    server = Scripted([{"status": 404, "message": "The model `m` does not exist."}])
    with pytest.raises(ModelError, match="does not serve model 'm'"):
        OpenAIPolicy(server.url, "m").generate([{"role": "user", "content": "hi"}], lambda i, t: None)


def test_retries_then_succeeds():
    server = Scripted([{"status": 503}, fenced("import torch")])
    gens = OpenAIPolicy(server.url, "m", retries=2, backoff_s=0.01).generate(
        [{"role": "user", "content": "hi"}], lambda i, t: None)
    assert len(server.requests) == 2 and "import torch" in gens[0].text


def test_bad_endpoint_argument():
    with pytest.raises(ValueError, match="expected http://host:port"):
        OpenAIPolicy("ftp://x", "m")


# -- local checkpoints: hf policy, serve-model -----------------------------------------------


def test_hf_policy_streams_batched_samples_and_failures_are_reported(cpu_verifier, tiny_model):
    policy = HFPolicy(tiny_model, samples=2, max_new_tokens=24)
    pieces = {0: 0, 1: 0}
    gens = policy.generate(build_messages(RELU, "ModelNew"), lambda i, t: pieces.__setitem__(i, pieces[i] + 1))
    assert len(gens) == 2 and all(g.tokens > 0 for g in gens) and pieces[0] > 1 and pieces[1] > 1
    result, events = search(cpu_verifier, [policy], rounds=1)
    assert result.correct and result.policy == "builtin"  # a random model writes no usable code
    model = [a for a in result.attempts if a.policy == "hf"]
    assert len(model) == 2 and all(not a.verdict.correct for a in model)
    assert any(e.kind == "text" and e.data["policy"] == "hf" for e in events)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_model_speaks_the_openai_protocol(tmp_path, tiny_model):
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "drtriton.cli", "serve-model", tiny_model, "--port", str(port),
                               "--name", "tiny"], stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        for _ in range(120):
            try:
                models = json.load(urllib.request.urlopen(f"{url}/models", timeout=1))
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("serve-model did not start: " + server.stderr.read())
        assert [m["id"] for m in models["data"]] == ["tiny"]
        pieces = []
        gens = OpenAIPolicy(url, "tiny", samples=2, max_tokens=16).generate(
            [{"role": "user", "content": "write a kernel"}], lambda i, t: pieces.append(i))
        assert len(gens) == 2 and all(g.text and not g.error for g in gens)
        assert len(pieces) > 4 and set(pieces) == {0, 1}
        with pytest.raises(ModelError, match="does not serve model 'other'"):
            OpenAIPolicy(url, "other").generate([{"role": "user", "content": "hi"}], lambda i, t: None)

        # the CLI over real HTTP: model candidates are reported, the built-in module is written
        (tmp_path / "relu.py").write_text(RELU)
        r = subprocess.run([sys.executable, "-m", "drtriton.cli", "convert", "relu.py", "--policy", "openai",
                            "--endpoint", url, "--model", "tiny", "--device", "cpu", "--json", "--workers", "1"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert r.returncode == 0, r.stderr
        record = json.loads(r.stdout)
        assert record["correct"] and record["policy"] == "builtin"
        policies = {c["policy"] for c in record["candidates"]}
        assert {"builtin", "openai"} <= policies
        model = [c for c in record["candidates"] if c["policy"] == "openai"]
        assert all(c["tokens"] and c["generation_s"] is not None for c in model)
    finally:
        server.terminate()
        server.wait(timeout=10)


# -- a model per fragment: large programs are cut, and the model's modules are composed ------

SEVEN_OPS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(24, 32)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        y = torch.relu(self.lin(x)) * 2.0
        y = self.norm(y)
        y = torch.softmax(y, dim=-1) + 1.0
        return torch.sigmoid(y).sum(dim=1)


def get_inputs():
    return [torch.randn(8, 24)]


def get_init_inputs():
    return []
'''


def oracle_reply(body: dict) -> str:
    """A stand-in for a trained model: answers a conversion request with the built-in policy's
    module for the program in the last user message."""
    import re
    import warnings

    import torch

    from drtriton.capture import capture_module
    from drtriton.policy.builtin import BuiltinPolicy

    warnings.filterwarnings("ignore")
    task = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    source = re.search(r"```python\n(.*?)```", task, re.S).group(1)
    problem = from_source(source, name="fragment")
    ns = {}
    exec(compile(problem.source, "fragment", "exec"), ns)
    with torch.device("meta"):
        model = ns[problem.class_name](*(ns[problem.init_inputs_fn]() if problem.init_inputs_fn else []))
        inputs = list(ns[problem.inputs_fn]())
    cand = next(BuiltinPolicy("cpu").candidates(problem, capture_module(model, inputs), "strict"))
    return fenced(cand.source)


class _OracleHandler(_ScriptedHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        text = oracle_reply(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())


def test_model_fragments_are_composed_into_the_module(cpu_verifier):
    server = Scripted([], handler=_OracleHandler)
    result, _ = search(cpu_verifier, [OpenAIPolicy(server.url, "m")], builtin=False, source=SEVEN_OPS)
    assert result.correct and result.policy == "openai", (result.reason, result.notes)
    assert len(server.requests) >= 3  # one conversation per fragment
    asked = [r["messages"][3]["content"] for r in server.requests]
    assert all("(a fragment of relu)" in a for a in asked)
    assert "by the openai policy" in result.plan
    assert "written by the openai policy for a fragment" in result.source


def test_convert_keeps_failed_candidates_and_shows_the_line_that_failed(tmp_path):
    """A user whose every candidate fails can read them: `--keep DIR` writes each verified
    source with its verdict on top, `--json` carries them, and the report quotes the line."""
    broken = RELU_OK.replace("n = x.numel()", "n = x.numel() // undefined_size")
    server = Scripted([fenced(broken)] * 20)
    (tmp_path / "relu.py").write_text(RELU)
    cmd = [sys.executable, "-m", "drtriton.cli", "convert", "relu.py", "--policy", "openai", "--endpoint",
           server.url, "--model", "fake", "--no-builtin", "--device", "cpu", "--budget", "120"]
    r = subprocess.run(cmd + ["--keep", "kept"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]
    assert "fails at line" in r.stdout and "n = x.numel() // undefined_size" in r.stdout, r.stdout
    kept = sorted((tmp_path / "kept").glob("*_failed.py"))
    assert kept and "undefined_size" in kept[0].read_text() and kept[0].read_text().startswith("# candidate 1")
    r = subprocess.run(cmd + ["--json"], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    record = json.loads(r.stdout)
    assert any("undefined_size" in c["source"] for c in record["candidates"])
