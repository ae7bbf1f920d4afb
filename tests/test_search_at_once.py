"""The search checks a plan's fragments at once (as many as the verifier has workers, on every
GPU of a `VerifierGroup`); a fragment whose check raises is reported and costs only itself."""

import textwrap
import threading
import time

from drtriton.problem import from_source
from drtriton.search import Search, SearchConfig
from drtriton.verify.gpus import VerifierGroup
from drtriton.verify.verdict import FAILED, Verdict

CHAIN = '''
import torch
import torch.nn as nn


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        x = torch.softmax(self.fc1(x), dim=-1)
        x = torch.cumsum(self.fc2(x), dim=1)
        return self.norm(x).relu()


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
'''


class Watching:
    """A verifier's interface over a real one, counting the checks in flight. The first check of
    the whole module fails, so the search goes on to check the fragments alone."""

    def __init__(self, inner, problem, capacity=None):
        self.inner, self.problem = inner, problem
        self.device, self.config = inner.device, inner.config
        self.capacity = inner.capacity if capacity is None else capacity
        self.lock = threading.Lock()
        self.in_flight = self.most = self.started = 0
        self.whole_failed = False

    def capture(self, problem, cancel=None):
        return self.inner.capture(problem, cancel=cancel)

    def warm_compile(self, problem):
        pass

    def verify(self, problem, source, **kwargs):
        if problem is self.problem and not self.whole_failed:
            self.whole_failed = True
            return Verdict(correct=False, status=FAILED, reasons=["failed on purpose"])
        with self.lock:
            self.started += 1
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            return self.inner.verify(problem, source, **kwargs)
        finally:
            with self.lock:
                self.in_flight -= 1


def search(verifier, problem, budget=300):
    s = Search(problem, verifier, SearchConfig(mode="strict", budget_s=budget))
    return s, list(s.run())


def test_fragments_are_checked_at_once_and_the_plan_of_their_choices_verifies(cpu_verifier):
    problem = from_source(textwrap.dedent(CHAIN))
    watching = Watching(cpu_verifier, problem)
    assert watching.capacity == 2
    s, events = search(watching, problem)
    r = s.result
    assert r.correct, r.reason
    fragments = [a.fragment for a in r.attempts if a.fragment != "whole module"]
    said = r.notes + [e.data.get("message", "") for e in events if e.kind == "status"]
    assert sorted(fragments) == ["cumsum", "layer_norm, relu", "linear", "linear", "softmax"], said  # each once
    assert watching.most == 2  # two checks in flight: the verifier's two workers
    assert sorted(a.id for a in r.attempts) == list(range(1, len(r.attempts) + 1))  # ids unique
    assert [e.kind for e in events].count("candidate") == len(r.attempts)
    assert events[-1].kind == "done"


def test_one_worker_checks_one_fragment_at_a_time(cpu_verifier):
    problem = from_source(textwrap.dedent(CHAIN))
    watching = Watching(cpu_verifier, problem, capacity=1)
    s, _ = search(watching, problem)
    assert s.result.correct and watching.most == 1


def test_a_fragment_check_that_raises_is_reported_and_the_search_goes_on(cpu_verifier, monkeypatch):
    problem = from_source(textwrap.dedent(CHAIN))
    watching = Watching(cpu_verifier, problem)
    real = Search._fragment

    def fragment(self, program, frag, task, builtin, planned):
        if "cumsum" in frag.label:
            raise ZeroDivisionError("a bug in one fragment")
        return (yield from real(self, program, frag, task, builtin, planned))

    monkeypatch.setattr(Search, "_fragment", fragment)
    s, events = search(watching, problem)
    r = s.result
    assert r.correct, r.reason  # the cumsum keeps the plan's first choice
    assert any("a fragment's check failed: ZeroDivisionError: a bug in one fragment" in n for n in r.notes)
    assert any(e.kind == "status" and "ZeroDivisionError" in e.data["message"] for e in events)
    assert not any("cumsum" in a.fragment for a in r.attempts if a.fragment != "whole module")


def test_a_fragment_left_unchecked_says_why_in_a_status_line(cpu_verifier, monkeypatch):
    # one fragment cannot be posed alone, another has no variant to check alone: each keeps the
    # plan's first choice, and the search says why on its status line (not as a note: the editor
    # shows notes as warnings about failures)
    import drtriton.search as search_module
    from drtriton.policy.builtin import BuiltinPolicy

    real_task, real_choices = search_module.fragment_task, BuiltinPolicy.choices
    asked: list[str] = []

    def task(program, frag, parent):
        if "cumsum" in frag.label:
            raise ZeroDivisionError("cannot pose it")
        return real_task(program, frag, parent)

    def choices(self, program, frag, mode):
        asked.append(frag.label)  # the first plan asks first; then the fragment's own check: none
        return [] if frag.label == "softmax" and asked.count("softmax") == 2 else real_choices(self, program, frag, mode)

    monkeypatch.setattr(search_module, "fragment_task", task)
    monkeypatch.setattr(BuiltinPolicy, "choices", choices)
    problem = from_source(textwrap.dedent(CHAIN))
    s, events = search(Watching(cpu_verifier, problem), problem)
    said = [e.data["message"] for e in events if e.kind == "status"]
    assert any(line.startswith("cumsum: not checked alone (ZeroDivisionError: cannot pose it") for line in said), said
    assert "softmax: no variant to check alone (none)" in said, said
    assert s.result.correct and not s.result.notes
    checked = [a.fragment for a in s.result.attempts if a.fragment != "whole module"]
    assert "cumsum" not in checked and "softmax" not in checked and "linear" in checked, checked


def test_the_fragment_threads_parse_one_at_a_time(cpu_verifier, monkeypatch):
    # Python 3.11's AST constructor is not thread-safe ("AST constructor recursion depth
    # mismatch" when two threads parse at once: it cost a fragment's check in CI), and the
    # fragment threads write modules and statically check them through `ast.parse`: the search
    # makes every parse in the process take one lock before its threads start
    import ast

    import drtriton.threads

    monkeypatch.setattr(ast, "parse", ast.parse)  # restored afterwards, as the test found it
    seen: list[bool] = []
    real = drtriton.threads.serialize_ast_parsing

    def serialize():
        real()
        seen.append(getattr(ast.parse, "_drtriton_serialized", False))

    monkeypatch.setattr("drtriton.search.serialize_ast_parsing", serialize)
    problem = from_source(textwrap.dedent(CHAIN))
    s, _ = search(Watching(cpu_verifier, problem), problem)
    assert s.result.correct and seen and all(seen)
    cells = ast.parse.__closure__  # the serialized parse: a lock between two threads
    lock = next(c.cell_contents for c in cells if type(c.cell_contents).__name__ == "RLock")
    inside: list[bool] = []
    with lock:  # another thread's parse waits for it
        t = threading.Thread(target=lambda: inside.append(bool(ast.parse("x = 1"))))
        t.start()
        t.join(0.3)
        assert not inside
    t.join(5)
    assert inside == [True]


def test_closing_the_search_cancels_its_checks_and_starts_no_new_one(cpu_verifier):
    problem = from_source(textwrap.dedent(CHAIN))
    watching = Watching(cpu_verifier, problem)
    s = Search(problem, watching, SearchConfig(mode="strict", budget_s=300))
    run = s.run()
    for event in run:
        if event.kind == "candidate" and event.data["fragment"] != "whole module":
            break
    run.close()  # the editor moved on: checks in flight are cancelled, nothing new starts
    started = watching.started
    deadline = time.monotonic() + 60
    while watching.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    assert watching.in_flight == 0 and watching.started == started and s.cancel.is_set()


class FakeVerifier:
    def __init__(self, name, workers=2):
        self.name, self.device, self.capacity = name, "cuda", workers
        self.config = type("Config", (), {"workers": workers})()
        self.calls, self.captured, self.warmed, self.closed = [], 0, 0, False
        self.gate = threading.Event()

    def verify(self, problem, source, **kwargs):
        self.calls.append(source)
        self.gate.wait(5)  # held until both GPUs have work
        return Verdict(correct=True, status="correct")

    def capture(self, problem, cancel=None):
        self.captured += 1
        return self.name

    def warm_compile(self, problem):
        self.warmed += 1

    def settings(self):
        return {"mode": "strict"}

    def close(self):
        self.closed = True


def test_a_verifier_group_deals_checks_to_every_gpu_and_captures_once():
    a, b = FakeVerifier("a"), FakeVerifier("b")
    group = VerifierGroup([a, b])
    assert group.capacity == 4 and group.device == "cuda" and group.cuda
    assert group.capture("problem") == "a" and (a.captured, b.captured) == (1, 0)
    group.warm_compile("problem")
    assert (a.warmed, b.warmed) == (1, 1)  # a full check may land on either GPU
    threads = [threading.Thread(target=group.verify, args=("problem", f"s{i}")) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while len(a.calls) + len(b.calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (len(a.calls), len(b.calls)) == (1, 1)  # the first checks go to different GPUs
    a.gate.set()
    b.gate.set()
    for t in threads:
        t.join()
    assert group.settings()["gpus"] == 2
    with group:
        pass
    assert a.closed and b.closed
