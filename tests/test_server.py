"""The language server end to end (pytest-lsp, a real `python -m drtriton.server` over stdio), on
a CPU: conversions run through the Triton interpreter on tiny modules.

The test client applies `workspace/applyEdit` to in-memory files (in the negotiated position
encoding), so the tests read the output file exactly as an editor would show it."""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
import time
import typing
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")  # the `test` extra; the server needs the `server` extra
pytest.importorskip("pygls")

from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import make_test_lsp_client

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT_S = 120.0  # the longest any one conversion may take here


# --------------------------------------------------------------------------------------------
# The test client: decodes code actions, applies edits, records conversions


_BREAK = re.compile(r"\r\n|\r|\n")


def _split(text: str) -> list[str]:
    return _BREAK.split(text)


def _offset(text: str, pos: types.Position, encoding: str) -> int:
    """A client position (line, character in the negotiated code units) as a string index."""
    starts = [0] + [m.end() for m in _BREAK.finditer(text)]
    lines = _split(text)
    line = min(pos.line, len(lines) - 1)
    units = 0
    for i, ch in enumerate(lines[line]):
        if units >= pos.character:
            return starts[line] + i
        units += {"utf-16": len(ch.encode("utf-16-le")) // 2, "utf-8": len(ch.encode("utf-8"))}.get(encoding, 1)
    return starts[line] + len(lines[line])


def apply_text_edits(text: str, edits, encoding: str) -> str:
    spans = [(_offset(text, e.range.start, encoding), _offset(text, e.range.end, encoding), e.new_text) for e in edits]
    for start, end, new in sorted(spans, key=lambda s: s[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text


class Client(LanguageClient):
    files: dict[str, str]
    edits: list[tuple[float, str, object]]
    conversions: list[dict]


def client_factory() -> Client:
    client = make_test_lsp_client()
    client.__class__ = Client
    client.files, client.edits, client.conversions = {}, [], []
    client.encoding = "utf-16"
    converter = client.protocol._converter

    def action(obj, _):
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(typing.Union[types.Command, types.CodeAction], action)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        now = time.monotonic()
        edit = params.edit
        for change in edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                if change.uri in client.files and not (change.options and change.options.overwrite):
                    continue
                client.files[change.uri] = ""
                client.edits.append((now, change.uri, "create"))
            elif isinstance(change, types.TextDocumentEdit):
                uri = change.text_document.uri
                client.files[uri] = apply_text_edits(client.files.get(uri, ""), change.edits, client.encoding)
                client.edits.append((now, uri, change.edits))
        for uri, edits in (edit.changes or {}).items():
            client.files[uri] = apply_text_edits(client.files.get(uri, ""), edits, client.encoding)
            client.edits.append((now, uri, edits))
        return types.ApplyWorkspaceEditResult(applied=True)

    @client.feature("$/drtriton/conversion")
    def conversion(params):
        client.conversions.append(dict(params) if isinstance(params, dict) else params._asdict())

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params):
        return None

    return client


CAPABILITIES = types.ClientCapabilities(
    general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
    window=types.WindowClientCapabilities(work_done_progress=True,
                                          show_document=types.ShowDocumentClientCapabilities(support=True)),
    workspace=types.WorkspaceClientCapabilities(
        configuration=True, apply_edit=True,
        workspace_edit=types.WorkspaceEditClientCapabilities(
            document_changes=True, resource_operations=[types.ResourceOperationKind.Create]),
        code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True)),
    text_document=types.TextDocumentClientCapabilities(
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown])),
)

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "drtriton.server"], client_factory=client_factory)


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: Client, tmp_path_factory):
    lsp_client.set_configuration({"device": "cpu", "mode": "strict", "searchBudgetSeconds": 120},
                                 section="drtriton")
    root = tmp_path_factory.mktemp("workspace")
    lsp_client.root = root
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=CAPABILITIES, root_uri=from_fs_path(str(root)),
        workspace_folders=[types.WorkspaceFolder(uri=from_fs_path(str(root)), name="ws")]))
    await wait_for_log(lsp_client, "DRTriton ready", 120)
    yield
    await lsp_client.shutdown_session()


# --------------------------------------------------------------------------------------------
# Helpers


async def wait_for(predicate, timeout: float = WAIT_S, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)


async def wait_for_log(client: Client, text: str, timeout: float = 60):
    return await wait_for(lambda: next((m for m in client.log_messages if text in m.message), None), timeout,
                          f"log {text!r}")


def open_file(client: Client, name: str, source: str) -> str:
    path = Path(client.root) / name
    path.write_text(source)
    uri = from_fs_path(str(path))
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=source)))
    client.versions = getattr(client, "versions", {})
    client.versions[uri] = 1
    client.sources = getattr(client, "sources", {})
    client.sources[uri] = source
    return uri


def change_file(client: Client, uri: str, new_source: str) -> int:
    """Replace the document's text (one full-range incremental change); the new version."""
    old = client.sources[uri]
    lines = _split(old)
    end = types.Position(line=len(lines) - 1, character=len(lines[-1].encode("utf-16-le")) // 2)
    client.versions[uri] += 1
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=client.versions[uri]),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=0, character=0), end=end), text=new_source)]))
    client.sources[uri] = new_source
    return client.versions[uri]


def line_of(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines()) if needle in line)


async def actions_at(client: Client, uri: str, line: int, end_line: int | None = None, only=None,
                     diagnostics=()):
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=line, character=0),
                          end=types.Position(line=end_line if end_line is not None else line, character=0)),
        context=types.CodeActionContext(diagnostics=list(diagnostics), only=only))) or []


async def convert(client: Client, uri: str, name: str) -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="drtriton.convert", arguments=[uri, name]))


async def finished(client: Client, job: int, timeout: float = WAIT_S) -> dict:
    return await wait_for(lambda: next((c for c in client.conversions if c["job"] == job
                                        and c["state"] in ("done", "cancelled", "failed")), None),
                          timeout, f"conversion {job} to end")


def diagnostics_for(client: Client, uri: str, name: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if isinstance(d.data, dict) and d.data.get("class") == name]


async def hover(client: Client, uri: str, line: int, character: int = 8):
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character)))


async def lenses(client: Client, uri: str):
    return await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri))) or []


def edits_to(client: Client, uri: str) -> list:
    return [e for e in client.edits if e[1] == uri]


# --------------------------------------------------------------------------------------------
# Sources


def small_module(name: str = "Small", width: int = 8, forward: str = "torch.relu(self.fc(x))",
                 sleep: float = 0.0) -> str:
    """A Linear+activation module with example inputs; `sleep` slows its reference (each trial
    runs it), so a conversion lasts long enough to cancel or edit."""
    body = (f"        time.sleep({sleep})\n" if sleep else "") + f"        return {forward}\n"
    head = textwrap.dedent(f'''\
        import time

        import torch
        import torch.nn as nn


        class {name}(nn.Module):
            """A tiny block to convert."""

            def __init__(self, width: int = {width}):
                super().__init__()
                self.fc = nn.Linear(width, width)

            def forward(self, x):
        ''')
    tail = textwrap.dedent(f'''\


        def get_inputs():
            return [torch.rand(4, {width})]


        def get_init_inputs():
            return [{width}]
        ''')
    return head + body + tail


ALIASES = textwrap.dedent('''\
    import torch
    import torch.nn as tnn
    from torch import nn
    from torch.nn import Module as M

    Base = nn.Module


    class Plain:
        def forward(self, x):
            return x


    class ViaAlias(M):
        def forward(self, x):
            return x * 2


    class ViaAssignment(Base):
        def forward(self, x):
            return x + 1


    class ViaTorch(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)


    class ViaRenamedImport(tnn.Module):
        def forward(self, x):
            return torch.sigmoid(x)


    class Child(ViaTorch):
        pass


    class NoForward(nn.Module):
        pass


    def get_inputs():
        return [torch.rand(4, 8)]
''')


# --------------------------------------------------------------------------------------------
# Code actions


async def test_convert_action_on_every_module_class_and_only_there(client: Client):
    uri = open_file(client, "aliases.py", ALIASES)
    expected = {"ViaAlias", "ViaAssignment", "ViaTorch", "ViaRenamedImport", "Child"}
    seen = set()
    for i, line in enumerate(ALIASES.splitlines()):
        for a in await actions_at(client, uri, i):
            assert isinstance(a, types.CodeAction) and a.command is not None, a
            if a.command.command == "drtriton.convert":
                assert a.title == f"Convert {a.command.arguments[1]} to Triton"
                assert a.kind == types.CodeActionKind.RefactorRewrite
                assert a.command.arguments[0] == uri
                seen.add(a.command.arguments[1])
    assert seen == expected
    # on the class line and inside its body, not on the blank lines or functions around it
    row = line_of(ALIASES, "class ViaAlias")
    assert [a.title for a in await actions_at(client, uri, row + 2)] == ["Convert ViaAlias to Triton"]
    assert await actions_at(client, uri, row - 1) == []
    assert await actions_at(client, uri, line_of(ALIASES, "class Plain") + 1) == []
    # a selection across two classes offers both; a client asking only for quick fixes gets none
    first, last = line_of(ALIASES, "class ViaAssignment"), line_of(ALIASES, "class ViaTorch") + 1
    titles = [a.title for a in await actions_at(client, uri, first, last)]
    assert titles == ["Convert ViaAssignment to Triton", "Convert ViaTorch to Triton"]
    assert await actions_at(client, uri, first, only=[types.CodeActionKind.QuickFix]) == []
    assert len(await actions_at(client, uri, first, only=[types.CodeActionKind.Refactor])) == 1


async def test_alias_based_class_converts(client: Client):
    """A class whose base is an alias `drtriton.problem` does not read (`M`) still converts."""
    uri = open_file(client, "alias_convert.py", ALIASES)
    reply = await convert(client, uri, "ViaAlias")
    assert "job" in reply, reply
    end = await finished(client, reply["job"])
    assert end["state"] == "done" and end["correct"], end
    assert "class ViaAliasTriton" in client.files[reply["output"]]


# --------------------------------------------------------------------------------------------
# The whole flow


async def test_whole_flow_streams_verifies_and_reports(client: Client):
    source = small_module("Small")
    uri = open_file(client, "small.py", source)
    row = line_of(source, "class Small")
    [action] = await actions_at(client, uri, row + 3)
    started = time.monotonic()
    reply = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=action.command.command, arguments=action.command.arguments))
    answered = time.monotonic() - started
    out_uri = from_fs_path(str(Path(client.root) / "small_triton.py"))
    assert reply["output"] == out_uri and reply["version"] == 1
    assert answered < 1.0, f"the command took {answered:.2f} s: it must not wait for the conversion"

    end = await finished(client, reply["job"])
    assert end["state"] == "done" and end["correct"], end

    # the file was created with the first text, streamed in whole lines (the built-in policy
    # writes a module at once, so one batch; tests/test_server_units.py covers the batching)
    ours = edits_to(client, out_uri)
    assert ours[0][2] == "create"
    text_edits = [e for e in ours if e[2] != "create"]
    assert text_edits and text_edits[0][0] - started < 5.0
    assert text_edits[0][2][0].new_text.startswith('"""SmallTriton')
    assert all(e[2][0].new_text.endswith("\n") for e in text_edits)
    final = client.files[out_uri]
    assert "class SmallTriton(nn.Module):" in final and "@triton.jit" in final
    compile(final, "small_triton.py", "exec")
    assert any(d.uri == out_uri and d.take_focus is False for d in client.shown_documents)

    # progress: begun (cancellable), reported, ended
    token = f"drtriton-{reply['job']}"
    reports = client.progress_reports[token]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd) and "converted" in reports[-1].message

    # the verdict on the class: diagnostic, code lens, hover, report command
    [diag] = await wait_for(lambda: diagnostics_for(client, uri, "Small"), 10, "diagnostic")
    assert diag.severity == types.DiagnosticSeverity.Information and diag.source == "drtriton"
    assert diag.message.startswith("correct on 7/7 trials"), diag.message
    assert diag.range.start.line == row and diag.range.start.character == 6
    assert diag.range.end.character == 6 + len("Small")
    [lens] = await lenses(client, uri)
    assert lens.range.start.line == row
    assert lens.command.title == "DRTriton: correct (speed not measured without a GPU)"
    h = await hover(client, uri, row)
    assert h is not None and h.contents.kind == types.MarkupKind.Markdown
    for part in ("### DRTriton: Small", "correct on 7/7 trials", "| # | part | policy | status |",
                 "whole module", "small_triton.py", "device cpu"):
        assert part in h.contents.value, (part, h.contents.value)
    assert await hover(client, uri, row + 3) is None, "hovers in the body belong to other servers"
    md = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="drtriton.report", arguments=[uri, "Small"]))
    assert md == h.contents.value


# --------------------------------------------------------------------------------------------
# Cancellation, concurrency, edits


async def test_cancel_from_progress_stops_the_conversion(client: Client):
    source = small_module("Slow", sleep=1.0)
    uri = open_file(client, "slow.py", source)
    t = time.monotonic()
    reply = await convert(client, uri, "Slow")  # a conversion of 8 s or more: the command must not wait
    assert time.monotonic() - t < 1.0
    token = f"drtriton-{reply['job']}"
    await wait_for(lambda: edits_to(client, reply["output"]), 60, "the first streamed edit")
    asked = time.monotonic()
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    end = await finished(client, reply["job"], 30)
    took = time.monotonic() - asked
    assert end["state"] == "cancelled", end
    assert took < 10, f"cancelling took {took:.1f} s"
    assert isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd)
    assert "cancelled" in client.progress_reports[token][-1].message
    assert diagnostics_for(client, uri, "Slow") == []
    # still serving
    assert await actions_at(client, uri, line_of(source, "class Slow"))


async def test_two_conversions_at_once_in_one_file(client: Client):
    source = small_module("First", sleep=0.3) + "\n\n" + textwrap.dedent('''\
        class Second(nn.Module):
            def __init__(self, width: int = 8):
                super().__init__()
                self.fc = nn.Linear(width, width)

            def forward(self, x):
                time.sleep(0.3)
                return torch.sigmoid(self.fc(x))
        ''')
    uri = open_file(client, "pair.py", source)
    a, b = await asyncio.gather(convert(client, uri, "First"), convert(client, uri, "Second"))
    assert a["output"] != b["output"], "two classes must not stream into one file"
    assert b["output"].endswith("pair_Second_triton.py") or a["output"].endswith("pair_First_triton.py")
    # both run at the same time: the second started before the first ended
    await wait_for(lambda: {c["job"] for c in client.conversions if c["state"] == "running"} >= {a["job"], b["job"]},
                   60, "both running")
    running_at = max(i for i, c in enumerate(client.conversions) if c["state"] == "running" and c["job"] in (a["job"], b["job"]))
    first_end = min(i for i, c in enumerate(client.conversions)
                    if c["state"] in ("done", "cancelled", "failed") and c["job"] in (a["job"], b["job"])) \
        if any(c["state"] == "done" for c in client.conversions if c["job"] in (a["job"], b["job"])) else 10**9
    assert running_at < first_end
    # requests are answered while they run
    t = time.monotonic()
    await hover(client, uri, line_of(source, "class First"))
    assert time.monotonic() - t < 1.0
    ea, eb = await finished(client, a["job"]), await finished(client, b["job"])
    assert ea["correct"] and eb["correct"], (ea, eb)
    assert "class FirstTriton" in client.files[a["output"]] and "class SecondTriton" not in client.files[a["output"]]
    assert "class SecondTriton" in client.files[b["output"]]
    assert {d.data["class"] for d in client.diagnostics[uri]} == {"First", "Second"}


async def test_edit_elsewhere_keeps_the_conversion_and_moves_its_verdict(client: Client):
    source = small_module("Kept", sleep=0.5)
    uri = open_file(client, "kept.py", source)
    reply = await convert(client, uri, "Kept")
    await wait_for(lambda: edits_to(client, reply["output"]), 60, "the first streamed edit")
    edited = "# a comment\n# another\n" + source
    version = change_file(client, uri, edited)
    end = await finished(client, reply["job"])
    assert end["state"] == "done" and end["correct"], end
    diags = await wait_for(lambda: diagnostics_for(client, uri, "Kept"), 10, "diagnostic")
    assert diags[0].range.start.line == line_of(edited, "class Kept")
    assert diags[0].data["version"] == version
    # once done, an edit of the class makes its verdict outdated: no diagnostic, a lens that says so
    change_file(client, uri, edited.replace("torch.relu(self.fc(x))", "torch.relu(self.fc(x)) * 2"))
    await wait_for(lambda: not diagnostics_for(client, uri, "Kept"), 10, "the verdict to go")
    [lens] = await lenses(client, uri)
    assert lens.command.title == "DRTriton: outdated (the class changed), convert again"
    assert lens.command.command == "drtriton.convert" and list(lens.command.arguments) == [uri, "Kept"]


async def test_edit_of_the_class_cancels_its_conversion(client: Client):
    source = small_module("Edited", sleep=1.0)
    uri = open_file(client, "edited.py", source)
    reply = await convert(client, uri, "Edited")
    await wait_for(lambda: edits_to(client, reply["output"]), 60, "the first streamed edit")
    change_file(client, uri, source.replace("torch.relu(self.fc(x))", "torch.tanh(self.fc(x))"))
    end = await finished(client, reply["job"], 30)
    assert end["state"] == "cancelled" and "changed while it was being converted" in end["summary"], end
    await asyncio.sleep(0.5)
    assert diagnostics_for(client, uri, "Edited") == []
    assert all("Edited" not in (lens.command.title or "") for lens in await lenses(client, uri))


async def test_cancel_from_the_code_lens(client: Client):
    source = small_module("Lensed", sleep=1.0)
    uri = open_file(client, "lensed.py", source)
    reply = await convert(client, uri, "Lensed")
    await wait_for(lambda: any(c["job"] == reply["job"] and c["state"] == "running" for c in client.conversions), 60)
    [lens] = await lenses(client, uri)
    assert lens.command.title == "DRTriton: converting (cancel)" and lens.command.command == "drtriton.cancel"
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=lens.command.command, arguments=lens.command.arguments))
    assert answer == {"cancelled": 1}
    end = await finished(client, reply["job"], 30)
    assert end["state"] == "cancelled", end


async def test_closing_the_document_cancels_its_conversion(client: Client):
    source = small_module("Closed", sleep=1.0)
    uri = open_file(client, "closed.py", source)
    reply = await convert(client, uri, "Closed")
    await wait_for(lambda: any(c["job"] == reply["job"] and c["state"] == "running" for c in client.conversions), 60)
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    end = await finished(client, reply["job"], 30)
    assert end["state"] == "cancelled" and "closed" in end["summary"], end


# --------------------------------------------------------------------------------------------
# Broken files, files without inputs, errors


async def test_malformed_file_gives_a_diagnostic_not_a_dead_server(client: Client):
    source = small_module("Broken") + "\n\ndef oops(:\n    pass\n"
    uri = open_file(client, "broken.py", source)
    row = line_of(source, "class Broken")
    [action] = await actions_at(client, uri, row)  # the class itself parses: the action is offered
    reply = await convert(client, uri, "Broken")
    assert reply.get("kind") == "syntax-error", reply
    [diag] = await wait_for(lambda: diagnostics_for(client, uri, "Broken"), 10, "diagnostic")
    assert diag.severity == types.DiagnosticSeverity.Error
    assert diag.range.start.line == line_of(source, "def oops(:")
    assert "syntax error" in diag.message
    assert any("syntax error" in m.message for m in client.messages)
    # garbage and an unknown class: answered, not crashed
    junk = open_file(client, "junk.py", "\x00\x01 class (((\n" + "'''" * 3 + "\ndef\n")
    assert await actions_at(client, junk, 0) == []
    unknown = await convert(client, uri, "Nope")
    assert "not an nn.Module subclass" in unknown["error"]
    # fixing the file clears the diagnostic
    change_file(client, uri, small_module("Broken"))
    await wait_for(lambda: not diagnostics_for(client, uri, "Broken"), 10, "the diagnostic to clear")


NO_INPUTS = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class Lonely(nn.Module):
        def __init__(self, in_features: int, out_features: int):
            super().__init__()
            self.fc = nn.Linear(in_features, out_features)

        def forward(self, x):
            return torch.relu(self.fc(x))
''')


async def test_file_without_inputs_says_why_and_offers_inputs_that_work(client: Client):
    uri = open_file(client, "lonely.py", NO_INPUTS)
    row = line_of(NO_INPUTS, "class Lonely")
    titles = [a.title for a in await actions_at(client, uri, row)]
    assert titles == ["Convert Lonely to Triton", "Add example inputs for Lonely"]
    reply = await convert(client, uri, "Lonely")
    assert reply.get("kind") == "no-inputs", reply
    [diag] = await wait_for(lambda: diagnostics_for(client, uri, "Lonely"), 10, "diagnostic")
    assert diag.severity == types.DiagnosticSeverity.Warning and diag.code == "no-inputs"
    assert "cannot be checked without example inputs" in diag.message and "get_inputs" in diag.message
    # the quick fix names the diagnostic it fixes and inserts the functions after the class
    fix = next(a for a in await actions_at(client, uri, row, diagnostics=[diag]) if a.title.startswith("Add"))
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred and list(fix.diagnostics) == [diag]
    [change] = fix.edit.document_changes
    new = apply_text_edits(NO_INPUTS, change.edits, "utf-16")
    assert "def get_inputs():" in new and "def get_init_inputs():" in new
    assert "return [torch.rand(2, 16)]" in new and "return [16, 16]" in new
    change_file(client, uri, new)
    await wait_for(lambda: not diagnostics_for(client, uri, "Lonely"), 10, "the diagnostic to clear")
    reply = await convert(client, uri, "Lonely")
    end = await finished(client, reply["job"])
    assert end["state"] == "done" and end["correct"], end


async def test_device_and_policy_errors_are_diagnostics(client: Client):
    source = small_module("Errs")
    uri = open_file(client, "errs.py", source)
    client.set_configuration({"device": "cuda"}, section="drtriton", scope_uri=uri)
    reply = await convert(client, uri, "Errs")
    end = await finished(client, reply["job"], 60)
    assert end["state"] == "failed", end
    [diag] = diagnostics_for(client, uri, "Errs")
    assert diag.severity == types.DiagnosticSeverity.Error and diag.code == "device"
    assert "no CUDA device" in diag.message and "drtriton.device" in diag.message
    client.set_configuration({"device": "cpu", "policy": "no-such-policy"}, section="drtriton", scope_uri=uri)
    reply = await convert(client, uri, "Errs")
    end = await finished(client, reply["job"], 60)
    assert end["state"] == "failed", end
    [diag] = diagnostics_for(client, uri, "Errs")
    assert diag.code == "policy" and "unknown policy" in diag.message
    if _has_openai():  # the registry's flags read as the editor's settings
        client.set_configuration({"device": "cpu", "policy": "openai"}, section="drtriton", scope_uri=uri)
        reply = await convert(client, uri, "Errs")
        await finished(client, reply["job"], 60)
        [diag] = diagnostics_for(client, uri, "Errs")
        assert "drtriton.endpoint" in diag.message and "--endpoint" not in diag.message, diag.message
    client.set_configuration({"device": "cpu", "output": "generated/{class}_tri.py"}, section="drtriton", scope_uri=uri)
    reply = await convert(client, uri, "Errs")
    assert reply["output"].endswith("/generated/Errs_tri.py"), reply
    end = await finished(client, reply["job"])
    assert end["correct"], end


# --------------------------------------------------------------------------------------------
# Model-backed policies: a fake OpenAI-compatible endpoint that streams its reply


FLIP = textwrap.dedent('''\
    import torch
    import torch.nn as nn


    class RunningMax(nn.Module):
        """The built-in policy's cummax takes float32 only: in float64 only the model converts it."""

        def forward(self, x):
            return torch.cummax(x, dim=1).values


    def get_inputs():
        return [torch.rand(4, 8, dtype=torch.float64)]
''')

FLIP_REPLY = '''Here is the Triton version.

```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def running_max_kernel(x_ptr, out_ptr, cols):
    row = tl.program_id(0)
    best = tl.load(x_ptr + row * cols)
    for c in range(cols):
        best = tl.maximum(best, tl.load(x_ptr + row * cols + c))
        tl.store(out_ptr + row * cols + c, best)


class RunningMaxTriton(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        running_max_kernel[(rows,)](x, out, cols)
        return out
```

It keeps the running maximum along each row, one program per row.
'''


def _has_openai() -> bool:
    try:
        from drtriton.policy.registry import POLICIES
    except ImportError:
        return False
    return "openai" in POLICIES


@pytest.fixture(scope="module")
def fake_model():
    """An OpenAI-compatible endpoint streaming FLIP_REPLY in small pieces, 10 ms apart."""
    import http.server
    import json
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(0, len(FLIP_REPLY), 24):
                piece = FLIP_REPLY[i:i + 24]
                self.wfile.write(f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': piece}}]})}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.01)
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.mark.skipif(not _has_openai(), reason="this build has no openai policy")
async def test_model_policy_streams_its_reply_and_keeps_the_code(client: Client, fake_model):
    uri = open_file(client, "running_max.py", FLIP)
    client.set_configuration({"device": "cpu", "policy": "openai", "endpoint": fake_model, "model": "fake"},
                             section="drtriton", scope_uri=uri)
    started = time.monotonic()
    reply = await convert(client, uri, "RunningMax")
    end = await finished(client, reply["job"])
    assert end["state"] == "done" and end["correct"], end
    out = reply["output"]
    text_edits = [e for e in edits_to(client, out) if e[2] != "create"]
    # the reply arrived as it was written: several edits, whole lines, about 100 ms apart
    streamed = [e for e in text_edits if "Here is the Triton version" in e[2][0].new_text
                or e[2][0].range.start != types.Position(line=0, character=0)]
    assert len(streamed) >= 3, [e[2][0].new_text for e in text_edits]
    assert streamed[0][0] - started < 5.0
    gaps = [b[0] - a[0] for a, b in zip(streamed, streamed[1:])][:-1]  # the last: when the reply ends
    assert min(gaps) > 0.08, gaps
    assert all(e[2][0].new_text.endswith("\n") for e in streamed[:-1])
    # then the file holds the code, not the prose and fences around it
    final = client.files[out]
    assert final.startswith("import torch") and "```" not in final and "Here is" not in final
    assert "class RunningMaxTriton(nn.Module):" in final
    [diag] = diagnostics_for(client, uri, "RunningMax")
    assert diag.message.startswith("correct on 7/7 trials")
    h = await hover(client, uri, line_of(FLIP, "class RunningMax"))
    assert "- Written by: the openai policy" in h.contents.value and "| openai |" in h.contents.value


@pytest.mark.skipif(not _has_openai(), reason="this build has no openai policy")
async def test_unreachable_endpoint_is_a_clear_diagnostic(client: Client):
    uri = open_file(client, "running_max_offline.py", FLIP)
    client.set_configuration({"device": "cpu", "policy": "openai", "endpoint": "http://127.0.0.1:9/v1",
                              "model": "fake"}, section="drtriton", scope_uri=uri)
    reply = await convert(client, uri, "RunningMax")
    end = await finished(client, reply["job"])
    assert end["state"] == "done" and not end["correct"], end
    diags = diagnostics_for(client, uri, "RunningMax")
    messages = " | ".join(d.message for d in diags)
    assert any(d.code == "no-correct-version" and d.severity == types.DiagnosticSeverity.Warning for d in diags), messages
    assert any(d.code == "policy" and "cannot reach the endpoint http://127.0.0.1:9/v1" in d.message for d in diags), messages
    assert any("cannot reach the endpoint" in m.message for m in client.messages)


def test_hover_report_lines_are_list_items_not_one_paragraph():
    """Markdown joins consecutive plain lines into one paragraph (VS Code showed "Output: ...
    Plan: ... Settings: ..." run together): each fact is a list item of its own."""
    from types import SimpleNamespace

    from drtriton.server.report import DONE, Report, markdown

    report = Report(uri="file:///m.py", class_name="Model", version=1)
    report.state = DONE
    report.output_uri = "file:///m_triton.py"
    report.result = SimpleNamespace(plan="fused: relu: Triton", policy="builtin", verdict=None, attempts=[], notes=[])
    report.settings = {"policy": "builtin", "device": "cpu", "mode": "strict", "search_budget_s": 60}
    lines = markdown(report).splitlines()
    for start in ("Output:", "Plan:", "Written by:", "Settings:"):
        line = next(line for line in lines if start in line)
        assert line.startswith(f"- {start}"), line
