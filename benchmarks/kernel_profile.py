"""Where a plan's time goes: the built-in policy's first plan for some KernelBench problems, run
beside PyTorch eager under the CUDA profiler, GPU time per kernel (mean over the timed calls).
A diagnosis tool (no verification; the bench does that): which kernel of a plan is slow, and
against which eager (and, with --compile, torch.compile) kernels. Problems are KernelBench ids or
problem files.

    python3 benchmarks/kernel_profile.py --kernelbench .device/kernelbench --ids 2:1,2:91 --out $OUT
    python3 benchmarks/kernel_profile.py benchmarks/pointwise/*.py --compile
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drtriton.capture import capture_module  # noqa: E402
from drtriton.policy.builtin import BuiltinPolicy, first_choices  # noqa: E402
from drtriton.policy.program import Program  # noqa: E402
from drtriton.problem import load_file, load_kernelbench  # noqa: E402


def first_plan(problem, mode: str):
    """The plan the search verifies first: the fused cut, each fragment's first choice."""
    import torch

    ns: dict = {}
    exec(problem.source, ns)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        graph = capture_module(ns["Model"](*ns["get_init_inputs"]()), list(ns["get_inputs"]()))
    policy = BuiltinPolicy("cuda")
    program = Program(graph)
    frags = policy.cuts(program)[0]
    choice = first_choices(frags, {i: policy.choices(program, f, mode) for i, f in enumerate(frags)})
    return ns, policy.assemble(problem, program, frags, lambda i, f: choice[i], mode, "fused")


def kernel_times(fn, inputs, calls: int) -> tuple[float, dict[str, float]]:
    """(wall ms per call by CUDA events, {kernel name: GPU ms per call})."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        wall = start.elapsed_time(end) / calls
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn(*inputs)
            torch.cuda.synchronize()
    per = defaultdict(float)
    for e in prof.events():
        if e.device_type.name == "CUDA":
            per[e.name[:80]] += e.device_time_total / 1000 / calls
    return wall, dict(sorted(per.items(), key=lambda kv: -kv[1]))


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path, help="problem files (a Model, get_inputs, get_init_inputs)")
    ap.add_argument("--kernelbench", type=Path)
    ap.add_argument("--ids", default="", help="LEVEL:ID,... e.g. 2:1,2:91 (with --kernelbench)")
    ap.add_argument("--compile", action="store_true", help="also profile torch.compile of the reference")
    ap.add_argument("--mode", default="mixed")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    # as the verifier's workers run: fp32 without tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    problems = [(path.stem, load_file(path)) for path in args.files]
    for part in filter(None, args.ids.split(",")):
        level, pid = (int(x) for x in part.split(":"))
        problems.append((f"L{level}_{pid}", load_kernelbench(args.kernelbench / f"level{level}.jsonl", ids={pid})[0]))
    rows = []
    for key, problem in problems:
        try:
            rows.append(profile_problem(key, problem, args))
        except Exception as e:  # one problem's failure is reported, the others still run
            print(json.dumps({"problem": key, "error": f"{type(e).__name__}: {e}"[:2000]}), flush=True)
        torch.cuda.empty_cache()
    if args.out:
        (args.out / "kernel_profile.json").write_text(json.dumps(rows, indent=1))


def max_abs_error(got, want) -> float:
    """The largest difference over the outputs (one tensor or a tuple of them)."""
    got, want = (got, want) if isinstance(want, (tuple, list)) else ((got,), (want,))
    return max((g.double() - w.double()).abs().max().item() if w.numel() else 0.0 for g, w in zip(got, want))


def profile_problem(key, problem, args) -> dict:
    import importlib.util

    import torch

    ns, cand = first_plan(problem, args.mode)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(cand.source)
    spec = importlib.util.spec_from_file_location(f"cand_{key}", f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    ref = ns["Model"](*ns["get_init_inputs"]()).cuda()
    new = mod.ModelNew(*ns["get_init_inputs"]()).cuda()
    new.load_state_dict(ref.state_dict())
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
    with torch.no_grad():
        err = max_abs_error(new(*inputs), ref(*inputs))
    row = {"problem": key, "plan": cand.description, "max_abs_err": err}
    refs = [("candidate", new), ("eager", ref)] + ([("compile", torch.compile(ref))] if args.compile else [])
    for label, fn in refs:
        wall, per = kernel_times(fn, inputs, args.calls)
        row[label] = {"ms": round(wall, 3), "kernels": {k: round(v, 3) for k, v in per.items()}}
    print(json.dumps(row, indent=1), flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{key}.py").write_text(cand.source)
    return row


if __name__ == "__main__":
    main()

