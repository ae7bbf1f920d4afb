"""`drtriton-lsp`: the DRTriton language server over stdio.

stdout carries the protocol and nothing else: the real stdout is kept for pygls and file
descriptor 1 is pointed at stderr, so a stray print (ours, a library's, a C extension's) cannot
corrupt the stream. Log records of `drtriton.*` go to the client's log (`window/logMessage`);
everything else, and anything before the client connects, goes to stderr.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import threading

from lsprotocol import types

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
_TYPES = [(logging.ERROR, types.MessageType.Error), (logging.WARNING, types.MessageType.Warning),
          (logging.INFO, types.MessageType.Info), (0, types.MessageType.Log)]


class ClientLogHandler(logging.Handler):
    """Sends records to the client's log from any thread, through the server's event loop."""

    def __init__(self, server, fallback: logging.Handler):
        super().__init__()
        self.server = server
        self.fallback = fallback
        self._local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        loop = getattr(self.server, "loop", None)
        if loop is None or loop.is_closed() or getattr(self._local, "busy", False):
            self.fallback.handle(record)
            return
        try:
            text = self.format(record)
            kind = next(t for level, t in _TYPES if record.levelno >= level)
            loop.call_soon_threadsafe(self._send, kind, text)
        except RuntimeError:  # the loop has closed
            self.fallback.handle(record)

    def _send(self, kind: types.MessageType, text: str) -> None:
        self._local.busy = True  # a failure to send logs; never recursively
        try:
            self.server.window_log_message(types.LogMessageParams(type=kind, message=text))
        except Exception:
            pass
        finally:
            self._local.busy = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drtriton-lsp", description="The DRTriton language server (stdio).")
    parser.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default)")
    parser.add_argument("--log-level", choices=list(LEVELS), default=os.environ.get("DRTRITON_LSP_LOG", "info"),
                        help="what goes to the client's log")
    parser.add_argument("--version", action="store_true")
    args = parser.parse_args(argv)

    from .server import VERSION, build

    if args.version:
        print(f"drtriton-lsp {VERSION}")
        return 0

    # keep the protocol's stdout; everything else written to fd 1 lands on stderr
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr

    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[stderr])
    server = build()
    ours = logging.getLogger("drtriton")
    ours.setLevel(LEVELS[args.log_level])
    ours.propagate = False
    client = ClientLogHandler(server, stderr)
    client.setFormatter(logging.Formatter("%(message)s"))
    ours.addHandler(client)
    atexit.register(server.engine.close)
    server.start_io(sys.stdin.buffer, protocol_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
