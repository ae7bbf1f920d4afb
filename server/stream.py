"""Streaming the generated module into its output file with `workspace/applyEdit`.

The server keeps a copy of what it wrote (the file's lines) to compute where the next text goes,
in the position encoding the client negotiated. Text is batched: an edit carries whole lines
where it can and leaves at most every `interval` seconds (the first one at once), one edit in
flight at a time, so a fast writer never floods the editor and a slow one still shows up within
about 100 ms. A new candidate replaces the file's text; a better verified module replaces it too.

Runs on the server's event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Awaitable, Callable

from lsprotocol import types

from .modules import split_lines

log = logging.getLogger("drtriton.server")

ApplyEdit = Callable[[types.WorkspaceEdit], Awaitable[bool]]


class OutputStream:
    def __init__(self, uri: str, path: Path, apply_edit: ApplyEdit | None, codec, *, document_changes: bool,
                 create_file: bool, current_text: str | None, interval: float = 0.1,
                 on_first_edit: Callable[[], None] | None = None):
        """`apply_edit` None: the client cannot apply edits; the file is written on disk."""
        self.uri, self.path = uri, path
        self._apply = apply_edit
        self._codec = codec
        self._document_changes = document_changes
        self._needs_create = False
        if apply_edit is None:
            self.lines = [""]
        elif current_text is not None:  # the client has it open: edit what it shows
            self.lines = split_lines(current_text)
        elif create_file and document_changes:
            self.lines = [""]
            self._needs_create = True  # CreateFile (overwrite) goes with the first edit
        else:
            self.lines = self._prepare_on_disk()
        self.interval = interval
        self._pending = ""
        self._reset = False  # the pending text replaces the whole file
        self._complete = False  # the pending text ends a candidate: send its partial last line
        self._pending_since = 0.0  # when the oldest text not sent yet arrived
        self._candidate: object = None
        self._last_sent = 0.0
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task | None = None
        self._on_first_edit = on_first_edit
        self.edits = 0  # applied edits
        self.failed = 0  # edits the client refused
        self.first_edit_at: float | None = None

    def _prepare_on_disk(self) -> list[str]:
        """A client that cannot create files: make an empty one, then edit it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")
        except OSError as e:
            log.warning("cannot create %s: %s", self.path, e)
        return [""]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    # -- feeding ----------------------------------------------------------------------------
    def begin(self, candidate: object, text: str) -> None:
        """The first text of a new candidate: it replaces what the file shows."""
        self._candidate = candidate
        self._pending, self._reset, self._complete = text, True, False
        self._pending_since = time.monotonic()
        self._schedule()

    def feed(self, candidate: object, text: str) -> None:
        if candidate != self._candidate:
            return  # an earlier candidate still writing: the file follows the latest
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending += text
        self._schedule()

    def end(self, candidate: object) -> None:
        if candidate == self._candidate:
            self._schedule(now=True, everything=True)

    async def replace(self, text: str) -> None:
        """The whole content at once (a better verified module); waits until it is applied."""
        self._candidate = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is not None:
            await asyncio.shield(self._flushing)
        async with self._lock:
            self._pending, self._reset = "", False
            if text == self.text and not self._needs_create:
                return
            await self._send(text, reset=True)

    async def drain(self) -> None:
        """Send everything pending now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._pending or self._reset or self._flushing is not None:
            if self._flushing is not None:
                await asyncio.shield(self._flushing)
            else:
                await self._flush(everything=True)

    # -- sending ----------------------------------------------------------------------------
    def _schedule(self, now: bool = False, everything: bool = False) -> None:
        """Flush at once if the last edit is `interval` old (or `now`), else when it will be.
        `everything`: the candidate is complete, its last partial line goes too."""
        if everything:
            self._complete = True
        if self._flushing is not None:
            return  # the running flush picks the text up when it is done
        wait = 0.0 if now else self._last_sent + self.interval - time.monotonic()
        if wait <= 0 and not self._complete and "\n" not in self._pending:
            wait = self._pending_since + self.interval - time.monotonic()  # a partial line: its age
        if wait <= 0:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            complete, self._complete = self._complete, False
            self._flushing = asyncio.ensure_future(self._flush(everything=complete))
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(wait, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._schedule()

    async def _flush(self, everything: bool = False) -> None:
        try:
            async with self._lock:
                text, reset = self._pending, self._reset
                if not text and not reset:
                    return
                rest = ""
                if not everything and not text.endswith("\n"):
                    cut = text.rfind("\n") + 1  # whole lines now, the rest with the next batch
                    if cut == 0 and time.monotonic() - self._pending_since < self.interval:
                        return  # a partial line younger than a batch: wait for its end
                    if cut > 0:
                        text, rest = text[:cut], text[cut:]
                self._pending, self._reset = rest, False
                self._pending_since = time.monotonic()
                await self._send(text, reset=reset)
        finally:
            if asyncio.current_task() is self._flushing:
                self._flushing = None
                if self._pending or self._reset:
                    self._schedule()

    def _end_position(self) -> types.Position:
        last = len(self.lines) - 1
        return self._codec.position_to_client_units(
            self.lines, types.Position(line=last, character=len(self.lines[last])))

    async def _send(self, text: str, reset: bool) -> None:
        if self._apply is None:
            await self._write(text, reset)
            return
        end = self._end_position()
        start = types.Position(line=0, character=0) if reset else end
        edit = types.TextEdit(range=types.Range(start=start, end=end), new_text=text)
        if self._document_changes:
            changes: list = []
            if self._needs_create:
                changes.append(types.CreateFile(uri=self.uri, options=types.CreateFileOptions(overwrite=True)))
            changes.append(types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=self.uri, version=None),
                edits=[edit]))
            workspace_edit = types.WorkspaceEdit(document_changes=changes)
        else:
            workspace_edit = types.WorkspaceEdit(changes={self.uri: [edit]})
        try:
            applied = await self._apply(workspace_edit)
        except Exception as e:  # the client went away or answered with an error
            log.warning("applying an edit to %s failed: %s", self.uri, e)
            applied = False
        if not applied:
            self.failed += 1
            log.warning("the client did not apply an edit to %s", self.uri)
            return
        self._needs_create = False
        self._written(text, reset)

    async def _write(self, text: str, reset: bool) -> None:
        lines = split_lines(text) if reset else self.lines[:-1] + split_lines(self.lines[-1] + text)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.get_running_loop().run_in_executor(None, self.path.write_text, "\n".join(lines))
        except OSError as e:
            self.failed += 1
            log.warning("cannot write %s: %s", self.path, e)
            return
        self._written(text, reset)

    def _written(self, text: str, reset: bool) -> None:
        if reset:
            self.lines = split_lines(text)
        else:
            self.lines[-1:] = split_lines(self.lines[-1] + text)
        self._last_sent = time.monotonic()
        self.edits += 1
        if self.first_edit_at is None:
            self.first_edit_at = self._last_sent
            if self._on_first_edit is not None:
                self._on_first_edit()
