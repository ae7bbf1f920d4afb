"""PyTorch's own layers against the converter: the ModuleInfo database
(`torch.testing._internal.common_modules.module_db`, every `nn` module PyTorch tests, with its
constructor arguments and forward inputs). Each module's first CPU float32 input (another with
`--sample`) becomes a problem file, a `Model` holding the layer as PyTorch's tests build it, converted
by the built-in policy through the search on the CPU (Triton interpreter), in strict and in mixed
mode, as `opinfo.py` does for operators.

    python benchmarks/moduleinfo.py --out docs/moduleinfo.md              # every module
    python benchmarks/moduleinfo.py --only Conv2d,LSTM --modes strict --out -
    python benchmarks/moduleinfo.py --write probs --modes ""        # the problem files only, then
    drtriton bench probs --device cuda --mode strict                  # the same layers on a GPU

A module input is left out, with the reason, when its constructor takes a tensor or a callable
(written as a literal it would not be the layer PyTorch tests), its forward's arguments cannot be
written out, its output is not tensors, random, or changes its inputs (`opinfo.check_reference`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.opinfo import (MAX_SAMPLES, Case, Writer, _tensors, check_reference, convert_all,  # noqa: E402
                               write_results)


def _literal(v) -> str:
    """A constructor argument as Python source: numbers, strings, dtypes and their tuples."""
    if isinstance(v, torch.Tensor) or callable(v) and not isinstance(v, torch.dtype):
        raise ValueError(f"a {type(v).__name__} constructor argument")
    return Writer().value(v)


def module_problem(info, pick: int = 0) -> str:
    """The problem file of the module's first CPU float32 input whose tensors have elements and
    can be written out (`pick` > 0: the pick-th usable one after it, -1: the last of the first
    MAX_SAMPLES), constructed as PyTorch's test constructs it."""
    cls = info.module_cls
    name = cls.__name__
    if not hasattr(torch.nn, name):
        raise ValueError("not a public torch.nn class")
    first_reason, usable = None, None
    samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=False, training=False)
    for k, sample in enumerate(samples):
        if k >= MAX_SAMPLES:
            break
        fwd = sample.forward_input
        if fwd is None:
            continue
        if any(t.numel() == 0 for t in _tensors([list(fwd.args), fwd.kwargs])):
            first_reason = first_reason or "only empty inputs"
            continue
        try:
            ctor = sample.constructor_input
            ctor_args = [_literal(a) for a in ctor.args] + [f"{k}={_literal(v)}" for k, v in ctor.kwargs.items()]
            w = Writer()
            args = [w.value(a) for a in fwd.args] + [f"{k}={w.value(v)}" for k, v in fwd.kwargs.items()]
            if not w.inputs:
                raise ValueError("no tensor input")
        except ValueError as e:
            first_reason = first_reason or str(e)
            continue
        params = ", ".join(f"a{i}" for i in range(len(w.inputs)))
        problem = (
            "import torch\nimport torch.nn as nn\n\n\n"
            f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.layer = nn.{name}({', '.join(ctor_args)})\n\n"
            f"    def forward(self, {params}):\n        return self.layer({', '.join(args)})\n\n\n"
            f"def get_inputs():\n    return [{', '.join(w.inputs)}]\n\n\n"
            "def get_init_inputs():\n    return []\n"
        )
        if pick == 0:
            return problem
        usable, pick = problem, pick - 1 if pick > 0 else pick
    if usable is not None:
        return usable
    raise ValueError(first_reason or "no input")


def cases(names: set[str] | None, pick: int = 0) -> list[Case]:
    from torch.testing._internal.common_modules import module_db

    out = []
    for info in module_db:
        name = info.module_cls.__name__ + (f".{info.variant_name}" if getattr(info, "variant_name", "") else "")
        if names and info.module_cls.__name__ not in names and name not in names:
            continue
        case = Case(name)
        try:
            case.source = module_problem(info, pick)
            case.view = check_reference(case.source)
        except Exception as e:  # a module that cannot be a problem is reported, not fatal
            case.source = ""
            case.left_out = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"[:120]
        out.append(case)
    return out


def report(results: list[Case], modes: list[str], pick: int) -> str:
    problems = [c for c in results if c.source and not c.view]
    lines = ["# PyTorch's own layers (ModuleInfo) through the converter", "",
             "<!-- Generated by `python benchmarks/moduleinfo.py`; do not edit by hand. -->", "",
             f"{len(results)} ModuleInfo entries read (torch {torch.__version__}), {len(problems)} made into problems "
             f"(float32, {'the first' if pick == 0 else 'the last' if pick < 0 else f'the {pick + 1}-th'} CPU input "
             "with elements, tensors of at most 4096 elements written out, moved a little every trial). Each is "
             "converted by the built-in policy through the search and verified on the CPU (Triton interpreter, "
             "also at another batch size where the module takes one).", "",
             "| mode | converted and verified | of the problems |", "|---|---|---|"]
    for mode in modes:
        ok = sum(getattr(c, mode) == "correct" for c in problems)
        lines.append(f"| {mode} | {ok} | {100 * ok / max(len(problems), 1):.0f}% |")
    lines += ["", "| " + " | ".join(["module", *modes, "s"]) + " |", "|" + "---|" * (len(modes) + 2)]
    lines += ["| " + " | ".join([f"`{c.name}`", *(getattr(c, m).replace("|", "/") for m in modes), f"{c.seconds:.1f}"]) + " |"
              for c in problems]
    left = [c for c in results if not c.source or c.view]
    if left:
        lines += ["", f"Left out ({len(left)}):", "", "| module | why |", "|---|---|"]
        lines += [f"| `{c.name}` | {'every output is a view of an input' if c.view else c.left_out} |" for c in left]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="-", help="the Markdown report (- for stdout)")
    ap.add_argument("--json", help="also every case as JSON lines here")
    ap.add_argument("--only", help="comma-separated module class names")
    ap.add_argument("--budget", type=float, default=60.0, help="search seconds per module and mode")
    ap.add_argument("--modes", default="strict,mixed")
    ap.add_argument("--write", help="also write each problem file here (mi_<module>.py), for `drtriton bench`")
    ap.add_argument("--sample", type=int, default=0,
                    help="which usable input of each module: 0 the first, N the N-th after it, -1 the last")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    results = cases(set(args.only.split(",")) if args.only else None, args.sample)
    todo = [c for c in results if c.source and not c.view]
    print(f"{len(todo)} problems of {len(results)} modules", file=sys.stderr, flush=True)
    if args.write:
        Path(args.write).mkdir(parents=True, exist_ok=True)
        for case in todo:
            (Path(args.write) / f"mi_{re.sub(r'[^A-Za-z0-9_]', '_', case.name)}.py").write_text(case.source)
    convert_all(todo, modes, args.budget, lambda c: f"{c.name}: " + "; ".join(f"{m} {getattr(c, m)[:70]}" for m in modes))
    write_results(report(results, modes, args.sample), results, args.out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
