"""One `ast.parse` at a time in this process.

CPython 3.11's AST constructor keeps its recursion depth per interpreter, not per thread: parses
in concurrent threads (the search's fragment threads writing and statically checking modules,
the language server's jobs, problem loading, the module index) can fail with "SystemError: AST
constructor recursion depth mismatch" (CPython gh-106905; seen on 3.11.7, where it cost a
fragment's check). A parse holds the GIL anyway, so the lock costs no parallelism.
"""

import threading


def serialize_ast_parsing() -> None:
    """Make `ast.parse` take a process-wide lock (once; later calls do nothing)."""
    import ast

    if getattr(ast.parse, "_drtriton_serialized", False):
        return
    lock = threading.RLock()
    parse = ast.parse

    def serialized_parse(*args, **kwargs):
        with lock:
            return parse(*args, **kwargs)

    serialized_parse._drtriton_serialized = True
    ast.parse = serialized_parse
