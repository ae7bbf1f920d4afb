"""A converted module's first call (Triton compiles and tunes every kernel configuration) three
ways, each in a fresh process with an empty Triton cache: serial (Triton's way: each kernel at
its first launch, each configuration as the autotuner benchmarks it), tuner (an autotuned
kernel's configurations compiled at once on a thread pool) and ahead (also every kernel of the
module compiled at once by a forward on the meta device before the first call: what the
verifier's GPU workers do, drtriton/verify/worker/parallel_compile.py). GPU; full sizes.

    PYTHONPATH=. python3 benchmarks/first_call.py corpus/torchvision/resnet18.py [...] --mode mixed
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from drtriton.capture import capture_module
from drtriton.policy.builtin import BuiltinPolicy, first_choices
from drtriton.policy.program import Program
from drtriton.problem import load_file

CALL = r'''
import importlib.util, json, sys, time, torch
from drtriton.verify.worker import parallel_compile
if sys.argv[3] != "serial":
    parallel_compile.install()
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); sys.modules[name] = m; spec.loader.exec_module(m); return m
prob, cand = load(sys.argv[1], "problem"), load(sys.argv[2], "candidate")
init = prob.get_init_inputs() if hasattr(prob, "get_init_inputs") else []
torch.manual_seed(0)
new = getattr(cand, sys.argv[4])(*init).cuda()
x = [t.cuda() if isinstance(t, torch.Tensor) else t for t in prob.get_inputs()]
stopped = None
with torch.no_grad():
    t = time.perf_counter()
    if sys.argv[3] == "ahead":
        def build():
            with torch.device("meta"):
                return getattr(load(sys.argv[2], "candidate_ahead"), sys.argv[4])(*init)
        stopped = parallel_compile.compile_ahead(build, x)
    ahead = time.perf_counter() - t
    new(*x); torch.cuda.synchronize(); first = time.perf_counter() - t
    t = time.perf_counter(); new(*x); torch.cuda.synchronize(); second = time.perf_counter() - t
print(json.dumps({"first_s": round(first, 2), "ahead_s": round(ahead, 2), "stopped": stopped,
                  "second_ms": round(second * 1e3, 2)}))
'''


def first_plan(path: Path, mode: str):
    problem = load_file(str(path), None)
    ns: dict = {}
    exec(compile(problem.source, str(path), "exec"), ns)
    init = ns[problem.init_inputs_fn]() if problem.init_inputs_fn else []
    with torch.device("meta"):
        graph = capture_module(ns[problem.class_name](*init), list(ns[problem.inputs_fn]()))
    policy, program = BuiltinPolicy("cuda"), Program(graph)
    frags = policy.cuts(program)[0]
    first = first_choices(frags, {i: policy.choices(program, f, mode) for i, f in enumerate(frags)})
    return problem, policy.assemble(problem, program, frags, lambda i, f: first.get(i, 0), mode, "fused")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    p.add_argument("--mode", default="mixed", choices=["strict", "mixed"])
    args = p.parse_args()
    work = Path(tempfile.mkdtemp())
    for path in map(Path, args.files):
        copy = work / path.name
        copy.write_text(path.read_text().replace('SIZE = "small"', 'SIZE = "full"'))
        try:
            problem, cand = first_plan(copy, args.mode)
        except Exception as e:  # one network that cannot be planned does not stop the others
            print(f"{path.stem}: no plan ({type(e).__name__}: {str(e)[:200]})", flush=True)
            continue
        cand_file = work / f"{path.stem}_candidate.py"
        cand_file.write_text(cand.source)
        row = {"problem": path.stem, "mode": args.mode, "kernels": cand.source.count("@triton.jit"),
               "configs": cand.source.count("triton.Config(")}
        for way in ("serial", "tuner", "ahead"):
            env = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix=f"triton-{way}-")}
            t = time.monotonic()
            out = subprocess.run([sys.executable, "-c", CALL, str(copy), str(cand_file), way, problem.candidate_class],
                                 capture_output=True, text=True, env=env, timeout=900)
            if out.returncode != 0:
                row[way] = f"error: {out.stderr.strip().splitlines()[-1][:200] if out.stderr.strip() else out.returncode}"
            else:
                row[way] = json.loads(out.stdout.strip().splitlines()[-1])
            row[f"{way}_process_s"] = round(time.monotonic() - t, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
