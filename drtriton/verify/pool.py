"""Worker processes, seen from the parent: start, ask, watch, kill, replace.

A `Worker` is a `python -m drtriton.verify.worker` child with a clean environment, a scratch
folder and its own process group. Every request has a deadline; while waiting, the parent
watches the child's resident memory and whether it is still alive. A child that dies, hangs or
grows past its limit is killed (with everything it started) and reported as `WorkerDied` with
the reason, so the caller can return a "failed: why" verdict and get a fresh worker next time.

The `WorkerPool` keeps one reference worker (never runs candidate code) and up to `size`
candidate workers, reused while healthy because starting one (importing torch and Triton) takes
seconds. `GpuLock` lets correctness checks share the GPU while timing takes it alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_REPLY = 16 << 20


class WorkerDied(Exception):
    """The worker crashed, hung, ran out of memory or was cancelled; the message says which."""


class WorkerStartError(RuntimeError):
    """A worker could not start at all: the environment is broken, not the candidate."""


class Cancelled(Exception):
    """The caller cancelled the check."""


@dataclass
class PoolSettings:
    device: str  # "cpu" (Triton interpreter) or "cuda"
    memory_limit_mb: int | None = 16384
    isolate_network: bool = True
    startup_timeout_s: float = 180.0
    cache_dir: str = field(default_factory=lambda: str(Path.home() / ".cache" / "drtriton"))
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES for the workers (e.g. RL rewards on another GPU)
    compile_threads: int | None = None  # each worker's Triton compile threads (None: parallel_compile's default)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


class Worker:
    def __init__(self, role: str, settings: PoolSettings, root: str, transfer_dir: str):
        self.role = role
        self.settings = settings
        self.scratch = tempfile.mkdtemp(prefix=f"{role}-", dir=root)
        self.broken: str | None = None  # why this worker must not be reused
        self.killed_for: str | None = None
        triton_cache = os.path.join(settings.cache_dir, "triton")
        os.makedirs(triton_cache, exist_ok=True)
        tmp = os.path.join(self.scratch, "tmp")
        os.makedirs(tmp)
        worker_settings = {
            "device": settings.device,
            "scratch": self.scratch,
            "transfer_dir": transfer_dir,
            "writable_roots": [self.scratch, triton_cache],
            "isolate_network": settings.isolate_network,
            "compile_threads": settings.compile_threads,
            "address_space_bytes": (settings.memory_limit_mb << 20)
            if settings.memory_limit_mb and settings.device == "cpu" else None,
        }
        env = _clean_env(settings.device, self.scratch, tmp, triton_cache, settings.cache_dir)
        if settings.gpus is not None and settings.device == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = settings.gpus
        env["DRTRITON_WORKER_SETTINGS"] = json.dumps(worker_settings)
        parent_sock, child_sock = socket.socketpair()
        self.log_path = os.path.join(self.scratch, "worker.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "drtriton.verify.worker", role, str(child_sock.fileno())],
                pass_fds=[child_sock.fileno()], env=env, cwd=self.scratch,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        child_sock.close()
        self.conn = Connection(parent_sock.detach())
        try:
            self.hello = self._receive(settings.startup_timeout_s, None, "starting")
        except WorkerDied as e:
            raise WorkerStartError(f"could not start a {role} worker ({sys.executable}): {e}") from None

    # -- requests ------------------------------------------------------------------------------
    def call(self, request: dict, timeout: float, cancel: threading.Event | None = None) -> dict:
        if self.broken:
            raise WorkerDied(self.broken)
        try:
            self.conn.send_bytes(json.dumps(request).encode())
        except OSError:
            self._die("its connection closed")
        return self._receive(timeout, cancel, request["op"])

    def _receive(self, timeout: float, cancel, what: str) -> dict:
        deadline = time.monotonic() + timeout
        limit = self.settings.memory_limit_mb
        while True:
            try:
                ready = self.conn.poll(0.05)
            except OSError:
                ready = False
            if ready:
                try:
                    reply = json.loads(self.conn.recv_bytes(MAX_REPLY))
                    if reply.get("device_lost") and self.broken is None:
                        # the reply stands; the worker exits and is not reused
                        self.broken = f"its GPU context failed ({reply['device_lost']})"
                    return reply
                except (EOFError, OSError):
                    self._die(self._exit_reason())
                except (ValueError, UnicodeDecodeError):
                    self._die("sent a malformed reply")
            if self.proc.poll() is not None:
                self._die(self._exit_reason())
            if cancel is not None and cancel.is_set():
                self._die("cancelled", exc=Cancelled)
            if time.monotonic() > deadline:
                self._die(f"timed out after {timeout:g} s while {what}")
            if limit and self.rss_mb() > limit:
                self._die(f"used more than {limit} MiB of memory")

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.proc.pid}/statm") as f:
                return int(f.read().split()[1]) * _PAGE / 2**20
        except (OSError, IndexError, ValueError):
            return 0.0

    def _exit_reason(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "closed its connection"
        why = f"crashed ({_signal_name(code)})" if code < 0 else f"exited with code {code}"
        tail = self.log_tail()
        return f"{why}{': ' + tail if tail else ''}"

    def log_tail(self, lines: int = 6) -> str:
        try:
            text = Path(self.log_path).read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])[-800:]

    def _die(self, reason: str, exc=WorkerDied):
        self.kill(reason)
        raise exc(reason)

    def kill(self, reason: str = "stopped") -> None:
        if self.broken is None:
            self.broken = reason
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            self.conn.close()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _clean_env(device: str, scratch: str, tmp: str, triton_cache: str, cache_dir: str) -> dict:
    """Only what Python, torch and Triton need; nothing of the user's environment leaks in."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": scratch,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "TRITON_CACHE_DIR": triton_cache,
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, "inductor"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "OMP_NUM_THREADS": os.environ.get("DRTRITON_WORKER_THREADS", "2"),
    }
    for name in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
                 "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "VIRTUAL_ENV"):
        if name in os.environ:
            env[name] = os.environ[name]
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class WorkerPool:
    """One reference worker and a bounded set of reusable candidate workers."""

    def __init__(self, settings: PoolSettings, size: int = 2):
        self.settings = settings
        self.size = max(1, size)
        self.root = tempfile.mkdtemp(prefix="drtriton-")
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.transfer_dir = tempfile.mkdtemp(prefix="drtriton-transfer-", dir=shm)
        os.chmod(self.transfer_dir, 0o700)
        self._idle: list[Worker] = []
        self._spares: list[Worker] = []  # background jobs' workers (spare())
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(self.size)
        self._reference: Worker | None = None
        self._reference_lock = threading.RLock()
        self.prepared: dict[str, dict] = {}  # problem key -> the reference worker's prepare reply
        self.closed = False

    def _new(self, role: str) -> Worker:
        return Worker(role, self.settings, self.root, self.transfer_dir)

    @contextlib.contextmanager
    def reference(self):
        """Exclusive use of the reference worker, started (or restarted) on demand."""
        with self._reference_lock:
            if self._reference is None or self._reference.broken:
                if self._reference is not None:
                    self._reference.close()
                self.prepared.clear()
                self._reference = self._new("reference")
            yield self._reference

    @contextlib.contextmanager
    def candidate(self):
        """A healthy candidate worker for one check; a broken one is closed, not returned."""
        self._slots.acquire()
        worker = None
        try:
            with self._lock:
                while self._idle and worker is None:
                    w = self._idle.pop()
                    if w.broken or w.proc.poll() is not None:
                        w.close()
                    else:
                        worker = w
            if worker is None:
                worker = self._new("candidate")
            yield worker
        finally:
            if worker is not None:
                if worker.broken or self.closed:
                    worker.close()
                else:
                    with self._lock:
                        self._idle.append(worker)
            self._slots.release()

    @contextlib.contextmanager
    def spare(self, role: str):
        """A worker of its own for one background job (outside the candidate slots), closed
        after it, and killed if the pool closes first."""
        worker = self._new(role)
        with self._lock:
            self._spares.append(worker)
        try:
            yield worker
        finally:
            with self._lock:
                self._spares.remove(worker)
            worker.close()

    def warm(self, candidates: int | None = None) -> None:
        """Start workers ahead of need, in parallel (each takes seconds to import torch)."""
        n = min(self.size, candidates or self.size) - len(self._idle)
        threads = [threading.Thread(target=self._warm_one) for _ in range(max(n, 0))]
        with self.reference():
            pass
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _warm_one(self) -> None:
        w = self._new("candidate")
        with self._lock:
            self._idle.append(w)

    def close(self) -> None:
        self.closed = True
        with self._lock:
            for w in self._idle + self._spares:
                w.close()
            self._idle.clear()
        if self._reference is not None:
            self._reference.close()
            self._reference = None
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.transfer_dir, ignore_errors=True)


class GpuLock:
    """Correctness checks share the GPU; timing holds it alone. A file lock, so separate
    processes on one machine (two editors, several training runs on one GPU) also take turns.
    A waiting exclusive request goes first: it holds a second file, the turnstile, while it waits,
    and new shared holders pass through the turnstile before they take the lock (flock alone
    would let overlapping shared holders keep it waiting for as long as they keep coming). Both
    are files, so the order holds across processes as well as threads."""

    def __init__(self, cache_dir: str, name: str = "gpu.lock"):
        os.makedirs(cache_dir, exist_ok=True)
        self.path = os.path.join(cache_dir, name)
        self.turnstile = self.path + ".turnstile"

    @contextlib.contextmanager
    def _hold(self, mode: int):
        with contextlib.ExitStack() as stack:
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            stack.callback(os.close, fd)
            gate = os.open(self.turnstile, os.O_CREAT | os.O_RDWR, 0o600)
            stack.callback(os.close, gate)
            # exclusive: keep the turnstile shut until the lock is ours; shared: only pass through
            try:
                fcntl.flock(gate, fcntl.LOCK_EX if mode == fcntl.LOCK_EX else fcntl.LOCK_SH)
                if mode != fcntl.LOCK_EX:
                    fcntl.flock(gate, fcntl.LOCK_UN)
                fcntl.flock(fd, mode)
            finally:  # open again however the wait ended
                fcntl.flock(gate, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def shared(self):
        return self._hold(fcntl.LOCK_SH)

    def exclusive(self):
        return self._hold(fcntl.LOCK_EX)
