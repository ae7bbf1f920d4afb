"""One lock for Python AST work done by several threads at once.

CPython 3.11's AST constructor keeps its recursion depth per interpreter, not per thread: two
threads parsing at once can fail with `SystemError: AST constructor recursion depth mismatch`
(CPython gh-106905). The search writes and checks fragments from several threads (each writes
its module through `ast`, and the verifier's static check parses it), so those steps hold this
lock; they take milliseconds, the checks themselves run in worker processes.
"""

import threading

AST_LOCK = threading.RLock()
