"""Where a generated module's call time goes, statement by statement (issue 17's host overhead).

For each problem file: the built-in policy's first plan, and forwards made of the first k
statements of its `forward` (k = 1..n); a statement's cost is the step between consecutive
prefixes. On a GPU each prefix is timed with the verifier's own timer (sync, L2 flush, event,
call, event) beside eager and torch.compile, on the same inputs (medians, so steps are noisy to
about a microsecond); the kernels' GPU time comes from the profiler (`kernel_profile.py`). With
`--device cpu` the forward's own Python runs on CPU tensors with every kernel launch a no-op:
the host work around the launches, without the launches.

    PYTHONPATH=. python3 benchmarks/forward_cost.py benchmarks/pointwise/add_small.py --trials 300
    PYTHONPATH=. python3 benchmarks/forward_cost.py benchmarks/pointwise/*.py --device cpu
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.kernel_profile import first_plan  # noqa: E402
from drtriton.problem import load_file  # noqa: E402
from drtriton.verify.worker.timing import time_interleaved  # noqa: E402


def prefixes(module, cls: str = "ModelNew") -> list[tuple[str, object]]:
    """(statement source, a forward running the statements up to and including it), in order."""
    tree = ast.parse(textwrap.dedent(Path(module.__file__).read_text()))
    forward = next(f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == cls
                   for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    out = []
    for k, stmt in enumerate(forward.body, 1):
        fn = ast.FunctionDef(name="forward", args=forward.args, body=forward.body[:k], decorator_list=[],
                             returns=None, type_params=[])
        code = compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), module.__file__, "exec")
        ns: dict = {}
        exec(code, vars(module), ns)
        out.append((ast.unparse(stmt).split("\n")[0][:100], ns["forward"]))
    return out


class _NoLaunch:
    """A kernel whose launches do nothing (`--device cpu`)."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def cpu_costs(fns: dict, inputs: list, trials: int) -> dict[str, float]:
    """Median us per call of each function, from `trials` rounds of 200 calls, in rotating order."""
    import time

    calls, samples = 200, {name: [] for name in fns}
    for i in range(trials):
        names = list(fns)
        for name in names[i % len(names):] + names[:i % len(names)]:
            fn = fns[name]
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(inputs)
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--mode", default="strict")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = ap.parse_args()
    cpu = args.device == "cpu"
    print(f"torch {torch.__version__}, " + ("CPU, kernel launches as no-ops" if cpu else torch.cuda.get_device_name()))
    for path in args.files:
        ns, cand = first_plan(load_file(path), args.mode)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(cand.source)
        spec = importlib.util.spec_from_file_location(f"cand_{path.stem}", f.name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        if cpu:  # every launched kernel (each wrapped in the module's _DirectLaunch) does nothing
            for name, value in list(vars(mod).items()):
                if type(value).__name__ == "_DirectLaunch":
                    setattr(mod, name, _NoLaunch())
        ref = ns["Model"](*ns["get_init_inputs"]()).to(args.device)
        new = mod.ModelNew(*ns["get_init_inputs"]()).to(args.device)
        new.load_state_dict(ref.state_dict())
        inputs = [x.to(args.device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
        steps = prefixes(mod)
        fns = {"nothing": lambda xs: None}
        if not cpu:  # (on CPU they would compute: no comparison with launches that do nothing)
            fns.update({"eager": lambda xs: ref(*xs), "torch.compile": (lambda c: lambda xs: c(*xs))(torch.compile(ref))})
        fns.update({f"{k}": (lambda fw: lambda xs: fw(new, *xs))(fw) for k, (_, fw) in enumerate(steps, 1)})
        with torch.no_grad():
            if cpu:
                med = {name: (t, t) for name, t in cpu_costs(fns, inputs, args.trials).items()}
            else:
                raw = time_interleaved(fns, lambda name, i: inputs, args.trials, 10)
                med = {name: (statistics.median(t) * 1e3, statistics.median(w) * 1e3) for name, (t, w) in raw.items()}
        base = med["nothing"][0]
        what = "host us (launches excluded)" if cpu else "event us (host wall us in brackets)"
        print(f"\n## {path.stem}: {what} over an empty call's {base:.1f}")
        for name in ("eager", "torch.compile"):
            if name in med:
                print(f"  {name:14s} {med[name][0] - base:7.1f} ({med[name][1]:.1f})")
        prev = base
        for k, (src, _) in enumerate(steps, 1):
            t, w = med[str(k)]
            print(f"  +{t - prev:6.1f} = {t - base:7.1f} ({w:.1f})  {src}")
            prev = t


if __name__ == "__main__":
    main()
