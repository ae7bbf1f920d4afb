"""Process-level confinement of a worker, set up before any untrusted code is imported.

The hard boundary is the process: the parent can kill it, and the comparison with the reference
happens in another process. Inside it, these layers stop what a generated kernel has no business
doing, and turn it into a clear rejection instead of a quiet side effect:

- a new network namespace (no interfaces but loopback) where the kernel allows unprivileged
  user namespaces; else the audit hook refuses sockets;
- an address-space limit on CPU workers (CUDA reserves huge virtual ranges, so GPU workers are
  watched from the parent by resident memory instead);
- a Python audit hook, armed only while candidate code runs: no sockets, no subprocesses beyond
  the compilers Triton itself calls, no file writes outside the scratch and cache folders.
  (Patching is caught by `guard.PatchDetector`: CPython raises no audit event for it.)
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

# Executables Triton (and its driver build) start while compiling a kernel.
_ALLOWED_EXECUTABLES = {"ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm", "ldconfig",
                        "gcc", "cc", "clang", "g++", "c++", "x86_64-linux-gnu-gcc", "ld", "as"}


def isolate_network() -> str:
    """Move this (still single-threaded) process into a fresh network namespace."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            return f"audit hook only (unshare: {os.strerror(ctypes.get_errno())})"
        # Map our own ids so files we own stay ours inside the namespace.
        for path, text in (("/proc/self/setgroups", "deny"),
                           ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1")):
            try:
                with open(path, "w") as f:
                    f.write(text)
            except OSError:
                pass
        return "network namespace"
    except (OSError, AttributeError) as e:
        return f"audit hook only ({e})"


def limit_address_space(limit_bytes: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    new = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (new, hard))


class AuditGuard:
    """Refuses dangerous operations while `armed` (set by the harness around candidate code)."""

    def __init__(self, writable_roots: list[str], inside_triton=lambda: False):
        self.armed = False
        self._inside_triton = inside_triton  # Triton's own compile steps are trusted
        self.violations: list[str] = []
        self._roots = tuple(os.path.realpath(r) + os.sep for r in writable_roots)
        sys.addaudithook(self._hook)

    def _refuse(self, what: str) -> None:
        self.violations.append(what)
        raise PermissionError(f"drtriton sandbox: {what} is not allowed in a candidate")

    def _writable(self, path) -> bool:
        if isinstance(path, int):  # an fd we already hold
            return True
        real = os.path.realpath(os.fsdecode(path))
        return (real + os.sep).startswith(self._roots) or real.startswith(self._roots)

    def _hook(self, event: str, args: tuple) -> None:
        if not self.armed or self._inside_triton():
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            )
            if writing and path is not None and not self._writable(path):
                self._refuse(f"writing {path}")
        elif event in ("os.remove", "os.rename", "os.rmdir", "os.truncate", "shutil.rmtree",
                       "os.chmod", "os.chown", "os.link", "os.symlink"):
            path = args[0] if args else None
            if path is not None and not self._writable(path):
                self._refuse(f"{event} on {path}")
        elif event.startswith("socket.") or event in ("os.system", "os.fork", "os.forkpty",
                                                       "os.kill", "os.killpg", "pty.spawn",
                                                       "sys.setprofile", "sys.settrace"):
            self._refuse(event)
        elif event in ("subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec"):
            exe = args[0] if args else ""
            if not isinstance(exe, (str, bytes, os.PathLike)) and args and len(args) > 1:
                exe = (args[1] or [""])[0]
            name = os.path.basename(os.fsdecode(exe)) if exe else ""
            if name not in _ALLOWED_EXECUTABLES:
                self._refuse(f"starting {name or 'a process'}")
