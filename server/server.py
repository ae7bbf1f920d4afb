"""The language server: "Convert <Class> to Triton" in any LSP editor.

Handlers answer from what is already known (the module index of each open document, the
reports of conversions) and never wait on a conversion; conversions run in the background
(`jobs.py`), stream their module into the output file (`stream.py`), and leave their verdict on
the class as a diagnostic, a code lens and a hover (`report.py`).

Commands (for code actions, code lenses and editor plugins):
  drtriton.convert  [uri, class]      start a conversion; returns {job, output, version}
  drtriton.cancel   [uri[, class]]    cancel conversions (of a class, of a document, or all)
  drtriton.report   [uri, class]      the full report in Markdown (or null)
A `$/drtriton/conversion` notification tells plugins when a conversion starts and ends.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from drtriton.threads import serialize_ast_parsing

from . import inputs as example_inputs
from .config import Settings
from .jobs import Engine, Job, JobQueue
from .modules import DocumentIndex, ModuleClass, ModuleIndexer, normalize_for_problem
from .report import (CANCELLED, DONE, FAILED, NO_INPUTS, PROBLEM, QUEUED, RUNNING, SYNTAX, INTERNAL,
                     Report, diagnostic, diagnostics, lens_title, markdown)
from .stream import OutputStream

log = logging.getLogger("drtriton.server")

VERSION = "0.1.0"
WHOLE = "whole module"
CONVERT_KIND = types.CodeActionKind.RefactorRewrite
INPUTS_KIND = types.CodeActionKind.QuickFix
DEBOUNCE_S = 0.3  # after the last edit, before checking that running conversions still apply
CONFIG_TIMEOUT_S = 3.0
STATUS_NOTIFICATION = "$/drtriton/conversion"
SEVERITY = {"information": types.DiagnosticSeverity.Information, "warning": types.DiagnosticSeverity.Warning,
            "error": types.DiagnosticSeverity.Error}


def _kind_allowed(kind: str, only: list[str] | None) -> bool:
    return not only or any(kind == o or kind.startswith(o + ".") for o in only)


def _problem_keys(text: str, names: list[str], origin: str) -> dict[str, tuple[str, str]]:
    """For each class: ("key", problem key) or ("error", kind). Syntax only; runs in a thread."""
    from drtriton.problem import ProblemError, from_source

    out = {}
    for name in names:
        try:
            p = from_source(normalize_for_problem(text, name), name, name=name, origin=origin)
            out[name] = ("key", p.key)
        except SyntaxError:
            out[name] = ("error", SYNTAX)
        except ProblemError as e:
            out[name] = ("error", SYNTAX if "syntax error" in str(e) else PROBLEM)
        except Exception:
            out[name] = ("error", PROBLEM)
    return out


class DRTritonServer(LanguageServer):
    def __init__(self):
        super().__init__("drtriton-lsp", VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.indexer = ModuleIndexer()
        self.settings = Settings()
        self.engine = Engine()
        self.queue: JobQueue | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.reports: dict[str, dict[str, Report]] = {}  # uri -> class -> the latest conversion
        self.running: dict[tuple[str, str], Job] = {}  # (uri, class) -> its job
        self.outputs: dict[str, Job] = {}  # output uri -> the job writing it
        self._debounce: dict[str, asyncio.TimerHandle] = {}
        self._background: set[asyncio.Task] = set()
        self._warned: set[str] = set()

    # -- helpers -----------------------------------------------------------------------------
    def cap(self, *path: str) -> Any:
        """A client capability by attribute path, None when absent."""
        node: Any = self.client_capabilities
        for name in path:
            node = getattr(node, name, None)
            if node is None:
                return None
        return node

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)
        return task

    def document(self, uri: str):
        """The open document, or the file on disk (read by pygls), or None."""
        doc = self.workspace.text_documents.get(uri)
        if doc is not None:
            return doc
        path = to_fs_path(uri)
        if path and Path(path).is_file():
            return self.workspace.get_text_document(uri)
        return None

    def index_of(self, doc) -> DocumentIndex:
        return self.indexer.index(doc.source, doc.uri, doc.version)

    def position(self, idx: DocumentIndex, line: int, col: int) -> types.Position:
        line = min(max(line, 0), len(idx.lines) - 1)
        return self.workspace.position_codec.position_to_client_units(
            idx.lines, types.Position(line=line, character=min(col, len(idx.lines[line]))))

    def class_range(self, idx: DocumentIndex, m: ModuleClass) -> types.Range:
        line, col = m.info.name_line, m.info.name_col
        return types.Range(start=self.position(idx, line, col), end=self.position(idx, line, col + len(m.name)))

    def message(self, kind: types.MessageType, text: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=text))

    # -- settings ----------------------------------------------------------------------------
    async def fetch_settings(self, scope_uri: str | None = None) -> Settings:
        if not self.cap("workspace", "configuration"):
            return self.settings
        try:
            result = await asyncio.wait_for(self.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(scope_uri=scope_uri, section="drtriton")])), CONFIG_TIMEOUT_S)
        except Exception as e:
            log.warning("could not read the drtriton settings from the client (%s); using the last ones", e)
            return self.settings
        settings, problems = Settings.from_client(result[0] if result else None)
        for p in problems:
            log.warning("%s", p)
            if p not in self._warned:
                self._warned.add(p)
                self.message(types.MessageType.Warning, f"DRTriton: {p}")
        return settings

    async def load_settings(self, warm: bool = True) -> None:
        old = self.settings
        self.settings = await self.fetch_settings()
        log.info("settings: %s", self.settings)
        if warm and (old.device != self.settings.device or self.engine.device is None):
            self.spawn(self.warm())

    async def warm(self) -> None:
        """Start the verifier's workers now, so the first conversion starts at once."""
        device = self.settings.device
        started = time.monotonic()
        try:
            name = await asyncio.get_running_loop().run_in_executor(None, self.engine.warm, device)
        except Exception as e:
            if self.engine.closed:
                return
            log.warning("the verifier could not start on device %s: %s", device, e)
            self.message(types.MessageType.Warning, f"DRTriton: cannot use device {device}: {e}. "
                         "Conversions will fail until drtriton.device is set to auto or cpu.")
            return
        # torch and the search are imported now: keep their objects out of the garbage
        # collector's full passes, which would otherwise pause the event loop for 100 ms or more
        gc.collect()
        gc.freeze()
        log.info("DRTriton ready: verifier on %s (setting %s), workers started in %.1f s",
                 name, device, time.monotonic() - started)

    # -- the conversion command --------------------------------------------------------------
    async def convert(self, uri: str, class_name: str) -> dict:
        if not uri.startswith("file:"):
            return self._refuse("DRTriton: save the file first: the converted module is written beside it")
        doc = self.document(uri)
        if doc is None:
            return self._refuse(f"DRTriton: cannot read {uri}")
        text, version = doc.source, doc.version
        idx = self.index_of(doc)
        module = idx.module(class_name)
        if module is None:
            found = ", ".join(m.name for m in idx.modules)
            return self._refuse(f"DRTriton: {class_name} is not an nn.Module subclass in {Path(doc.path).name}"
                                + (f" (it has {found})" if found else ""))
        settings = await self.fetch_settings(uri)
        previous = self.running.get((uri, class_name))
        if previous is not None:
            previous.stop("a new conversion of the class was started")
        report = Report(uri, class_name, version, settings=_settings_dict(settings),
                        class_hash=module.info.text_hash)
        self.reports.setdefault(uri, {})[class_name] = report

        # the problem: syntax only, but a whole parse of the file, so off the event loop
        error = None
        try:
            problem = await asyncio.get_running_loop().run_in_executor(
                None, _build_problem, text, class_name, Path(doc.path).name)
        except SyntaxError as e:
            line = max((e.lineno or 1) - 1, 0)
            error = (SYNTAX, f"{Path(doc.path).name}:{line + 1}: syntax error: {e.msg}. Fix it to convert "
                             f"{class_name}.", (line, max((e.offset or 1) - 1, 0)))
        except Exception as e:
            from drtriton.problem import ProblemError

            kind = PROBLEM if isinstance(e, ProblemError) else INTERNAL
            if kind == PROBLEM and example_inputs.needs_inputs(idx, module):
                kind = NO_INPUTS
            error = (kind, str(e) if kind != INTERNAL else f"cannot read {class_name}: {type(e).__name__}: {e}",
                     None)
        if self.reports.get(uri, {}).get(class_name) is not report:
            return {"error": "superseded by a newer request or the document was closed"}
        if error is not None:
            report.state, report.error_kind, report.error, report.error_at = FAILED, error[0], error[1], error[2]
            report.finished = time.monotonic()
            self.publish(uri)
            self.refresh_lenses()
            first = error[1].split("\n\n")[0]
            level = types.MessageType.Warning if error[0] in (NO_INPUTS, PROBLEM) else types.MessageType.Error
            self.message(level, f"DRTriton: {first}")
            return {"error": error[1], "kind": error[0]}
        report.problem_key = problem.key
        report.valid_for = version

        source_path = Path(doc.path)
        out = settings.output_path(source_path, class_name)
        out_uri = from_fs_path(str(out))
        busy = self.outputs.get(out_uri)
        if busy is not None and busy.class_name != class_name or out_uri == uri:
            out = settings.output_path(source_path, class_name, disambiguate=True)
            out_uri = from_fs_path(str(out))
        report.output_uri = out_uri
        job = Job(uri, class_name, version, problem, settings, report, out_uri, out, validated_version=version)
        report.job_id = job.id
        self.running[(uri, class_name)] = job
        self.outputs[out_uri] = job
        assert self.queue is not None
        self.queue.submit(job)
        log.info("conversion %d: %s in %s (version %s) -> %s", job.id, class_name, source_path.name, version, out)
        self.refresh_lenses()
        return {"job": job.id, "output": out_uri, "version": version}

    def _refuse(self, text: str) -> dict:
        self.message(types.MessageType.Error, text)
        return {"error": text}

    def cancel(self, uri: str | None = None, class_name: str | None = None, reason: str = "cancelled") -> int:
        n = 0
        for (u, c), job in list(self.running.items()):
            if (uri is None or u == uri) and (class_name is None or c == class_name):
                job.stop(reason)
                n += 1
        return n

    # -- the job's life (jobs.Sink) ----------------------------------------------------------
    async def queued(self, job: Job) -> None:
        self.notify_status(job)
        if not self.cap("window", "work_done_progress"):
            return
        token = f"drtriton-{job.id}"
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), CONFIG_TIMEOUT_S)
        except Exception as e:
            log.info("no progress for conversion %d: %s", job.id, e)
            return
        job.progress_token = token
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=f"Converting {job.class_name} to Triton", cancellable=True, message="queued"))

    def progress(self, job: Job, text: str) -> None:
        if job.progress_token is not None and not job.cancel.is_set():
            self.work_done_progress.report(job.progress_token, types.WorkDoneProgressReport(message=text))

    async def started(self, job: Job) -> None:
        self.progress(job, "starting the verifier" if self.engine.device is None else "starting")
        self.notify_status(job)
        self.refresh_lenses()

    def stream_of(self, job: Job) -> OutputStream:
        if job.stream is None:
            doc = self.workspace.text_documents.get(job.output_uri)
            create = "create" in (self.cap("workspace", "workspace_edit", "resource_operations") or [])
            apply = self._apply_edit if self.cap("workspace", "apply_edit") else None
            job.stream = OutputStream(
                job.output_uri, Path(job.output_path), apply, self.workspace.position_codec,
                document_changes=bool(self.cap("workspace", "workspace_edit", "document_changes")),
                create_file=create, current_text=doc.source if doc is not None else None,
                on_first_edit=lambda: self.spawn(self._show(job.output_uri)))
        return job.stream

    async def _apply_edit(self, edit: types.WorkspaceEdit) -> bool:
        result = await self.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit))
        if not result.applied:
            log.warning("edit refused: %s", result.failure_reason or "no reason given")
        return bool(result.applied)

    async def _show(self, uri: str) -> None:
        if self.cap("window", "show_document", "support"):
            await self.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=False))

    async def event(self, job: Job, event) -> None:
        report, d, kind = job.report, event.data, event.kind
        if job.cancel.is_set() and kind in ("text", "best"):
            return  # stopped: leave the file as it is
        if kind == "status":
            report.status = d.get("message", "")
            self.progress(job, report.status)
        elif kind == "text":
            candidate = d.get("candidate")
            if d.get("fragment") != WHOLE or report.best is not None:
                # fragments are small problems of their own; and once a module is verified the
                # file keeps it, replaced only by a better verified one
                if d.get("first"):
                    what = d.get("fragment") if d.get("fragment") != WHOLE else "the whole module"
                    self.progress(job, f"candidate {candidate} for {what} ({d.get('policy')})")
                return
            stream = self.stream_of(job)
            if d.get("first"):
                report.streamed += 1
                job.reply = (candidate, d.get("policy"), d.get("text", ""))
                stream.begin(candidate, d.get("text", ""))
                self.progress(job, f"writing candidate {candidate} ({d.get('policy')})")
            else:
                if job.reply is not None and job.reply[0] == candidate:
                    job.reply = (candidate, job.reply[1], job.reply[2] + d.get("text", ""))
                stream.feed(candidate, d.get("text", ""))
            if d.get("last"):
                stream.end(candidate)
                if job.reply is not None and job.reply[0] == candidate and job.reply[1] != "builtin":
                    code = _code_of_reply(job.reply[2], job.problem.candidate_class)
                    if code is not None:  # a model's reply: the file keeps the code, not the prose
                        await stream.replace(code)
        elif kind == "candidate":
            report.candidates.append(dict(d))
            self.progress(job, f"[{d.get('id')}] {d.get('fragment')}: {d.get('summary')}")
        elif kind == "best":
            report.best = {k: v for k, v in d.items() if k != "source"}
            await self.stream_of(job).replace(d["source"])
            self.publish(job.uri)
            self.refresh_lenses()
        elif kind == "done":
            result = d["result"]
            if result.correct and result.source and not job.cancel.is_set():
                await self.stream_of(job).replace(result.source)

    async def finished(self, job: Job) -> None:
        report = job.report
        if job.stream is not None:
            await job.stream.drain()
        if self.running.get((job.uri, job.class_name)) is job:
            del self.running[(job.uri, job.class_name)]
        if self.outputs.get(job.output_uri) is job:
            del self.outputs[job.output_uri]
        if job.cancel.is_set() and report.state != FAILED and not report.correct:
            report.state = CANCELLED
        reports = self.reports.get(job.uri, {})
        if job.invalidated and reports.get(job.class_name) is report:
            del reports[job.class_name]  # it belongs to a version of the class that is gone
        end = self._end_message(job)
        if job.progress_token is not None:
            self.work_done_progress.end(job.progress_token, types.WorkDoneProgressEnd(message=end))
        log.info("conversion %d (%s): %s", job.id, job.class_name, end)
        if report.state == DONE:
            await self.validate(job.uri, publish=False)  # edits while it ran that kept its problem
        self.publish(job.uri)
        self.refresh_lenses()
        self.notify_status(job)
        if report.state == DONE and reports.get(job.class_name) is report:
            level = types.MessageType.Info if report.correct else types.MessageType.Warning
            self.message(level, f"DRTriton: {end}")
        elif report.state == FAILED:
            self.message(types.MessageType.Error, f"DRTriton: {report.error}")
        for note in getattr(report.result, "notes", None) or []:
            self.message(types.MessageType.Warning, f"DRTriton: {note}")

    def _end_message(self, job: Job) -> str:
        r = job.report
        if r.state == CANCELLED:
            return f"{job.class_name}: {job.cancel_reason or 'cancelled'}"
        if r.state == FAILED:
            return r.error or "failed"
        name = Path(job.output_path).name
        if r.correct:
            return f"{job.class_name} converted: {name} ({r.result.verdict.summary})"
        return f"no correct Triton version of {job.class_name}: {getattr(r.result, 'reason', '')}"

    def notify_status(self, job: Job) -> None:
        r = job.report
        d = diagnostic(r)
        self.protocol.notify(STATUS_NOTIFICATION, {
            "job": job.id, "uri": job.uri, "className": job.class_name, "output": job.output_uri,
            "state": r.state, "version": r.version, "correct": r.correct,
            "summary": d[1] if d else (job.cancel_reason if r.state == CANCELLED else r.status)})

    # -- keeping results true to the document ------------------------------------------------
    def schedule_validation(self, uri: str) -> None:
        if not self.reports.get(uri):
            return
        handle = self._debounce.pop(uri, None)
        if handle is not None:
            handle.cancel()
        self._debounce[uri] = asyncio.get_running_loop().call_later(
            DEBOUNCE_S, lambda: self.spawn(self.validate(uri)))

    async def validate(self, uri: str, publish: bool = True) -> None:
        """Reports and running conversions whose class changed (its problem: the class, the
        helpers it uses, its example inputs) are outdated: a running one is stopped, a finished
        one says so. A file that does not parse right now defers the decision."""
        self._debounce.pop(uri, None)
        doc = self.document(uri)
        reports = self.reports.get(uri, {})
        if doc is None or not reports:
            return
        text, version = doc.source, doc.version
        idx = self.index_of(doc)
        for name, r in list(reports.items()):
            if r.state == FAILED:
                m = idx.module(name)
                fixed = (m is None or (r.error_kind == NO_INPUTS and not example_inputs.needs_inputs(idx, m))
                         or (r.error_kind == SYNTAX and idx.syntax_error is None)
                         or r.class_hash != m.info.text_hash)
                if fixed:
                    del reports[name]
        names = [n for n, r in reports.items() if r.problem_key and not r.stale and r.valid_for != version]
        if names:
            keys = await asyncio.get_running_loop().run_in_executor(
                None, _problem_keys, text, names, Path(doc.path).name)
            if doc.version != version:
                return  # edited again meanwhile: the next check decides
            for name in names:
                r = reports.get(name)
                what, value = keys[name]
                if r is None or (what == "error" and value == SYNTAX):
                    continue  # mid-edit: decide once the file parses again
                if what == "key" and value == r.problem_key:
                    r.valid_for = version
                    continue
                job = self.running.get((uri, name))
                if job is not None and job.report is r:
                    job.stop(f"{name} changed while it was being converted; convert it again", invalidated=True)
                else:
                    r.stale = True
        if publish:
            self.publish(uri)
            self.refresh_lenses()

    def publish(self, uri: str) -> None:
        doc = self.document(uri)
        reports = self.reports.get(uri, {})
        found: list[types.Diagnostic] = []
        idx = self.index_of(doc) if doc is not None else None
        for r in reports.values():
            if idx is None:
                break
            for severity, text, code in diagnostics(r):
                if r.error_kind == SYNTAX and r.error_at is not None:
                    line, col = r.error_at
                    line = min(line, len(idx.lines) - 1)
                    rng = types.Range(start=self.position(idx, line, col),
                                      end=self.position(idx, line, len(idx.lines[line])))
                else:
                    m = idx.module(r.class_name)
                    if m is None:
                        continue
                    rng = self.class_range(idx, m)
                found.append(types.Diagnostic(
                    range=rng, message=text, severity=SEVERITY[severity], code=code, source="drtriton",
                    data={"class": r.class_name, "job": r.job_id, "version": r.valid_for or r.version}))
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, diagnostics=found, version=doc.version if doc is not None else None))

    def refresh_lenses(self) -> None:
        if self.cap("workspace", "code_lens", "refresh_support"):
            self.spawn(self.workspace_code_lens_refresh_async(None))

    # -- requests -----------------------------------------------------------------------------
    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        doc = self.workspace.text_documents.get(params.text_document.uri)
        if doc is None or not _is_python(doc):
            return None
        idx = self.index_of(doc)
        modules = idx.modules_in(params.range.start.line, params.range.end.line)
        only = params.context.only
        actions: list[types.CodeAction] = []
        for m in modules:
            if m.has_forward and _kind_allowed(CONVERT_KIND, only):
                title = f"Convert {m.name} to Triton"
                actions.append(types.CodeAction(title=title, kind=CONVERT_KIND, command=types.Command(
                    title=title, command="drtriton.convert", arguments=[doc.uri, m.name])))
            if m.has_forward and _kind_allowed(INPUTS_KIND, only) and example_inputs.needs_inputs(idx, m):
                fixes = [d for d in params.context.diagnostics
                         if d.source == "drtriton" and d.code == NO_INPUTS
                         and isinstance(d.data, dict) and d.data.get("class") == m.name]
                actions.append(types.CodeAction(
                    title=f"Add example inputs for {m.name}", kind=INPUTS_KIND, diagnostics=fixes or None,
                    is_preferred=bool(fixes) or None, edit=self.inputs_edit(doc, idx, m)))
        return actions or None

    def inputs_edit(self, doc, idx: DocumentIndex, m: ModuleClass) -> types.WorkspaceEdit:
        gen = example_inputs.generate(idx, m)
        after = gen.after_line
        rest_blank = all(not line.strip() for line in idx.lines[after + 1:])
        text = "\n\n\n" + gen.code + ("" if rest_blank else "\n")
        end = self.position(idx, after, len(idx.lines[after]))
        edits = [types.TextEdit(range=types.Range(start=end, end=end), new_text=text)]
        if gen.import_line is not None:
            at = types.Position(line=gen.import_line, character=0)
            edits.insert(0, types.TextEdit(range=types.Range(start=at, end=at), new_text="import torch\n"))
        if self.cap("workspace", "workspace_edit", "document_changes"):
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version),
                edits=edits)])
        return types.WorkspaceEdit(changes={doc.uri: edits})

    def code_lenses(self, params: types.CodeLensParams) -> list[types.CodeLens] | None:
        uri = params.text_document.uri
        reports = self.reports.get(uri)
        doc = self.workspace.text_documents.get(uri)
        if not reports or doc is None:
            return None
        idx = self.index_of(doc)
        lenses = []
        for name, r in reports.items():
            title, m = lens_title(r), idx.module(name)
            if title is None or m is None:
                continue
            command = ("drtriton.cancel" if r.state in (QUEUED, RUNNING) else
                       "drtriton.convert" if r.stale or r.state == FAILED else "drtriton.report")
            lenses.append(types.CodeLens(range=self.class_range(idx, m),
                                         command=types.Command(title=title, command=command, arguments=[uri, name])))
        return lenses

    def hover(self, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        reports = self.reports.get(uri)
        doc = self.workspace.text_documents.get(uri)
        if not reports or doc is None:
            return None
        idx = self.index_of(doc)
        m = idx.module_at(params.position.line)
        if m is None or params.position.line > m.info.name_line or m.name not in reports:
            return None  # only on the class line (and its decorators): the body's hovers are others'
        formats = self.cap("text_document", "hover", "content_format") or [types.MarkupKind.Markdown]
        kind = types.MarkupKind.Markdown if types.MarkupKind.Markdown in formats else types.MarkupKind.PlainText
        return types.Hover(contents=types.MarkupContent(kind=kind, value=markdown(reports[m.name])),
                           range=self.class_range(idx, m))

    def report_markdown(self, uri: str, class_name: str) -> str | None:
        r = self.reports.get(uri, {}).get(class_name)
        return markdown(r) if r is not None else None

    # -- documents ---------------------------------------------------------------------------
    def opened(self, params: types.DidOpenTextDocumentParams) -> None:
        doc = self.workspace.text_documents.get(params.text_document.uri)
        if doc is not None and _is_python(doc):
            self.index_of(doc)  # the first (whole) parse now, not on the first cursor move

    def changed(self, params: types.DidChangeTextDocumentParams) -> None:
        self.schedule_validation(params.text_document.uri)

    def closed(self, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        self.indexer.forget(uri)
        handle = self._debounce.pop(uri, None)
        if handle is not None:
            handle.cancel()
        if self.cancel(uri, reason="the document was closed"):
            log.info("%s closed: its conversions were cancelled", uri)
        if self.reports.pop(uri, None):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    async def shutting_down(self) -> None:
        for handle in self._debounce.values():
            handle.cancel()
        self.cancel(reason="the editor is shutting down")
        tasks = [j.task for j in self.running.values() if j.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=3.0)
        await asyncio.get_running_loop().run_in_executor(None, self.engine.close)


def _settings_dict(s: Settings) -> dict:
    return {"policy": s.policy, "device": s.device, "mode": s.mode, "search_budget_s": s.search_budget_s,
            "model": s.model, "endpoint": s.endpoint, "cuda_graph": s.cuda_graph}


def _build_problem(text: str, class_name: str, path: str):
    from drtriton.problem import from_source

    return from_source(normalize_for_problem(text, class_name), class_name, name=class_name, origin=path)


def _code_of_reply(text: str, candidate_class: str) -> str | None:
    try:
        from drtriton.prompting import parse_reply
    except ImportError:
        return None
    try:
        return parse_reply(text, candidate_class).code
    except Exception:
        return None


def _is_python(doc) -> bool:
    return doc.language_id in (None, "python") or str(doc.uri).endswith((".py", ".pyi"))


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        e = task.exception()
        log.error("background task failed: %s: %s", type(e).__name__, e, exc_info=e)


# --------------------------------------------------------------------------------------------
# Wiring


def build() -> DRTritonServer:
    serialize_ast_parsing()
    server = DRTritonServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: DRTritonServer, params: types.InitializeParams):
        ls.loop = asyncio.get_running_loop()
        ls.queue = JobQueue(ls.engine, ls)
        opts = params.initialization_options
        if isinstance(opts, dict) and isinstance(opts.get("drtriton", opts), dict):
            ls.settings, _ = Settings.from_client(opts.get("drtriton", opts))

    @server.feature(types.INITIALIZED)
    def initialized(ls: DRTritonServer, params: types.InitializedParams):
        encoding = ls.workspace.position_encoding
        log.info("drtriton-lsp %s: position encoding %s", VERSION, getattr(encoding, "value", encoding))
        ls.spawn(ls.load_settings())

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: DRTritonServer, params: types.DidChangeConfigurationParams):
        pushed = params.settings.get("drtriton") if isinstance(params.settings, dict) else None
        if pushed is not None and not ls.cap("workspace", "configuration"):
            old = ls.settings
            ls.settings, _ = Settings.from_client(pushed)
            if old.device != ls.settings.device:
                ls.spawn(ls.warm())
            return
        ls.spawn(ls.load_settings())

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: DRTritonServer, params: types.DidOpenTextDocumentParams):
        ls.opened(params)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: DRTritonServer, params: types.DidChangeTextDocumentParams):
        ls.changed(params)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DRTritonServer, params: types.DidCloseTextDocumentParams):
        ls.closed(params)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[CONVERT_KIND, INPUTS_KIND], resolve_provider=False))
    def code_action(ls: DRTritonServer, params: types.CodeActionParams):
        return ls.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: DRTritonServer, params: types.CodeLensParams):
        return ls.code_lenses(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: DRTritonServer, params: types.HoverParams):
        return ls.hover(params)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: DRTritonServer, params: types.WorkDoneProgressCancelParams):
        for job in list(ls.running.values()):
            if job.progress_token == params.token:
                job.stop("cancelled")

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: DRTritonServer, params):
        await ls.shutting_down()

    @server.command("drtriton.convert")
    async def convert(ls: DRTritonServer, uri: str, class_name: str):
        return await ls.convert(uri, class_name)

    @server.command("drtriton.cancel")
    def cancel(ls: DRTritonServer, *args):
        uri = args[0] if args and isinstance(args[0], str) else None
        name = args[1] if len(args) > 1 and isinstance(args[1], str) else None
        return {"cancelled": ls.cancel(uri, name)}

    @server.command("drtriton.report")
    def report(ls: DRTritonServer, uri: str, class_name: str):
        return ls.report_markdown(uri, class_name)

    return server
