"""Conversions in the background: one verifier per server, one queue of jobs with bounded
concurrency, each job a search running in its own thread and reporting back to the event loop.

Nothing here blocks the event loop: the verifier is built in a worker thread (it imports torch
and starts worker processes), the search's blocking iterator runs in a thread of its own, and
its events come back through `loop.call_soon_threadsafe` into an asyncio queue that the server's
handler (`Sink`) drains. Cancelling a job sets its `threading.Event`, which the search and the
verifier watch (a running check is stopped by killing its worker).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Protocol

from .config import Settings
from .report import CANCELLED, DEVICE, DONE, FAILED, INTERNAL, POLICY, RUNNING, Report

log = logging.getLogger("drtriton.server")

MAX_CONCURRENT = 2  # the verifier's candidate workers: more jobs would only wait on them

WARM_UP = """import torch
import torch.nn as nn


class WarmUp(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.rand(4, 8)]
"""


class Engine:
    """The one verifier of the server process, for the configured device. Created lazily (in a
    worker thread: it imports torch), warmed at start-up, recreated when the device setting
    changes; a replaced verifier is closed once the jobs using it are done."""

    def __init__(self, workers: int = 2, timeout_s: float = 120.0):
        self.workers, self.timeout_s = workers, timeout_s
        self._lock = threading.Lock()
        self._verifier = None
        self._device: str | None = None
        self._users: dict[int, int] = {}
        self._retired: list = []
        self._closing = threading.Event()  # stops a warm-up in progress
        self.closed = False

    def acquire(self, device: str):
        """The verifier for `device` (blocking). Raises ValueError when the device cannot be used
        (e.g. cuda without a GPU), RuntimeError when the workers cannot start."""
        from drtriton.verify import Verifier, VerifyConfig
        from drtriton.verify.verifier import resolve_device

        with self._lock:
            if self.closed:
                raise RuntimeError("the server is shutting down")
            resolved = resolve_device(device)  # ValueError: cuda without a GPU
            if self._verifier is None or self._device != resolved:
                config = VerifyConfig(device=device, workers=self.workers, timeout_s=self.timeout_s)
                verifier = Verifier(config)  # ValueError: no CUDA device
                if self._verifier is not None:
                    self._retire(self._verifier)
                self._verifier, self._device = verifier, resolved
                log.info("verifier ready: device %s (setting %s), %d workers", verifier.device, device, self.workers)
            v = self._verifier
            self._users[id(v)] = self._users.get(id(v), 0) + 1
            return v

    def release(self, verifier) -> None:
        with self._lock:
            self._users[id(verifier)] = self._users.get(id(verifier), 1) - 1
            if verifier in self._retired and self._users[id(verifier)] <= 0:
                self._retired.remove(verifier)
                verifier.close()

    def _retire(self, verifier) -> None:
        if self._users.get(id(verifier), 0) <= 0:
            verifier.close()
        else:
            self._retired.append(verifier)

    def warm(self, device: str) -> str:
        """Start the worker processes ahead of the first conversion and run one tiny conversion
        through them (the first capture and the first kernel pay for imports and tracing set-up
        that no user conversion should wait for); the device name."""
        v = self.acquire(device)
        try:
            v.pool.warm()
            try:
                from drtriton.problem import from_source
                from drtriton.search import Search, SearchConfig

                search = Search(from_source(WARM_UP, "WarmUp", origin="warm-up"), v, SearchConfig(budget_s=120),
                                cancel=self._closing)
                for _ in search.run():
                    pass
            except Exception as e:  # only a warm-up: the first conversion will say what is wrong
                if not self.closed:
                    log.info("warm-up conversion failed: %s", e)
            return v.device
        finally:
            self.release(v)

    @property
    def device(self) -> str | None:
        v = self._verifier
        return v.device if v is not None else None

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            self.closed = True
            for v in [self._verifier, *self._retired]:
                if v is not None:
                    try:
                        v.close()
                    except Exception:
                        log.exception("closing the verifier")
            self._verifier, self._retired = None, []


_ids = itertools.count(1)


@dataclass
class Job:
    uri: str
    class_name: str
    version: int | None
    problem: object  # drtriton.problem.Problem
    settings: Settings
    report: Report
    output_uri: str
    output_path: object  # pathlib.Path
    id: int = field(default_factory=lambda: next(_ids))
    cancel: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str = ""
    invalidated: bool = False
    progress_token: str | None = None
    task: asyncio.Task | None = None
    stream: object | None = None  # OutputStream, once the first module text arrives
    validated_version: int | None = None
    reply: tuple | None = None  # (candidate, policy, text so far) of the candidate being streamed

    def stop(self, reason: str, invalidated: bool = False) -> None:
        if not self.cancel.is_set():
            self.cancel_reason = reason
            self.invalidated = invalidated
            self.cancel.set()

    @property
    def active(self) -> bool:
        return self.task is not None and not self.task.done()


class Sink(Protocol):
    """What the server does with a job's life: all called on the event loop."""

    async def queued(self, job: Job) -> None: ...

    async def started(self, job: Job) -> None: ...

    async def event(self, job: Job, event) -> None: ...

    async def finished(self, job: Job) -> None: ...


_END = object()


class JobQueue:
    def __init__(self, engine: Engine, sink: Sink, max_concurrent: int = MAX_CONCURRENT):
        self.engine = engine
        self.sink = sink
        self._slots = asyncio.Semaphore(max_concurrent)
        self.jobs: dict[int, Job] = {}

    def submit(self, job: Job) -> Job:
        self.jobs[job.id] = job
        job.task = asyncio.ensure_future(self._run(job))
        return job

    def cancel_all(self, reason: str) -> None:
        for job in list(self.jobs.values()):
            job.stop(reason)

    async def _run(self, job: Job) -> None:
        report = job.report
        try:
            await self.sink.queued(job)
            async with self._slots:
                if job.cancel.is_set():
                    report.state = CANCELLED
                    return
                report.state, report.status = RUNNING, "starting"
                await self.sink.started(job)
                await self._search(job)
        except asyncio.CancelledError:
            job.stop("the server is shutting down")
            report.state = CANCELLED
            raise
        except Exception as e:  # a bug of ours: say so, keep serving
            log.error("conversion of %s failed:\n%s", job.class_name, traceback.format_exc())
            report.state, report.error_kind = FAILED, INTERNAL
            report.error = f"internal error while converting {job.class_name}: {type(e).__name__}: {e}"
        finally:
            report.finished = time.monotonic()
            self.jobs.pop(job.id, None)
            try:
                await self.sink.finished(job)
            except Exception:
                log.exception("finishing job %s", job.id)

    async def _search(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        report, s = job.report, job.settings
        try:
            verifier = await loop.run_in_executor(None, self.engine.acquire, s.device)
        except (ValueError, RuntimeError, OSError) as e:
            report.state, report.error_kind = FAILED, DEVICE
            hint = " Set drtriton.device to auto or cpu (the Triton interpreter)." if s.device == "cuda" else ""
            report.error = f"cannot check {job.class_name} on device {s.device}: {e}.{hint}"
            return
        try:
            if job.cancel.is_set():
                report.state = CANCELLED
                return
            try:
                policies = await loop.run_in_executor(None, _policies, s, verifier.device)
            except Exception as e:
                report.state, report.error_kind = FAILED, POLICY
                report.error = f"policy {s.policy!r}: {_editor_words(str(e))}"
                return
            events: asyncio.Queue = asyncio.Queue()

            def post(item) -> None:
                loop.call_soon_threadsafe(events.put_nowait, item)

            thread = threading.Thread(target=_search_thread, args=(job, verifier, policies, post),
                                      name=f"drtriton-job-{job.id}", daemon=True)
            thread.start()
            while True:
                item = await events.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    if job.cancel.is_set():
                        report.state = CANCELLED
                    else:
                        report.state, report.error_kind = FAILED, _error_kind(item)
                        report.error = f"converting {job.class_name} failed: {item}"
                    continue
                await self.sink.event(job, item)
                if item.kind == "done":
                    result = item.data["result"]
                    report.result = result
                    report.state = CANCELLED if job.cancel.is_set() and not result.correct else DONE
        finally:
            await loop.run_in_executor(None, self.engine.release, verifier)


def _policies(s: Settings, device: str) -> list:
    from drtriton.policy.registry import model_policies

    return model_policies(s.policy, s.endpoint, s.model, device)


def _editor_words(text: str) -> str:
    """The registry speaks of command-line flags; the editor has settings."""
    for flag in ("policy", "endpoint", "model", "device", "mode"):
        text = text.replace(f"--{flag}", f"drtriton.{flag}")
    return text


def _error_kind(e: BaseException) -> str:
    text = f"{type(e).__name__} {e}".lower()
    if any(w in text for w in ("connection", "endpoint", "model", "http", "timed out")):
        return POLICY
    return INTERNAL


def _search_thread(job: Job, verifier, policies: list, post) -> None:
    """Runs the blocking search; every event goes to the loop; always ends with _END."""
    try:
        from drtriton.search import Search, SearchConfig
        from drtriton.verify import Cancelled

        config = SearchConfig(mode=job.settings.mode, budget_s=job.settings.search_budget_s,
                              cuda_graph=job.settings.cuda_graph)
        search = Search(job.problem, verifier, config, policies=policies, cancel=job.cancel)
        try:
            for event in search.run():
                post(event)
        except Cancelled:
            post(Cancelled("cancelled"))
    except Exception as e:
        if not job.cancel.is_set():
            log.error("search for %s failed:\n%s", job.class_name, traceback.format_exc())
        post(e)
    finally:
        post(_END)
