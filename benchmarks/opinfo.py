"""PyTorch's OpInfo database against the converter: each float32 operator (its first CPU sample
with elements, small enough to write out) as a one-operator problem, converted by the built-in
policy through the search, on the CPU (Triton interpreter), in strict and in mixed mode.

    python benchmarks/opinfo.py --out docs/opinfo.md                 # every operator (hours)
    python benchmarks/opinfo.py --limit 40 --out /tmp/opinfo.md      # the first 40
    python benchmarks/opinfo.py --only add,gather,rsqrt --out -      # some, to stdout

Needs `expecttest` (OpInfo's module imports it). An operator is called as OpInfo calls it: through
its public callable (`torch.X`, `torch.nn.functional.X`, `torch.special.X`, `torch.linalg.X`,
`torch.fft.X`, or a Tensor method), or through OpInfo's own lambda written into the problem file
(`where`, `einsum`, `scaled_dot_product_attention`, dtype casts: it orders the arguments). It is
left out, with the reason, when it has no float32 CPU support, neither, a sample that cannot be
written as a problem file, an output that is not tensors, or random output.

The percentages count only what PyTorch's own compiler handles: a problem is counted when
`torch.compile(model, backend="inductor", fullgraph=True)` compiles it and runs its sample on the
CPU (in a child process, with a time limit per problem; `--compile-cache` keeps the answers).
View-only operators (every output is a view of an input: no compute, nothing to convert) are
their own category, counted and listed outside the percentages; so are the problems
torch.compile cannot compile (listed with its reason and what the converter does with them).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import hashlib
import importlib
import json
import linecache
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drtriton.problem import from_source  # noqa: E402

MAX_LITERAL = 4096  # elements of a sample tensor written into the problem file
COMPILE_TIMEOUT = 120.0  # seconds torch.compile may take on one problem
MODULES = ("torch.nn.functional", "torch.special", "torch.linalg", "torch.fft", "torch")


@dataclass
class Case:
    name: str
    source: str = ""  # the problem file; "" when left out
    left_out: str = ""  # why it is not a problem
    view: bool = False  # every output is a view of an input: nothing to convert, outside the percentages
    compiles: str = ""  # "yes", or why torch.compile (Inductor, CPU) cannot compile and run it
    strict: str = ""  # "correct" or the reason
    mixed: str = ""
    seconds: float = 0.0


def callable_expr(name: str) -> tuple[str, bool] | None:
    """(`torch.nn.functional.relu`, False) for a function, (`relu`, True) for a Tensor method,
    None when OpInfo's name is neither."""
    for module in MODULES:
        prefix = module.removeprefix("torch").lstrip(".")  # "", "nn.functional", "special", ...
        if prefix and not name.startswith(prefix + "."):
            continue
        rest = name[len(prefix) + 1:] if prefix else name
        if "." not in rest and callable(getattr(importlib.import_module(module), rest, None)):
            return f"{module}.{rest}", False
    if callable(getattr(torch.Tensor, name, None)):
        return name, True
    return None


#: names a lambda from OpInfo's module may use and still be written into a problem file as it is
_LAMBDA_NAMES = {"torch"} | set(dir(builtins))


def lambda_source(fn) -> str | None:
    """OpInfo's `op` when it is a lambda (`lambda self, condition, other: torch.where(condition,
    self, other)`): its source text, read from its file (the longest run from the `lambda` on its
    first line that parses as a lambda of the same parameters), or None where it cannot be
    written into a problem file (no source, or names from OpInfo's module besides torch)."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename)[code.co_firstlineno - 1:code.co_firstlineno + 15]
    if not lines:
        return None
    text = "".join(lines)
    params = list(code.co_varnames[:code.co_argcount])
    ends = [i for i, ch in enumerate(text) if ch in ",)]}\n"] + [len(text)]
    found = None
    for start in (i for i in range(len(text)) if text.startswith("lambda", i) and i < len(lines[0])):
        for end in ends:
            if end <= start:
                continue
            candidate = text[start:end].replace("\n", " ")
            try:
                tree = ast.parse(candidate, mode="eval").body
            except SyntaxError:
                continue
            if isinstance(tree, ast.Lambda) and [a.arg for a in tree.args.args] == params:
                found = candidate
    if found is None:
        return None
    tree = _Unseeded().visit(ast.parse(found, mode="eval")).body
    bound = {a.arg for n in ast.walk(tree) if isinstance(n, ast.Lambda)
             for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs, n.args.vararg, n.args.kwarg] if a}
    free = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - bound
    return ast.unparse(tree) if free <= _LAMBDA_NAMES else None


class _Unseeded(ast.NodeTransformer):
    """`wrapper_set_seed(f, *args)` -> `f(*args)`: OpInfo seeds random operators to compare two
    runs; the operator is `f` (and a random one is then left out as random)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "wrapper_set_seed" and node.args:
            return ast.Call(func=node.args[0], args=node.args[1:], keywords=node.keywords)
        return node


class Writer:
    """Turns a sample's values into forward arguments (tensors) and literals (the rest)."""

    def __init__(self):
        self.inputs: list[str] = []  # get_inputs() expressions

    def value(self, v) -> str:
        if isinstance(v, torch.Tensor):
            return self.tensor(v)
        if isinstance(v, (list, tuple)):
            inner = ", ".join(self.value(x) for x in v)
            return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
        if isinstance(v, (bool, int, float, str, type(None), torch.dtype)):
            text = repr(v)
            if isinstance(v, float) and not torch.isfinite(torch.tensor(v)):
                text = f"float('{v}')"
            return text
        if isinstance(v, torch.Size):
            return repr(tuple(v))
        raise ValueError(f"a {type(v).__name__} argument")

    def tensor(self, t: torch.Tensor) -> str:
        t = t.detach().contiguous()
        if t.is_complex() or t.is_sparse or t.numel() > MAX_LITERAL:
            raise ValueError(f"a {'complex' if t.is_complex() else 'large' if t.numel() > MAX_LITERAL else 'sparse'} tensor")
        shape = tuple(t.shape)
        # a NaN or an infinity reads back as a name: written as float('nan'), float('inf')
        listed = re.sub(r"\b(nan|inf)\b", r"float('\1')", repr(t.reshape(-1).tolist()))
        values = f"torch.tensor({listed}, dtype={t.dtype}).reshape({shape!r})"
        if t.is_floating_point():  # the sample's values (its domain), moved a little every trial
            values = f"({values} + 0.01 * torch.randn({shape!r}, dtype={t.dtype}))"
            if t.numel() and bool(torch.isfinite(t).all()):  # inside the sample's range: a
                values += f".clamp({float(t.min())!r}, {float(t.max())!r})"  # probability stays one
        self.inputs.append(values)
        return f"a{len(self.inputs) - 1}"


def _tensors(v) -> list:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _tensors(x)]
    return []


#: samples looked at for one that makes a problem (the first usually does)
MAX_SAMPLES = 20


def make_problem(op, pick: int = 0) -> str:
    """The problem file of the operator's first CPU float32 sample whose tensors all have
    elements (several operators' first sample is empty: nothing to compute) and are small
    enough to write out; `pick` > 0 takes the pick-th such sample after it, -1 the last among the
    first MAX_SAMPLES (another sample of the same operator: its other arguments, dims, shapes),
    falling back to the last usable one where there are fewer. Called as OpInfo calls it: a
    lambda of OpInfo's is written into the file (it puts the arguments in the operator's order),
    else the public callable."""
    if getattr(op.op, "__name__", "") == "<lambda>":
        source = lambda_source(op.op)
        if source is None:
            raise ValueError("OpInfo calls it through a lambda that cannot be written out")
        expr, method = "_op", False
    else:
        found = callable_expr(op.name)
        if found is None:
            raise ValueError("no public callable")
        expr, method = found
        source = None
    first_reason, usable = None, None
    for k, sample in enumerate(op.sample_inputs("cpu", torch.float32)):
        if k >= MAX_SAMPLES:
            break
        tensors = _tensors([sample.input, list(sample.args), sample.kwargs])
        if any(t.numel() == 0 for t in tensors):
            first_reason = first_reason or "only empty samples"
            continue
        try:
            problem = _problem(expr, method, sample, source)
        except ValueError as e:
            first_reason = first_reason or str(e)
            continue
        if pick == 0:
            return problem
        usable, pick = problem, pick - 1 if pick > 0 else pick
    if usable is not None:
        return usable
    raise ValueError(first_reason or "no sample")


def _problem(expr: str, method: bool, sample, op_source: str | None = None) -> str:
    """The problem file calling `expr` on the sample; `op_source`: the lambda `_op` stands for."""
    w = Writer()
    first = w.value(sample.input)
    args = [w.value(a) for a in sample.args]
    kwargs = [f"{k}={w.value(v)}" for k, v in sample.kwargs.items()]
    if not w.inputs:
        raise ValueError("no tensor input")
    call = (f"{first}.{expr}({', '.join(args + kwargs)})" if method
            else f"{expr}({', '.join([first] + args + kwargs)})")
    params = ", ".join(f"a{i}" for i in range(len(w.inputs)))
    return (
        "import torch\nimport torch.nn as nn\n\n\n"
        + (f"_op = {op_source}  # as OpInfo calls the operator\n\n\n" if op_source else "")
        + f"class Model(nn.Module):\n    def forward(self, {params}):\n        return {call}\n\n\n"
        f"def get_inputs():\n    return [{', '.join(w.inputs)}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def _same(a: torch.Tensor, b: torch.Tensor, exact: bool = True) -> bool:
    """Equal values (NaN where NaN is), exactly or within allclose's tolerance."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    tol = {"rtol": 0.0, "atol": 0.0} if exact else {}
    return torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, equal_nan=True, **tol))


def check_reference(source: str) -> bool:
    """Raises ValueError when the problem is no fair test: not tensors out, random, or changing
    its inputs. True when every output is a view of an input (shares its storage): the operator
    computes nothing."""
    from torch.utils._pytree import tree_leaves

    scope: dict = {}
    exec(compile(source, "<opinfo>", "exec"), scope)
    torch.manual_seed(0)
    inputs = scope["get_inputs"]()
    model = scope["Model"]()
    before = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    outs = [model(*inputs) for _ in range(2)]
    if any(isinstance(t, torch.Tensor) and not _same(t, b) for t, b in zip(inputs, before)):
        raise ValueError("changes its input in place")  # (the in-place random fills: cauchy_, uniform_...)
    flat = [tree_leaves(o) for o in outs]  # an LSTM's (output, (h, c)) too
    if not all(isinstance(t, torch.Tensor) for t in flat[0]):
        raise ValueError(f"returns {type(outs[0]).__name__}")
    if any(t.is_complex() for t in flat[0]):
        raise ValueError("complex output")
    if not all(_same(a, b, exact=False) for a, b in zip(flat[0], flat[1])):
        raise ValueError("random output")
    storages = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
    return all(t.untyped_storage().data_ptr() in storages for t in flat[0])


def cases(names: set[str] | None, limit: int | None, pick: int = 0) -> list[Case]:
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        name = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        if names and op.name not in names and name not in names:
            continue
        case = Case(name)
        if torch.float32 not in op.supported_dtypes("cpu"):
            case.left_out = "no float32 on the CPU"
        elif "empty" in op.name:
            case.left_out = "uninitialised output (an empty tensor's values are whatever memory held)"
        else:
            try:
                case.source = make_problem(op, pick)
                case.view = check_reference(case.source)
            except Exception as e:  # any sample that cannot be a problem is reported, not fatal
                case.source, case.left_out = "", f"{type(e).__name__}: {e}"[:120] if not isinstance(e, ValueError) else str(e)
        out.append(case)
        if limit and sum(1 for c in out if c.source) >= limit:
            break
    return out


def _compile_worker() -> int:
    """The child process of `CompileChecker`: one JSON request (a problem's source) per line in,
    one JSON answer per line out."""
    import torch._dynamo

    for line in sys.stdin:
        source = json.loads(line)["source"]
        try:
            scope: dict = {}
            exec(compile(source, "<opinfo>", "exec"), scope)
            torch.manual_seed(0)
            inputs = scope["get_inputs"]()
            torch._dynamo.reset()
            compiled = torch.compile(scope["Model"](), backend="inductor", fullgraph=True)
            compiled(*inputs)
            answer = "yes"
        except BaseException as e:  # any failure of the compiler is the answer for this problem
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            answer = f"{type(e).__name__}: {first}"[:160]
        print(json.dumps({"compiles": answer}), flush=True)
    return 0


class CompileChecker:
    """Whether torch.compile (Inductor on the CPU, one graph) compiles and runs a problem's
    sample: a long-lived child process (imports once), restarted after a problem that outlives
    `timeout` seconds or kills it. Answers are kept in `cache` (a JSON file) by torch version
    and source."""

    def __init__(self, timeout: float, cache: str | None = None):
        self.timeout, self.proc = timeout, None
        self.cache_path = Path(cache) if cache else None
        self.cache = json.loads(self.cache_path.read_text()) if self.cache_path and self.cache_path.exists() else {}

    def _start(self):
        self.proc = subprocess.Popen([sys.executable, __file__, "--compile-worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)

    def _stop(self):
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def check(self, source: str) -> str:
        key = hashlib.sha256(f"{torch.__version__}\n{source}".encode()).hexdigest()
        if key in self.cache:
            return self.cache[key]
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"source": source}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self._stop()
            answer = f"torch.compile did not finish in {self.timeout:.0f} s" if not ready else "torch.compile crashed"
        else:
            answer = json.loads(line)["compiles"]
        self.cache[key] = answer
        if self.cache_path:
            self.cache_path.write_text(json.dumps(self.cache, indent=0, sort_keys=True))
        return answer

    def close(self):
        self._stop()


def convert(case: Case, verifier, mode: str, budget: float) -> str:
    from drtriton.search import Search, SearchConfig

    search = Search(from_source(case.source, name=case.name), verifier, SearchConfig(mode=mode, budget_s=budget))
    for _ in search.run():
        pass
    r = search.result
    return "correct" if r.correct else (r.reason or "not correct")[:160]


def convert_all(todo: list[Case], modes: list[str], budget: float, line) -> None:
    """Each case converted in each mode with one CPU verifier, a progress line (`line(case)`)
    each; a case whose conversion raises gets the error as its row and the run goes on."""
    from drtriton.verify import Verifier, VerifyConfig

    with Verifier(VerifyConfig(device="cpu", workers=2)) as verifier:
        for i, case in enumerate(todo, 1):
            t0 = time.monotonic()
            for mode in modes:
                try:
                    setattr(case, mode, convert(case, verifier, mode, budget))
                except Exception as e:  # noqa: BLE001 - one case's failure is its row
                    setattr(case, mode, f"internal error: {type(e).__name__}: {e}"[:160])
            case.seconds = time.monotonic() - t0
            print(f"[{i}/{len(todo)}] {line(case)}", file=sys.stderr, flush=True)


def write_results(text: str, results: list[Case], out: str, json_path: str | None) -> None:
    """The Markdown report to `out` (- for stdout), every case as JSON lines to `json_path`."""
    if out == "-":
        print(text)
    else:
        Path(out).write_text(text)
    if json_path:
        with open(json_path, "w") as f:
            for c in results:
                f.write(json.dumps(asdict(c)) + "\n")


def report(results: list[Case], compile_timeout: float = COMPILE_TIMEOUT) -> str:
    problems = [c for c in results if c.source]
    views = [c for c in problems if c.view]
    counted = [c for c in problems if not c.view and c.compiles == "yes"]
    uncompiled = [c for c in problems if not c.view and c.compiles != "yes"]
    strict = sum(c.strict == "correct" for c in counted)
    mixed = sum(c.mixed == "correct" for c in counted)
    n = max(len(counted), 1)

    def row(c: Case) -> str:
        return f"| `{c.name}` | {c.strict.replace('|', '/')} | {c.mixed.replace('|', '/')} | {c.seconds:.1f} |"

    lines = [
        "# PyTorch's OpInfo operators through the converter",
        "",
        "<!-- Generated by `python benchmarks/opinfo.py`; do not edit by hand. -->",
        "",
        f"{len(results)} OpInfo operators (with their variants) read, {len(problems)} made into one-operator "
        "problems (float32, the first CPU sample whose tensors have elements and at most "
        f"{MAX_LITERAL} of them, a literal of its values moved a little every trial; "
        f"torch {torch.__version__}). Each is converted by the built-in policy through the search and "
        "verified on the CPU (Triton interpreter, the sample's small shapes, also at another batch size "
        "where the operator takes one), in strict mode (every operator in Triton) and in mixed mode "
        "(PyTorch may keep what Triton lacks; \"no plan\": the operator alone would run in PyTorch, "
        "which is no conversion).",
        "",
        f"**The denominator**: the {len(counted)} problems that `torch.compile(model, backend=\"inductor\", "
        "fullgraph=True)` compiles and runs on the CPU (checked on each problem's sample, in a child "
        f"process, {compile_timeout:.0f} s at most each), less the view-only ones. "
        f"{len(views)} problems are view-only (every output shares an input's storage: no compute, "
        f"nothing to convert) and {len(uncompiled)} are not compiled by torch.compile; both are "
        "listed below, outside the percentages. Inductor compiles an operator it has no lowering for "
        "by calling ATen's own kernel from the compiled graph (linear algebra, sort, unique): those count.",
        "",
        "| | converted and verified | of the problems torch.compile compiles |",
        "|---|---|---|",
        f"| strict (every operator in Triton) | {strict} | {strict / n:.0%} |",
        f"| mixed (PyTorch may keep what Triton lacks) | {mixed} | {mixed / n:.0%} |",
        "",
        "| operator | strict | mixed | s |",
        "|---|---|---|---|",
    ]
    lines += [row(c) for c in counted]
    if views:
        lines += ["", f"View-only ({len(views)}; outside the percentages): "
                  + ", ".join(f"`{c.name}`" for c in views) + "."]
    if uncompiled:
        lines += ["", f"Not compiled by torch.compile ({len(uncompiled)}; outside the percentages, the "
                  "converter's results for the record):", "",
                  "| operator | torch.compile | strict | mixed |", "|---|---|---|---|"]
        lines += [f"| `{c.name}` | {c.compiles.replace('|', '/')} | {c.strict.replace('|', '/')} | "
                  f"{c.mixed.replace('|', '/')} |" for c in uncompiled]
    left = [c for c in results if not c.source]
    if left:
        lines += ["", f"Left out ({len(left)}):", "", "| operator | why |", "|---|---|"]
        lines += [f"| `{c.name}` | {c.left_out.replace('|', '/')} |" for c in left]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="-", help="the Markdown report (- for stdout)")
    ap.add_argument("--json", help="also every case as JSON lines here")
    ap.add_argument("--only", help="comma-separated OpInfo names")
    ap.add_argument("--limit", type=int, help="stop after this many problems")
    ap.add_argument("--budget", type=float, default=60.0, help="search seconds per operator and mode")
    ap.add_argument("--modes", default="strict,mixed")
    ap.add_argument("--sample", type=int, default=0,
                    help="which usable sample of each operator: 0 the first (the report's), N the N-th after it, -1 the last")
    ap.add_argument("--compile-cache", help="a JSON file keeping torch.compile's answers between runs")
    ap.add_argument("--compile-timeout", type=float, default=COMPILE_TIMEOUT,
                    help="seconds torch.compile may take on one problem")
    ap.add_argument("--compile-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.compile_worker:
        return _compile_worker()
    results = cases(set(args.only.split(",")) if args.only else None, args.limit, args.sample)
    todo = [c for c in results if c.source and not c.view]
    print(f"{len(todo)} problems of {len(results)} operators", file=sys.stderr, flush=True)
    checker = CompileChecker(args.compile_timeout, args.compile_cache)
    try:
        for case in todo:
            case.compiles = checker.check(case.source)
    finally:
        checker.close()
    convert_all(todo, [m for m in args.modes.split(",") if m], args.budget,
                lambda c: f"{c.name} (compiles: {c.compiles[:40]}): strict {c.strict[:60]}; mixed {c.mixed[:60]}")
    write_results(report(results, args.compile_timeout), results, args.out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
