"""Latency of the language server, measured from a client over stdio (a real `drtriton-lsp`
process, a VS Code-like client: UTF-16 positions, work-done progress, configuration).

    python benchmarks/lsp_latency.py [--device cpu] [--requests 1000] [--hover-seconds 20] [--json OUT]

Measures, on a generated 3,000-line Python file with many nn.Module classes:
  1. code action at random lines: on an unchanged document, and right after an edit
     (goal: p99 under 20 ms);
  2. hover on a class while conversions run back to back, two at a time, on classes of the same
     3,000-line file (goal: under 50 ms);
  3. first streamed edit after `drtriton.convert`, built-in policy, warm server: on a small file
     and on a class of the 3,000-line file (goal: under 500 ms); plus start-up to ready, and the
     first conversion of a fresh server that has not finished starting its workers.

Latencies are client-side wall times around the request (JSON-RPC over pipes included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import tempfile
import time
import typing
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

# --------------------------------------------------------------------------------------------
# The document


HEADER = '''"""A generated model zoo: many modules, helpers and plain classes (3,000+ lines)."""

import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Module as M

Base = nn.Module
SCALE = 0.5
'''

CONVERTIBLE = '''

class Mlp{i}(nn.Module):
    """A block the benchmark converts (hidden width {h})."""

    def __init__(self, dim: int = 16, hidden: int = {h}):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(x))
        return self.down(h) + x


def get_inputs_Mlp{i}():
    return [torch.rand(4, 16)]


def get_init_inputs_Mlp{i}():
    return [16, {h}]
'''

CONV = '''

class ConvBlock{i}(M):
    def __init__(self, channels, kernel_size=3):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=1)
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = self.norm(self.conv(x))
        # a longer body, as real modules have
        y = torch.relu(y)
        y = y * SCALE + x
        return y
'''

PLAIN = '''

class Config{i}:
    """Not a module: no code action here."""

    width = {i}
    depth = 2

    def describe(self):
        return f"width={{self.width}}, depth={{self.depth}}"


def helper_{i}(x, scale=SCALE):
    """A helper function between the classes."""
    for _ in range(2):
        x = x * scale
    return torch.tanh(x)
'''

CHILD = '''

class Residual{i}(Base):
    def forward(self, x):
        return x + helper_{i}(x)


class Gated{i}(Residual{i}):
    pass
'''


def make_document(lines: int) -> tuple[str, list[str]]:
    parts, convertible, i = [HEADER], [], 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(CONVERTIBLE.format(i=i, h=32 + i))
        convertible.append(f"Mlp{i}")
        parts.append(CONV.format(i=i))
        parts.append(PLAIN.format(i=i))
        parts.append(CHILD.format(i=i))
        i += 1
    return "".join(parts), convertible


SMALL = '''import torch
import torch.nn as nn


class Small{i}(nn.Module):
    def __init__(self, width: int = {w}):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.rand(4, {w})]


def get_init_inputs():
    return [{w}]
'''


# --------------------------------------------------------------------------------------------
# The client


CAPABILITIES = types.ClientCapabilities(
    general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
    window=types.WindowClientCapabilities(work_done_progress=True,
                                          show_document=types.ShowDocumentClientCapabilities(support=True)),
    workspace=types.WorkspaceClientCapabilities(
        configuration=True, apply_edit=True,
        workspace_edit=types.WorkspaceEditClientCapabilities(
            document_changes=True, resource_operations=[types.ResourceOperationKind.Create])),
    text_document=types.TextDocumentClientCapabilities(
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown])),
)


class Bench:
    def __init__(self, device: str):
        self.client = LanguageClient("lsp-latency", "1")
        self.device = device
        self.edits: list[tuple[float, str]] = []  # (when, uri) of every edit
        self.states: dict[int, str] = {}
        self.ended: dict[int, dict] = {}
        self.logs: list[str] = []
        self.versions: dict[str, int] = {}
        c = self.client
        converter = c.protocol._converter

        def action(obj, _):
            if isinstance(obj.get("command"), str):
                return converter.structure(obj, types.Command)
            return converter.structure(obj, types.CodeAction)

        converter.register_structure_hook(typing.Union[types.Command, types.CodeAction], action)

        @c.feature(types.WORKSPACE_CONFIGURATION)
        def configuration(params):
            return [{"device": device, "mode": "strict", "searchBudgetSeconds": 120} for _ in params.items]

        @c.feature(types.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: types.ApplyWorkspaceEditParams):
            now = time.perf_counter()
            for change in params.edit.document_changes or []:
                uri = change.uri if isinstance(change, types.CreateFile) else change.text_document.uri
                self.edits.append((now, uri))
            return types.ApplyWorkspaceEditResult(applied=True)

        @c.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def create(params):
            return None

        @c.feature(types.PROGRESS)
        def progress(params):
            pass

        @c.feature(types.WINDOW_SHOW_DOCUMENT)
        def show(params):
            return types.ShowDocumentResult(success=True)

        @c.feature(types.WINDOW_SHOW_MESSAGE)
        def message(params):
            pass

        @c.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def diagnostics(params):
            pass

        @c.feature(types.WINDOW_LOG_MESSAGE)
        def log(params: types.LogMessageParams):
            self.logs.append(params.message)

        @c.feature("$/drtriton/conversion")
        def conversion(params):
            d = params._asdict() if hasattr(params, "_asdict") else dict(params)
            self.states[d["job"]] = d["state"]
            if d["state"] in ("done", "cancelled", "failed"):
                self.ended[d["job"]] = d

    async def start(self, root: Path) -> float:
        t0 = time.perf_counter()
        await self.client.start_io(sys.executable, "-m", "drtriton.server")
        self._stderr = asyncio.create_task(self._drain(self.client._server.stderr))
        await self.client.initialize_async(types.InitializeParams(
            capabilities=CAPABILITIES, root_uri=from_fs_path(str(root)), process_id=None))
        self.client.initialized(types.InitializedParams())
        return t0

    async def _drain(self, stream):
        while await stream.readline():
            pass

    async def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not any("DRTriton ready" in m for m in self.logs):
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not get ready: " + " | ".join(self.logs[-5:]))
            await asyncio.sleep(0.01)

    def open(self, path: Path, text: str) -> str:
        path.write_text(text)
        uri = from_fs_path(str(path))
        self.versions[uri] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=text)))
        return uri

    def edit_line(self, uri: str, line: int, old: str, new: str) -> None:
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(line=line, character=0),
                                  end=types.Position(line=line, character=len(old))), text=new)]))

    async def code_action(self, uri: str, line: int):
        return await self.client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(line=line, character=4), end=types.Position(line=line, character=4)),
            context=types.CodeActionContext(diagnostics=[])))

    async def hover(self, uri: str, line: int):
        return await self.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=8)))

    async def convert(self, uri: str, name: str) -> tuple[dict, float]:
        t0 = time.perf_counter()
        reply = await self.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="drtriton.convert", arguments=[uri, name]))
        if not isinstance(reply, dict) or "job" not in reply:
            raise RuntimeError(f"convert {name}: {reply}")
        return reply, t0

    async def wait_end(self, job: int, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while job not in self.ended:
            if time.monotonic() > deadline:
                raise RuntimeError(f"conversion {job} did not end")
            await asyncio.sleep(0.005)
        return self.ended[job]

    def first_edit(self, uri: str, since: float) -> float:
        """Seconds from `since` to the first edit of `uri` after it."""
        return min(t for t, u in self.edits if u == uri and t >= since) - since

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 30)
            self.client.exit(None)
            await asyncio.wait_for(self.client._server.wait(), 30)
        except Exception:
            pass
        await self.client.stop()


# --------------------------------------------------------------------------------------------
# Measurements


def stats(samples: list[float]) -> dict:
    s = sorted(samples)
    q = lambda p: s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]  # noqa: E731
    return {"n": len(s), "p50_ms": q(0.5) * 1e3, "p99_ms": q(0.99) * 1e3, "max_ms": s[-1] * 1e3,
            "mean_ms": statistics.fmean(s) * 1e3}


async def run(args) -> dict:
    rng = random.Random(0)
    root = Path(tempfile.mkdtemp(prefix="lsp-latency-"))
    text, convertible = make_document(args.lines)
    lines = text.split("\n")
    results: dict = {"lines": len(lines), "classes": text.count("\nclass "), "device": args.device}

    bench = Bench(args.device)
    t0 = await bench.start(root)
    await bench.wait_ready()
    results["startup_to_ready_s"] = time.perf_counter() - t0
    uri = bench.open(root / "zoo.py", text)

    # 1. code actions
    for _ in range(20):
        await bench.code_action(uri, rng.randrange(len(lines)))
    samples, offered = [], 0
    for _ in range(args.requests):
        line = rng.randrange(len(lines))
        t = time.perf_counter()
        actions = await bench.code_action(uri, line)
        samples.append(time.perf_counter() - t)
        offered += bool(actions)
    results["code_action"] = {**stats(samples), "with_actions": offered}
    samples = []
    class_lines = [i for i, line in enumerate(lines) if line.startswith("class ")]
    for k in range(args.requests // 5):
        line = rng.choice(class_lines) + 1  # the docstring or first line of a class body
        old = lines[line]
        new = old + "  # edited" if not old.endswith("  # edited") else old[: -len("  # edited")]
        bench.edit_line(uri, line, old, new)
        lines[line] = new
        t = time.perf_counter()
        await bench.code_action(uri, line)
        samples.append(time.perf_counter() - t)
    results["code_action_after_edit"] = stats(samples)

    # 3. first streamed edit, warm server: small files, then classes of the big file
    firsts = []
    for i in range(args.first_edit_runs):
        small = bench.open(root / f"small{i}.py", SMALL.format(i=i, w=8 + i))
        reply, t = await bench.convert(small, f"Small{i}")
        end = await bench.wait_end(reply["job"])
        assert end["correct"], end
        firsts.append(bench.first_edit(reply["output"], t))
    results["first_edit_small_file"] = stats(firsts)
    firsts, used = [], 0
    for name in convertible[: args.first_edit_runs]:
        reply, t = await bench.convert(uri, name)
        end = await bench.wait_end(reply["job"])
        assert end["state"] == "done", end
        firsts.append(bench.first_edit(reply["output"], t))
        used += 1
    results["first_edit_3000_line_file"] = stats(firsts)

    # 2. hover while conversions run (two at a time, back to back, on the big file)
    queue = [n for n in convertible[used:]]
    running: dict[int, str] = {}
    hover_samples, conversions_done = [], 0
    deadline = time.monotonic() + args.hover_seconds
    while time.monotonic() < deadline and (queue or running):
        for job in [j for j in running if j in bench.ended]:
            conversions_done += 1
            del running[job]
        while len(running) < 2 and queue:
            name = queue.pop(0)
            reply, _ = await bench.convert(uri, name)
            running[reply["job"]] = name
        live = [j for j in running if bench.states.get(j) == "running"]
        if not live:
            await asyncio.sleep(0.005)
            continue
        name = running[live[0]]
        line = next(i for i, l in enumerate(lines) if l.startswith(f"class {name}("))
        t = time.perf_counter()
        h = await bench.hover(uri, line)
        elapsed = time.perf_counter() - t
        if bench.states.get(live[0]) == "running":  # still running when it was answered
            hover_samples.append(elapsed)
            assert h is not None
        await asyncio.sleep(0.02)
    for job in list(running):
        await bench.wait_end(job)
    results["hover_during_conversion"] = {**stats(hover_samples), "conversions_completed": conversions_done}
    await bench.stop()

    # start-up: a conversion asked for right away, before the workers have started
    cold = Bench(args.device)
    t0 = await cold.start(root)
    small = cold.open(root / "cold.py", SMALL.format(i=99, w=12))
    reply, t = await cold.convert(small, "Small99")
    end = await cold.wait_end(reply["job"])
    results["first_edit_fresh_server"] = {"since_command_s": cold.first_edit(reply["output"], t),
                                          "since_process_start_s": cold.first_edit(reply["output"], t0),
                                          "correct": end["correct"]}
    await cold.stop()
    return results


def table(r: dict) -> str:
    rows = [("code action, unchanged document", r["code_action"], "p99 < 20 ms"),
            ("code action, right after an edit", r["code_action_after_edit"], "p99 < 20 ms"),
            ("hover while conversions run", r["hover_during_conversion"], "< 50 ms"),
            ("first streamed edit, small file (warm)", r["first_edit_small_file"], "< 500 ms"),
            ("first streamed edit, 3,000-line file (warm)", r["first_edit_3000_line_file"], "< 500 ms")]
    out = ["| measurement | n | p50 ms | p99 ms | max ms | goal |", "|---|---|---|---|---|---|"]
    for name, s, goal in rows:
        out.append(f"| {name} | {s['n']} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} | {s['max_ms']:.1f} | {goal} |")
    f = r["first_edit_fresh_server"]
    out.append("")
    out.append(f"Document: {r['lines']} lines, {r['classes']} classes; device {r['device']}. "
               f"Start-up to ready (workers started): {r['startup_to_ready_s']:.1f} s. "
               f"Conversions completed during the hover run: {r['hover_during_conversion']['conversions_completed']}. "
               f"Fresh server, conversion asked at once: first edit {f['since_command_s']:.2f} s after the command "
               f"({f['since_process_start_s']:.2f} s after the process started).")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--lines", type=int, default=3000)
    p.add_argument("--requests", type=int, default=1000, help="code action requests")
    p.add_argument("--hover-seconds", type=float, default=20.0)
    p.add_argument("--first-edit-runs", type=int, default=10)
    p.add_argument("--json", help="write the raw results here")
    args = p.parse_args()
    results = asyncio.run(run(args))
    results["python"] = platform.python_version()
    results["machine"] = f"{platform.machine()}, {__import__('os').cpu_count()} cores"
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
