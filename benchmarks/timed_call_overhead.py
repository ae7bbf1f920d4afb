"""Where a timed candidate call's time goes beyond its kernels (issue 17). GPU.

The verifier times a converted one-kernel module at 70-130 us more than eager on the host
(session 18: `benchmarks/pointwise`, e.g. 4,096 floats added: 0.17-0.21 ms against eager's
0.06-0.08 ms, the kernel itself 0.001 ms), where a plain autotuned Triton launch costs about
18 us (session 11). This times the built-in policy's first candidate against eager with the
verifier's timer (`time_interleaved`), adding the timed call's ingredients one at a time:

  plain        the same inputs every call, nothing installed
  fresh        new inputs every call from the problem's own `get_inputs` (as `TimedInputs`)
  recorder     + the launch recorder, recording every call
  compile      + the parallel-compile wrapper around the autotuner
  audit        + the sandbox's audit hook, armed around the call

    PYTHONPATH=. python3 benchmarks/timed_call_overhead.py benchmarks/pointwise/add_small.py benchmarks/pointwise/relu_large.py
    ... --stages plain,audit     # some stages only
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
from pathlib import Path

import torch

from drtriton.capture import capture_module
from drtriton.policy.builtin import BuiltinPolicy
from drtriton.problem import load_file
from drtriton.verify.worker.timing import time_interleaved

TRIALS, WARMUP = 60, 5


def load(source: str, name: str, folder: str):
    path = Path(folder) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STAGES = ("plain", "fresh", "recorder", "compile", "audit")


def main(paths: list[str], only: tuple[str, ...] = STAGES) -> None:
    from drtriton.verify.worker import parallel_compile
    from drtriton.verify.worker.guard import LaunchRecorder
    from drtriton.verify.worker.sandbox import AuditGuard

    folder = tempfile.mkdtemp()
    recorder = LaunchRecorder()
    audit = None
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for path in paths:
        problem = load_file(path)
        ref = load(problem.source, "ref_" + Path(path).stem, folder)
        with torch.device("meta"):
            graph = capture_module(getattr(ref, problem.class_name)(), list(getattr(ref, problem.inputs_fn)()))
        cand = next(iter(BuiltinPolicy("cuda").candidates(problem, graph, "strict")))
        new = load(cand.source, "new_" + Path(path).stem, folder)
        eager = getattr(ref, problem.class_name)().cuda()
        model = getattr(new, problem.candidate_class)().cuda()
        with torch.device("cuda"):
            same = list(getattr(ref, problem.inputs_fn)())

        def fresh(name, i):
            with torch.device("cuda"):
                return list(getattr(ref, problem.inputs_fn)())

        stages = []
        for stage in STAGES:
            if stage == "recorder":
                recorder.install()
            if stage == "compile":
                parallel_compile.install()
            if stage == "audit" and audit is None:
                audit = AuditGuard([folder])

            recording = STAGES.index(stage) >= STAGES.index("recorder")

            def candidate(inputs, recording=recording, armed=stage == "audit"):
                if recording:
                    recorder.begin_call()
                if armed:
                    audit.armed = True
                try:
                    with torch.no_grad():
                        return model(*inputs)
                finally:
                    if armed:
                        audit.armed = False
                    if recording:
                        recorder.end_call()

            def reference(inputs):
                with torch.no_grad():
                    return eager(*inputs)

            if stage not in only:
                continue
            inputs_for = (lambda name, i: same) if stage == "plain" else fresh
            raw = time_interleaved({"candidate": candidate, "eager": reference}, inputs_for, TRIALS, WARMUP)
            med = {n: (statistics.median(t), statistics.median(w)) for n, (t, w) in raw.items()}
            stages.append((stage, med))
        print(f"\n{Path(path).stem}: median ms (event / host wall)")
        for stage, med in stages:
            c, e = med["candidate"], med["eager"]
            print(f"  {stage:9s} candidate {c[0]:.4f} / {c[1]:.4f}   eager {e[0]:.4f} / {e[1]:.4f}   "
                  f"ratio {e[0] / c[0]:.2f}x")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problems", nargs="+", help="problem files")
    ap.add_argument("--stages", default=",".join(STAGES), help="comma-separated, from " + ", ".join(STAGES))
    args = ap.parse_args()
    main(args.problems, tuple(args.stages.split(",")))
