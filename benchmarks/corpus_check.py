"""Check that every corpus problem builds, runs and captures at the current size, without
converting anything: the fast first look at a machine (torchvision is only on the GPU one).

    python benchmarks/corpus_check.py [--size full] [--device cuda] [folders...]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from drtriton.capture import CaptureError, capture_module  # noqa: E402
from drtriton.problem import load_file  # noqa: E402


def check(path: Path, device: str, size: str) -> tuple[str, str]:
    problem = load_file(path)
    ns: dict = {}
    source = problem.source.replace('SIZE = "small"', f'SIZE = "{size}"')
    exec(compile(source, str(path), "exec"), ns)
    model = ns[problem.class_name](*ns[problem.init_inputs_fn]()) if problem.init_inputs_fn else ns[problem.class_name]()
    with torch.device(device):
        inputs = ns[problem.inputs_fn]()
    model = model.to(device).eval()
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model(*inputs)
    run_ms = (time.perf_counter() - t0) * 1e3
    shapes = [tuple(o.shape) for o in (out if isinstance(out, (tuple, list)) else [out])]
    meta = model.to("meta")
    try:
        graph = capture_module(meta, [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs])
        covered = sum(n.op is not None for n in graph.nodes)
        captured = f"{len(graph.nodes)} ops, {covered} in the vocabulary"
    except CaptureError as e:
        captured = f"capture on meta failed: {e}"
    return "ok", f"out {shapes}, first forward {run_ms:.0f} ms; {captured}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="small", choices=["small", "full"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("folders", nargs="*", default=["torch", "transformers", "torchvision"])
    args = ap.parse_args()
    for folder in args.folders:
        for path in sorted((ROOT / "corpus" / folder).glob("*.py")):
            try:
                status, what = check(path, args.device, args.size)
            except Exception as e:
                status, what = "FAIL", f"{type(e).__name__}: {str(e)[:200]} @ {traceback.extract_tb(e.__traceback__)[-1].lineno}"
            print(f"{status:4} {folder}/{path.stem}: {what}", flush=True)


if __name__ == "__main__":
    main()
