"""The language server's parts without a server: the module index, example inputs, the output
stream (batching, position encodings), settings and the report's wording."""

from __future__ import annotations

import asyncio
import textwrap
import time

import pytest

pytest.importorskip("pygls")  # the `server` extra

from lsprotocol import types  # noqa: E402
from pygls.workspace.position_codec import PositionCodec

from drtriton.problem import from_source
from drtriton.server import inputs as example_inputs
from drtriton.server.config import Settings
from drtriton.server.modules import ModuleIndexer, normalize_for_problem, split_lines
from drtriton.server.report import (CANCELLED, DONE, FAILED, RUNNING, Report, diagnostic, diagnostics,
                                    lens_title, markdown)
from drtriton.server.stream import OutputStream

# --------------------------------------------------------------------------------------------
# The module index

FILE = textwrap.dedent('''\
    """A file with every way of naming nn.Module."""
    import torch
    import torch.nn as tnn
    from torch import nn
    from torch.nn import Module as M

    Base = nn.Module
    TEXT = """
    class NotAClass(nn.Module):
        pass
    """


    @some.decorator(
        option=1,
    )
    class Decorated(M):
        def forward(self, x):
            return x


    class Assigned(Base):
        def forward(self, x):
            return x


    class Child(Decorated):
        pass


    class Abstract(tnn.Module):
        pass


    class Concrete(Abstract):
        def forward(self, x):
            return x


    class Other(object):
        def forward(self, x):
            return x


    def get_inputs():
        return [torch.rand(2, 4)]
''')


def test_index_finds_module_classes_through_aliases_and_local_bases():
    idx = ModuleIndexer().index(FILE)
    found = {m.name: m for m in idx.modules}
    assert list(found) == ["Decorated", "Assigned", "Child", "Abstract", "Concrete"]
    assert found["Child"].has_forward and not found["Abstract"].has_forward and found["Concrete"].has_forward
    lines = FILE.splitlines()
    d = found["Decorated"]
    assert lines[d.start].startswith("@some.decorator") and lines[d.info.name_line].startswith("class Decorated")
    assert lines[d.end].strip() == "return x" and d.info.name_col == 6
    assert idx.module_at(d.start + 1) is d and idx.module_at(d.end + 1) is None
    assert [m.name for m in idx.modules_in(d.end, found["Child"].start)] == ["Decorated", "Assigned", "Child"]
    assert idx.syntax_error is None and idx.has_inputs("Child")


def test_a_cut_inside_a_string_is_merged_and_a_syntax_error_stays_local():
    ix = ModuleIndexer()
    idx = ix.index(FILE)
    assert "NotAClass" not in {c.name for c in idx.classes}
    broken = FILE.replace("class Assigned(Base):\n    def forward(self, x):", "class Assigned(Base):\n    def forward(self, x)")
    idx = ix.index(broken)
    assert idx.syntax_error is not None and idx.syntax_error[0] == broken.splitlines().index("    def forward(self, x)")
    assert "Assigned" not in idx.by_name and {"Decorated", "Concrete"} <= set(idx.by_name)


def test_an_edit_parses_only_the_chunk_that_changed():
    ix = ModuleIndexer()
    ix.index(FILE, "file:///f.py", 1)
    before = len(ix._chunks)
    idx = ix.index(FILE.replace("return x + 0" if False else "class Concrete(Abstract):", "class Concrete2(Abstract):"),
                   "file:///f.py", 2)
    assert len(ix._chunks) == before + 1
    assert "Concrete2" in idx.by_name
    assert ix.index("ignored: the version is cached", "file:///f.py", 2) is idx


def test_lines_break_like_lsp():
    assert split_lines("a\r\nb\rc\nd\x0ce") == ["a", "b", "c", "d\x0ce"]
    assert split_lines("x\n") == ["x", ""]


def test_normalize_spells_aliases_as_torch_nn_module():
    src = "from __future__ import annotations\nfrom torch.nn import Module as M\n\n\nclass A(M):\n    def forward(self, x):\n        return x\n\n\nclass B(A):\n    pass\n\n\ndef get_inputs():\n    return []\n"
    out = normalize_for_problem(src, "B")
    assert out.splitlines()[0] == "from __future__ import annotations"
    assert "class A(torch.nn.Module):" in out and "import torch" in out
    assert from_source(out, "B").class_name == "B"
    assert normalize_for_problem(FILE, "Concrete") == FILE  # tnn.Module: drtriton.problem reads it


# --------------------------------------------------------------------------------------------
# Example inputs

INPUT_CASES = {
    "linear": ('''
        import torch
        import torch.nn as nn
        class A(nn.Module):
            def __init__(self, in_features: int, out_features: int):
                super().__init__()
                self.fc = nn.Linear(in_features, out_features)
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return torch.relu(self.fc(x))
        ''', (2, 16)),
    "conv_no_torch_import": ('''
        from torch import nn
        HID = 8
        class B(nn.Module):
            def __init__(self, channels, out_channels=HID, kernel_size=3):
                super().__init__()
                self.conv = nn.Conv2d(channels, out_channels, kernel_size, padding=1)
                self.bn = nn.BatchNorm2d(out_channels)
            def forward(self, x, scale: float):
                return self.bn(self.conv(x)) * scale
        ''', (2, 8, 16, 16)),
    "reduction_axis": ('''
        import torch
        import torch.nn as nn
        class C(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim
            def forward(self, x):
                return torch.sum(x, dim=self.dim)
        ''', (2,)),
    "matmul": ('''
        import torch
        from torch.nn import Module as M
        class D(M):
            def forward(self, a, b):
                return torch.relu(a @ b)
        ''', (16, 8)),
    "embedding_sequential_subclass": ('''
        import torch
        import torch.nn as nn
        class E(nn.Module):
            def __init__(self, vocab_size, d_model, hidden_dim):
                super().__init__()
                self.emb = nn.Embedding(vocab_size, d_model)
                self.mlp = nn.Sequential(nn.Linear(d_model, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, d_model))
            def forward(self, tokens):
                return self.mlp(self.emb(tokens))
        class F(E):
            pass
        ''', (2, 8, 16)),
    "layernorm_two_inputs": ('''
        import torch
        import torch.nn as nn
        class G(nn.Module):
            def __init__(self, dim, hidden=64, dropout: float = 0.1):
                super().__init__()
                self.norm = nn.LayerNorm(dim)
                self.up = nn.Linear(dim, hidden * 2)
            def forward(self, x, y):
                return self.up(self.norm(x + y))
        ''', (2, 128)),
}


@pytest.mark.parametrize("case", list(INPUT_CASES))
def test_generated_inputs_load_and_run(case):
    source, shape = INPUT_CASES[case]
    source = textwrap.dedent(source)
    idx = ModuleIndexer().index(source)
    assert idx.modules
    for m in idx.modules:
        assert example_inputs.needs_inputs(idx, m)
        gen = example_inputs.generate(idx, m)
        lines = source.split("\n")
        lines[gen.after_line] += "\n\n\n" + gen.code
        if gen.import_line is not None:
            lines.insert(gen.import_line, "import torch")
        new = "\n".join(lines)
        problem = from_source(normalize_for_problem(new, m.name), m.name)
        namespace: dict = {}
        exec(compile(problem.source, "problem", "exec"), namespace)
        args = namespace[problem.init_inputs_fn]() if problem.init_inputs_fn else []
        out = namespace[m.name](*args)(*namespace[problem.inputs_fn]())
        assert tuple(out.shape) == shape, (m.name, gen.code)
        assert not example_inputs.needs_inputs(ModuleIndexer().index(new), ModuleIndexer().index(new).module(m.name))


def test_generated_names_are_class_specific_when_the_file_has_several_modules():
    source = textwrap.dedent(INPUT_CASES["embedding_sequential_subclass"][0])
    idx = ModuleIndexer().index(source)
    gen = example_inputs.generate(idx, idx.module("F"))
    assert gen.functions == ("get_inputs_F", "get_init_inputs_F")
    assert "return [100, 16, 32]" in gen.code  # E's constructor, inherited


def test_only_the_missing_constructor_arguments_are_added():
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn
        class H(nn.Module):
            def __init__(self, num_classes):
                super().__init__()
                self.fc = nn.Linear(4, num_classes)
            def forward(self, x):
                return self.fc(x)
        def get_inputs():
            return [torch.rand(2, 4)]
        ''')
    idx = ModuleIndexer().index(source)
    assert example_inputs.missing(idx, idx.module("H")) == (False, True)
    gen = example_inputs.generate(idx, idx.module("H"))
    assert gen.functions == ("get_init_inputs",) and "return [10]" in gen.code


# --------------------------------------------------------------------------------------------
# The output stream


def _apply(text: str, edit: types.TextEdit, encoding: str) -> str:
    lines = split_lines(text)
    codec = PositionCodec(encoding)

    def offset(p: types.Position) -> int:
        server = codec.position_from_client_units(lines, types.Position(line=p.line, character=p.character))
        return sum(len(line) + 1 for line in lines[: server.line]) + server.character

    return text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]


class FakeClient:
    def __init__(self, encoding: str, refuse: int = 0):
        self.encoding, self.text, self.edits, self.refuse, self.created = encoding, "", [], refuse, 0

    async def apply(self, edit: types.WorkspaceEdit) -> bool:
        await asyncio.sleep(0.002)
        if self.refuse:
            self.refuse -= 1
            return False
        for change in edit.document_changes:
            if isinstance(change, types.CreateFile):
                self.created += 1
                self.text = ""
            else:
                for e in change.edits:
                    self.text = _apply(self.text, e, self.encoding)
                    self.edits.append((time.monotonic(), e))
        return True


def _stream(client: FakeClient, **kw) -> OutputStream:
    return OutputStream("file:///out.py", None, client.apply, PositionCodec(client.encoding),
                        document_changes=True, create_file=True, current_text=None, **kw)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_streamed_text_lands_where_it_belongs_in_every_encoding(encoding):
    text = 'x = "größe 😋 ünïcödé"  # 😋😋\ny = "∑"\n' * 6 + "z = 1  # no newline at the end 😋"

    async def run():
        client = FakeClient(encoding)
        stream = _stream(client, interval=0.01)
        for i in range(0, len(text), 7):  # pieces that split lines (and surrogate pairs' lines)
            (stream.begin if i == 0 else stream.feed)(1, text[i:i + 7])
            await asyncio.sleep(0.003)
        stream.end(1)
        await stream.drain()
        return client, stream

    client, stream = asyncio.run(run())
    assert client.text == text == stream.text
    assert client.created == 1 and len(client.edits) > 3


def test_batches_are_whole_lines_about_100_ms_apart_the_first_at_once():
    lines = [f"line {i} with some words\n" for i in range(40)]
    text = "".join(lines)

    async def run():
        client = FakeClient("utf-16")
        stream = _stream(client)
        t0 = time.monotonic()
        for i in range(0, len(text), 9):  # a fast writer: 9 characters every 5 ms
            (stream.begin if i == 0 else stream.feed)(1, text[i:i + 9])
            await asyncio.sleep(0.005)
        stream.end(1)
        await stream.drain()
        return client, t0

    client, t0 = asyncio.run(run())
    assert client.text == text
    times = [t for t, _ in client.edits]
    assert times[0] - t0 < 0.05, "the first edit leaves at once"
    gaps = [b - a for a, b in zip(times, times[1:])][:-1]  # the last batch leaves when the text ends
    assert min(gaps) > 0.08 and 4 <= len(client.edits) <= 20, gaps
    assert all(e.new_text.endswith("\n") for _, e in client.edits)


def test_a_new_candidate_and_a_better_module_replace_the_text():
    async def run():
        client = FakeClient("utf-16")
        stream = _stream(client, interval=0.0)
        stream.begin(1, "first candidate\nmore of it\n")
        stream.end(1)
        await stream.drain()
        stream.begin(2, "second\n")
        stream.feed(1, "late text of the first candidate\n")  # ignored: the file follows the latest
        stream.end(2)
        await stream.drain()
        after_second = client.text
        await stream.replace("the verified module\n")
        edits = len(client.edits)
        await stream.replace("the verified module\n")  # unchanged: no edit
        return client, after_second, edits

    client, after_second, edits = asyncio.run(run())
    assert after_second == "second\n"
    assert client.text == "the verified module\n" and len(client.edits) == edits


def test_a_refused_edit_is_not_counted_as_written():
    async def run():
        client = FakeClient("utf-16", refuse=1)
        stream = _stream(client, interval=0.0)
        stream.begin(1, "lost\n")
        await stream.drain()
        await stream.replace("kept\n")
        return client, stream

    client, stream = asyncio.run(run())
    assert stream.failed == 1 and client.text == "kept\n" == stream.text and client.created == 1


# --------------------------------------------------------------------------------------------
# Settings


def test_settings_from_the_client_keep_defaults_for_refused_values(tmp_path):
    s, problems = Settings.from_client({"policy": "openai", "endpoint": "http://h:8000/v1", "model": "m",
                                        "device": "tpu", "mode": "mixed", "searchBudgetSeconds": -1,
                                        "output": "out/{class}.py"})
    assert (s.policy, s.endpoint, s.model, s.device, s.mode, s.search_budget_s) == \
        ("openai", "http://h:8000/v1", "m", "auto", "mixed", 600.0)
    assert len(problems) == 2 and any("drtriton.device" in p for p in problems)
    src = tmp_path / "net.py"
    assert s.output_path(src, "Block") == tmp_path / "out" / "Block.py"
    default = Settings()
    assert default.output_path(src, "Block") == tmp_path / "net_triton.py"
    assert default.output_path(src, "Block", disambiguate=True) == tmp_path / "net_Block_triton.py"
    odd = Settings(output="{stem}_{nope}.py")
    assert odd.output_path(src, "Block") == tmp_path / "net_triton.py"
    assert Settings.from_client(None) == (Settings(), [])
    assert Settings.from_client({"cudaGraph": True})[0].cuda_graph is True
    kept, problems = Settings.from_client({"cudaGraph": "yes"})
    assert kept.cuda_graph is False and "drtriton.cudaGraph" in problems[0]


# --------------------------------------------------------------------------------------------
# Wording


def _gpu_verdict():
    from drtriton.verify import Timing, Timings, Trial, Verdict

    t = lambda ms: Timing(ms, ms * 0.99, ms * 1.01, ms * 0.98, ms, 100)  # noqa: E731
    return Verdict(correct=True, status="correct", trials=[Trial(i, "initial", True) for i in range(5)],
                   triton_kernels=["linear_relu_kernel"], triton_share=0.94,
                   timings=Timings(candidate=t(0.10), eager=t(0.231), compiled=t(0.112)),
                   speedup_eager=2.31, speedup_compile=1.12, device="NVIDIA H100 80GB HBM3",
                   settings={"mode": "strict", "timing_trials": 100})


class _Result:
    def __init__(self, verdict, correct=True, reason="", notes=()):
        from drtriton.search import Attempt

        self.correct, self.verdict, self.reason, self.notes = correct, verdict, reason, list(notes)
        self.source, self.plan, self.policy = "src", "linear, relu: Triton (precision=ieee)", "builtin"
        self.attempts = [Attempt(1, "builtin", "whole module", self.plan, verdict, 1.5)] if verdict else []


def test_the_verdict_reads_like_the_issue_says():
    r = Report("file:///m.py", "Block", 3, state=DONE, result=_Result(_gpu_verdict()),
               settings={"policy": "builtin", "device": "auto", "mode": "strict", "search_budget_s": 600.0})
    severity, message, code = diagnostic(r)
    assert severity == "information" and code == "converted"
    assert message == "correct on 5/5 trials, 2.31x vs eager, 1.12x vs torch.compile, 94% of GPU time in Triton"
    assert lens_title(r) == "DRTriton: 2.31x vs eager, 1.12x vs torch.compile"
    md = markdown(r)
    for part in ("### DRTriton: Block", "document version 3", "candidate 0.1000 ms, eager 0.2310 ms, "
                 "torch.compile 0.1120 ms", "NVIDIA H100 80GB HBM3", "| 1 | whole module | builtin | correct |",
                 "Triton kernels: linear_relu_kernel", "100 timed calls"):
        assert part in md, (part, md)


def test_the_report_says_where_a_calls_time_goes():
    v = _gpu_verdict()
    v.kernel_ms, v.kernels_total_ms = {"linear_relu_kernel": 0.09, "void at::native::fill": 0.002}, 0.092
    assert abs(v.gpu_busy - 0.92) < 1e-9 and not v.host_bound
    md = markdown(Report("u", "Block", 1, state=DONE, result=_Result(v)))
    assert "GPU busy 92% of a call (0.092 ms in kernels of 0.100 ms)\n" in md, md
    assert "Heaviest kernels (ms a call): linear_relu_kernel 0.090, void at::native::fill 0.002" in md
    v.kernels_total_ms = 0.02  # kernels of 20 us in a 100 us call: the launches' Python sets the pace
    assert v.host_bound and "the rest is host work between kernels" in markdown(Report("u", "Block", 1, state=DONE,
                                                                                        result=_Result(v)))
    v.kernels_total_ms = None  # older verdicts, or no GPU: nothing said
    assert v.gpu_busy is None and not v.host_bound and "GPU busy" not in markdown(Report("u", "B", 1, state=DONE,
                                                                                        result=_Result(v)))


def test_failures_warnings_and_states():
    from drtriton.verify import Verdict

    bad = Verdict(correct=False, status="incorrect", reasons=["trial 1: max abs error 0.5"])
    r = Report("u", "Block", 1, state=DONE, streamed=1,
               result=_Result(bad, correct=False, reason="no candidate was correct; last: incorrect",
                              notes=["openai policy: cannot reach the endpoint http://x"]))
    found = diagnostics(r)
    assert [d[0] for d in found] == ["warning", "warning"]
    assert "no correct Triton version of Block found" in found[0][1] and "last attempt" in found[0][1]
    assert found[1][2] == "policy" and "cannot reach the endpoint" in found[1][1]
    assert "#### Errors" in markdown(r) and "max abs error 0.5" in markdown(r)
    assert lens_title(r) == "DRTriton: no correct version found"
    assert diagnostic(Report("u", "B", 1, state=CANCELLED)) is None
    assert diagnostic(Report("u", "B", 1, state=RUNNING)) is None
    assert lens_title(Report("u", "B", 1, state=RUNNING)) == "DRTriton: converting (cancel)"
    running = Report("u", "B", 1, state=RUNNING, best={"summary": "correct on 7/7 trials", "plan": "p"})
    assert diagnostic(running) == ("information", "correct on 7/7 trials (so far; the search goes on)", "converted")
    failed = Report("u", "B", 1, state=FAILED, error="cannot check B on device cuda: no CUDA device", error_kind="device")
    assert diagnostic(failed)[0] == "error" and "could not convert" in markdown(failed)
    stale = Report("u", "B", 1, state=DONE, result=_Result(_gpu_verdict()), stale=True)
    assert diagnostic(stale) is None and "outdated" in lens_title(stale)


def test_a_client_without_apply_edit_gets_the_file_on_disk(tmp_path):
    out = tmp_path / "sub" / "m_triton.py"

    async def run():
        stream = OutputStream("file:///m_triton.py", out, None, PositionCodec("utf-16"),
                              document_changes=False, create_file=False, current_text=None, interval=0.0)
        stream.begin(1, "streamed\n")
        stream.end(1)
        await stream.drain()
        first = out.read_text()
        await stream.replace("verified\n")
        return first

    assert asyncio.run(run()) == "streamed\n" and out.read_text() == "verified\n"
