"""Worker process entry: `python -m drtriton.verify.worker ROLE FD`.

Started by `drtriton.verify.pool` with a clean environment, in a scratch folder, its own process
group, and a socket on FD. It confines itself (sandbox) before importing torch, says hello, then
answers one JSON request at a time until the socket closes.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from multiprocessing.connection import Connection

from .sandbox import AuditGuard, isolate_network, limit_address_space

MAX_REQUEST = 64 << 20


def main() -> None:
    role, fd = sys.argv[1], int(sys.argv[2])
    settings = json.loads(os.environ.pop("DRTRITON_WORKER_SETTINGS"))
    isolation = "none"
    if role == "candidate" and settings.get("isolate_network", True):
        isolation = isolate_network()  # must happen while the process has one thread
    if settings.get("address_space_bytes"):
        limit_address_space(settings["address_space_bytes"])
    conn = Connection(fd)

    import torch  # noqa: F401  (after the sandbox: nothing untrusted has run yet)

    if role in ("reference", "compile"):  # compile: torch.compile warm-ups (the user's own module)
        from .harness import ReferenceHarness

        harness = ReferenceHarness(settings)
    else:
        from .harness import CandidateHarness

        audit = None
        harness = None

        def inside_triton() -> bool:
            return harness is not None and harness.recorder.inside_launch

        audit = AuditGuard(settings["writable_roots"], inside_triton)
        harness = CandidateHarness(settings, audit)

    hello = {"ok": True, "pid": os.getpid(), "isolation": isolation, "torch": torch.__version__}
    import triton

    hello["triton"] = triton.__version__
    if settings["device"] == "cuda":
        hello["device_name"] = torch.cuda.get_device_name()
    conn.send_bytes(json.dumps(hello).encode())

    while True:
        try:
            request = json.loads(conn.recv_bytes(MAX_REQUEST))
        except (EOFError, OSError):
            return
        try:
            reply = harness.handle(request)
        except Exception as e:  # a bug of ours, or an exotic failure: report, don't die silently
            reply = {"ok": False, "kind": "internal", "error": f"{type(e).__name__}: {e}",
                     "traceback": traceback.format_exc(limit=8)}
        lost = settings["device"] == "cuda" and _device_lost()
        if lost:  # a device-side assert or a fault: this process's CUDA context is gone for good
            reply["device_lost"] = lost
        conn.send_bytes(json.dumps(reply, default=str).encode())
        if lost:
            return  # the pool starts a fresh worker for whatever comes next


def _device_lost() -> str:
    """Why this process's CUDA context can no longer run anything ('' while it can)."""
    import torch

    try:
        torch.cuda.synchronize()
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return ""


if __name__ == "__main__":
    main()
