"""How long the built-in policy's modules are: the first candidate (GPU plan order, strict) for
each shipped KernelBench Level 1-2 problem and for synthetic programs, captured on the meta
device (no GPU, nothing runs). `--without-cse` shows the same with repeated subexpressions left
inline (docs/benchmarks.md, "Session 14").

    python benchmarks/module_sizes.py [--synthetic 200] [--without-cse]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from drtriton.capture import capture_module
from drtriton.policy import module
from drtriton.policy.builtin import BuiltinPolicy
from drtriton.problem import KERNELBENCH_DIR, from_source, load_kernelbench


def first_candidate_size(problem) -> int:
    ns: dict = {}
    exec(problem.source, ns)
    init = ns[problem.init_inputs_fn]() if problem.init_inputs_fn else []
    with torch.device("meta"):
        graph = capture_module(ns[problem.class_name](*init), list(ns[problem.inputs_fn]()))
    return len(next(iter(BuiltinPolicy("cuda").candidates(problem, graph, "strict"))).source)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=int, default=200, help="synthetic programs of k = 1-3 (needs ortools)")
    ap.add_argument("--without-cse", action="store_true", help="leave repeated subexpressions inline")
    args = ap.parse_args()
    if args.without_cse:
        module.name_common_subexpressions = lambda kernel: kernel
    sets = {"KernelBench Levels 1-2": [p for level in (1, 2) for p in load_kernelbench(KERNELBENCH_DIR / f"level{level}.jsonl")]}
    if args.synthetic:
        from drtriton.training.data import Programs
        from drtriton.training.recipes import TINY
        from drtriton.training.runs import _bounds

        records = Programs.synthesize(args.synthetic, [1, 2, 3], 1234, _bounds(TINY)).records
        sets["synthetic, k = 1-3"] = [from_source(r["code"], "Model", name=r["id"]) for r in records]
    for name, problems in sets.items():
        sizes = []
        for problem in problems:
            try:
                sizes.append(first_candidate_size(problem))
            except Exception:  # noqa: BLE001 - a problem that does not capture is left out, counted
                pass
        sizes.sort()
        print(f"{name}: {len(sizes)} of {len(problems)} modules; median {statistics.median(sizes):,.0f} chars, "
              f"p90 {sizes[int(0.9 * len(sizes))]:,}, largest {sizes[-1]:,}, all together {sum(sizes):,}")


if __name__ == "__main__":
    main()
