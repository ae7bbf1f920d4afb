"""Two trees' plans for the same problems, timed in one process: what a change to capture or the
policy moved. `make` writes the built-in policy's first plan (the fused cut, each fragment's first
choice, as `kernel_profile.first_plan`; no GPU needed) for each problem with this tree; `time`
(on the GPU) loads two such folders, checks each plan against the module, and times both beside
eager and torch.compile with the verifier's interleaved timer (L2 flushed, CUDA events, medians),
and each plan's kernels' GPU time under the profiler.

    python benchmarks/plan_ab.py make --out plans-new benchmarks/attention/*.py
    python benchmarks/plan_ab.py time --a plans-old --b plans-new --json ab.json benchmarks/attention/*.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.kernel_profile import first_plan, kernel_times  # noqa: E402
from drtriton.problem import load_file  # noqa: E402


def make(files: list[Path], out: Path, mode: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for path in files:
        try:
            _, cand = first_plan(load_file(path), mode)
            (out / f"{path.stem}.py").write_text(cand.source)
            launches = len(re.findall(r"\n\s+\w+_kernel\w*\[", cand.source.split("def forward")[1]))
            print(f"{path.stem}: {launches} launches; {'; '.join(cand.plan)[:300]}", flush=True)
        except Exception:  # noqa: BLE001 - one problem's failure is reported, the rest go on
            print(f"{path.stem}: no plan: {traceback.format_exc(limit=2)}", flush=True)


def _module(source: str, name: str, workdir: Path):
    path = workdir / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def time_plans(files: list[Path], a: Path, b: Path, trials: int) -> dict:
    import torch

    from drtriton.verify.worker.timing import time_interleaved

    # fp32 as the verifier runs every reference: no TF32 in eager (cuDNN's default allows it)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results, workdir = {}, Path(tempfile.mkdtemp(prefix="plan_ab_"))
    for path in files:
        start = time.time()
        try:
            ns: dict = {}
            exec(load_file(path).source, ns)
            init = ns["get_init_inputs"]()
            torch.manual_seed(0)
            ref = ns["Model"](*init).cuda().eval()
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
            plans = {}
            for tag, folder in (("A", a), ("B", b)):
                if (folder / f"{path.stem}.py").exists():
                    m = _module((folder / f"{path.stem}.py").read_text(), f"{tag}_{path.stem}", workdir)
                    plans[tag] = m.ModelNew(*init).cuda().eval()
                    plans[tag].load_state_dict(ref.state_dict(), strict=False)
            with torch.no_grad():
                # each plan checked on inputs of its own, one after the other: output a plan never
                # writes then holds the previous plan's result for other inputs, not the right one
                # (torch.empty would otherwise hand B the block A just filled correctly)
                # (twice: a plan computes what depends on shapes alone on its first call only)
                err = {}
                for i, (tag, m) in enumerate(plans.items()):
                    for seed in (1 + i, 101 + i):
                        torch.manual_seed(seed)
                        xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
                        want = _first(ref(*xs)).float()
                        err[tag] = max(err.get(tag, 0.0), float((_first(m(*xs)).float() - want).abs().max()))
                compiled = torch.compile(ref)
                try:
                    compiled(*inputs)
                except Exception as e:  # noqa: BLE001 - Inductor's failure: the plans are still timed
                    print(f"{path.stem}: torch.compile failed ({type(e).__name__}); timed without it", flush=True)
                    compiled = None
            fns = {"eager": ref, **({"compile": compiled} if compiled is not None else {}), **plans}
            with torch.no_grad():
                raw = time_interleaved({k: (lambda f: lambda xs: f(*xs))(f) for k, f in fns.items()},
                                       lambda name, i: inputs, trials=trials, warmup=5)
                kernels = {tag: kernel_times(m, inputs, 10)[1] for tag, m in plans.items()}
            ms = {k: statistics.median(t) for k, (t, _) in raw.items()}
            results[path.stem] = {"max_abs_err": err, "ms": ms, "kernel_ms": {t: sum(k.values()) for t, k in kernels.items()},
                                  "top_kernels": {t: list(k.items())[:5] for t, k in kernels.items()},
                                  "seconds": time.time() - start}
            line = "  ".join(f"{k} {v:.3f}" for k, v in ms.items())
            print(f"{path.stem}: {line} ms; err {err}; kernels {results[path.stem]['kernel_ms']}", flush=True)
        except Exception:  # noqa: BLE001
            results[path.stem] = {"error": traceback.format_exc(limit=3)}
            print(f"{path.stem}: {results[path.stem]['error']}", flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make", help="write this tree's first plans")
    mk.add_argument("files", nargs="+", type=Path)
    mk.add_argument("--out", type=Path, required=True)
    mk.add_argument("--mode", default="strict", choices=("strict", "mixed"))
    tm = sub.add_parser("time", help="time two folders of plans (GPU)")
    tm.add_argument("files", nargs="+", type=Path)
    tm.add_argument("--a", type=Path, required=True)
    tm.add_argument("--b", type=Path, required=True)
    tm.add_argument("--trials", type=int, default=40)
    tm.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.cmd == "make":
        make(args.files, args.out, args.mode)
        return
    results = time_plans(args.files, args.a, args.b, args.trials)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
