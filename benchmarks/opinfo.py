"""PyTorch's OpInfo database against the converter: each float32 operator (its first CPU sample)
as a one-operator problem, converted by the built-in policy through the search, on the CPU
(Triton interpreter), in strict and in mixed mode.

    python benchmarks/opinfo.py --out docs/opinfo.md                 # every operator (hours)
    python benchmarks/opinfo.py --limit 40 --out /tmp/opinfo.md      # the first 40
    python benchmarks/opinfo.py --only add,gather,rsqrt --out -      # some, to stdout

Needs `expecttest` (OpInfo's module imports it). An operator is left out, with the reason, when
it has no float32 CPU support, no public callable (`torch.X`, `torch.nn.functional.X`,
`torch.special.X`, `torch.linalg.X`, `torch.fft.X`, or a Tensor method), a sample that cannot be
written as a problem file, an output that is not tensors, or random output.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drtriton.problem import from_source  # noqa: E402

MAX_LITERAL = 4096  # elements of a sample tensor written into the problem file
MODULES = ("torch.nn.functional", "torch.special", "torch.linalg", "torch.fft", "torch")


@dataclass
class Case:
    name: str
    source: str = ""  # the problem file; "" when left out
    left_out: str = ""  # why it is not a problem
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
        values = f"torch.tensor({t.reshape(-1).tolist()!r}, dtype={t.dtype}).reshape({shape!r})"
        if t.is_floating_point():  # the sample's values (its domain), moved a little every trial
            values = f"({values} + 0.01 * torch.randn({shape!r}, dtype={t.dtype}))"
        self.inputs.append(values)
        return f"a{len(self.inputs) - 1}"


def make_problem(op) -> str:
    found = callable_expr(op.name)
    if found is None:
        raise ValueError("no public callable")
    expr, method = found
    sample = next(iter(op.sample_inputs("cpu", torch.float32)), None)
    if sample is None:
        raise ValueError("no sample")
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
        f"class Model(nn.Module):\n    def forward(self, {params}):\n        return {call}\n\n\n"
        f"def get_inputs():\n    return [{', '.join(w.inputs)}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def check_reference(source: str) -> None:
    """Raises ValueError when the problem is no fair test: not tensors out, or random."""
    scope: dict = {}
    exec(compile(source, "<opinfo>", "exec"), scope)
    torch.manual_seed(0)
    inputs = scope["get_inputs"]()
    model = scope["Model"]()
    outs = [model(*inputs) for _ in range(2)]
    flat = [o if isinstance(o, (tuple, list)) else [o] for o in outs]
    if not all(isinstance(t, torch.Tensor) for t in flat[0]):
        raise ValueError(f"returns {type(outs[0]).__name__}")
    if any(t.is_complex() for t in flat[0]):
        raise ValueError("complex output")
    if not all(torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, equal_nan=True))
               for a, b in zip(flat[0], flat[1])):
        raise ValueError("random output")


def cases(names: set[str] | None, limit: int | None) -> list[Case]:
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        name = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
        if names and op.name not in names and name not in names:
            continue
        case = Case(name)
        if torch.float32 not in op.supported_dtypes("cpu"):
            case.left_out = "no float32 on the CPU"
        elif getattr(op.op, "__name__", "") == "<lambda>":
            case.left_out = "OpInfo calls it through a lambda (its arguments in another order)"
        else:
            try:
                case.source = make_problem(op)
                check_reference(case.source)
            except Exception as e:  # any sample that cannot be a problem is reported, not fatal
                case.source, case.left_out = "", f"{type(e).__name__}: {e}"[:120] if not isinstance(e, ValueError) else str(e)
        out.append(case)
        if limit and sum(1 for c in out if c.source) >= limit:
            break
    return out


def convert(case: Case, verifier, mode: str, budget: float) -> str:
    from drtriton.search import Search, SearchConfig

    search = Search(from_source(case.source, name=case.name), verifier, SearchConfig(mode=mode, budget_s=budget))
    for _ in search.run():
        pass
    r = search.result
    return "correct" if r.correct else (r.reason or "not correct")[:160]


def report(results: list[Case]) -> str:
    problems = [c for c in results if c.source]
    strict = sum(c.strict == "correct" for c in problems)
    mixed = sum(c.mixed == "correct" for c in problems)
    lines = [
        "# PyTorch's OpInfo operators through the converter",
        "",
        "<!-- Generated by `python benchmarks/opinfo.py`; do not edit by hand. -->",
        "",
        f"{len(results)} OpInfo operators (with their variants) read, {len(problems)} made into one-operator "
        "problems (float32, the first CPU sample, built-in policy, CPU / Triton interpreter, "
        f"torch {torch.__version__}); not yet narrowed to what torch.compile compiles. \"no plan\" in mixed mode: "
        "the operator alone would run in PyTorch, which is no conversion.",
        "",
        "| | converted and verified | of the problems |",
        "|---|---|---|",
        f"| strict (every operator in Triton) | {strict} | {strict / max(len(problems), 1):.0%} |",
        f"| mixed (PyTorch may keep what Triton lacks) | {mixed} | {mixed / max(len(problems), 1):.0%} |",
        "",
        "| operator | strict | mixed | s |",
        "|---|---|---|---|",
    ]
    for c in problems:
        lines.append(f"| `{c.name}` | {c.strict.replace('|', '/')} | {c.mixed.replace('|', '/')} | {c.seconds:.1f} |")
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
    args = ap.parse_args()
    from drtriton.verify import Verifier, VerifyConfig

    results = cases(set(args.only.split(",")) if args.only else None, args.limit)
    todo = [c for c in results if c.source]
    print(f"{len(todo)} problems of {len(results)} operators", file=sys.stderr, flush=True)
    with Verifier(VerifyConfig(device="cpu", workers=2)) as verifier:
        for i, case in enumerate(todo, 1):
            t0 = time.monotonic()
            for mode in args.modes.split(","):
                try:
                    setattr(case, mode, convert(case, verifier, mode, args.budget))
                except Exception as e:  # one operator's failure is its row; the run goes on
                    setattr(case, mode, f"internal error: {type(e).__name__}: {e}"[:160])
            case.seconds = time.monotonic() - t0
            print(f"[{i}/{len(todo)}] {case.name}: strict {case.strict[:60]}; mixed {case.mixed[:60]}",
                  file=sys.stderr, flush=True)
    text = report(results)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)
    if args.json:
        with open(args.json, "w") as f:
            for c in results:
                f.write(json.dumps(asdict(c)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
