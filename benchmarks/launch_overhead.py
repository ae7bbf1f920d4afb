"""Where the host time of a launch goes (issue 17's host overhead). GPU.

Part 1, one small pointwise op (4,096 floats: the GPU finishes long before the host issues the next
launch, so host time per launch = wall time of N launches / N): eager; a Triton kernel with a fixed
grid, a grid function, autotuned; with the verifier's instrumentation installed (its launch
recorder, Triton's launch hook, the sandbox's audit hook) and recording.

Part 2, whole converted networks (the built-in policy's first plan, full sizes): per call, wall
time with a sync, host time of back-to-back calls, eager's, and the Python functions that take the
host time (cProfile).

    PYTHONPATH=. python3 benchmarks/launch_overhead.py [corpus/torchvision/shufflenet_v2_x1_0.py ...] --mode mixed
"""

import argparse
import cProfile
import importlib.util
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


_relu_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8)],
    key=["n"])(triton.jit(_relu_kernel.fn))


def per_call_us(fn, n=3000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def micro():
    """Host us per launch by launch path; returns them and the installed launch recorder."""
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    n = x.numel()
    rows = {
        "eager torch.relu (allocates)": lambda: torch.relu(x),
        "torch.empty_like": lambda: torch.empty_like(x),
        "triton, fixed grid": lambda: _relu_kernel[(4,)](x, y, n, BLOCK=1024),
        "triton, grid function": lambda: _relu_kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, n, BLOCK=1024),
        "triton, autotuned (2 configs)": lambda: _relu_tuned[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, n),
    }
    out = {k: per_call_us(f) for k, f in rows.items()}
    kernel = _relu_kernel[(4,)](x, y, n, BLOCK=1024)  # the CompiledKernel of that specialisation
    stream = torch.cuda.current_stream().cuda_stream
    out["triton, CompiledKernel.run direct (no binder, no hooks; Triton 3.6 arguments)"] = per_call_us(
        lambda: kernel.run(4, 1, 1, stream, kernel.function, kernel.packed_metadata, None, None, None, x, y, n, 1024))

    from drtriton.verify.worker.guard import LaunchRecorder
    from drtriton.verify.worker.sandbox import AuditGuard

    recorder = LaunchRecorder()
    recorder.install()
    out["autotuned, recorder installed (not recording)"] = per_call_us(rows["triton, autotuned (2 configs)"])
    prof = cProfile.Profile()  # what the wrappers add, function by function
    prof.enable()
    for _ in range(2000):
        rows["triton, autotuned (2 configs)"]()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
    print("autotuned launches with the recorder installed, 2000 calls:")
    print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))
    recorder.begin_call()
    out["autotuned, recorder recording"] = per_call_us(rows["triton, autotuned (2 configs)"])
    out["fixed grid, recorder recording"] = per_call_us(rows["triton, fixed grid"])
    recorder.end_call()
    guard = AuditGuard([tempfile.gettempdir()])
    guard.armed = True
    out["autotuned, recorder installed + audit hook armed"] = per_call_us(rows["triton, autotuned (2 configs)"])
    out["eager torch.relu, audit hook armed"] = per_call_us(rows["eager torch.relu (allocates)"])
    guard.armed = False
    return out, recorder


def network(path: Path, mode: str):
    """Prints the clean measurements; returns a function that times the candidate again (later,
    under the verifier's instrumentation)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from first_call import first_plan

    work = Path(tempfile.mkdtemp())
    copy = work / path.name
    copy.write_text(path.read_text().replace('SIZE = "small"', 'SIZE = "full"'))
    problem, cand = first_plan(copy, mode)
    cand_file = work / f"{path.stem}_candidate.py"
    cand_file.write_text(cand.source)
    spec = importlib.util.spec_from_file_location(f"cand_{path.stem}", cand_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ns: dict = {}
    exec(compile(problem.source, str(copy), "exec"), ns)
    init = ns[problem.init_inputs_fn]() if problem.init_inputs_fn else []
    torch.manual_seed(0)
    ref = ns[problem.class_name](*init).cuda().eval()
    torch.manual_seed(0)
    new = getattr(module, problem.candidate_class)(*init).cuda().eval()
    new.load_state_dict(ref.state_dict())
    x = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ns[problem.inputs_fn]()]

    def synced(model, n=30):
        walls = []
        for _ in range(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            model(*x)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t) * 1e3)
        return statistics.median(walls)

    def host(model, n=30):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            model(*x)
        host_ms = (time.perf_counter() - t) / n * 1e3  # before the GPU catches up
        torch.cuda.synchronize()
        return host_ms

    with torch.no_grad():
        for _ in range(3):
            new(*x)
            ref(*x)
        # launches counted where they reach the device (the policy's modules launch most of
        # theirs directly, past JITFunction.run): the profiler's device events, per call
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            new(*x)
            torch.cuda.synchronize()
        kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        print(f"\n## {path.stem} ({mode}): {kernels} device events per call (kernels, Triton's and PyTorch's, "
              "copies, fills)")
        print(f"candidate: {synced(new):.2f} ms synced, {host(new):.2f} ms host per call; "
              f"eager: {synced(ref):.2f} ms synced, {host(ref):.2f} ms host")
        from drtriton.cuda_graph import CUDAGraphed

        graphed = CUDAGraphed(new)
        err = (graphed(*x) - new(*x)).abs().max().item()
        print(f"candidate replayed as a CUDA graph: {synced(graphed):.2f} ms synced (max abs diff to the plain call {err:.2e})")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(10):
            new(*x)
        torch.cuda.synchronize()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        print("\n".join(line for line in text.getvalue().splitlines()[6:] if line.strip()))

    def again() -> str:
        with torch.no_grad():
            return f"{synced(new):.2f} ms synced, {host(new):.2f} ms host per call"
    return again


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*")
    p.add_argument("--mode", default="mixed", choices=["strict", "mixed"])
    args = p.parse_args()
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    again = {}
    for path in map(Path, args.files):  # before the micro part installs the verifier's hooks
        try:
            again[path.stem] = network(path, args.mode)
        except Exception as e:  # one network failing does not stop the others
            print(f"\n## {path.stem}: failed ({type(e).__name__}: {str(e)[:300]})")
    print("\n| launch (4,096 floats) | host us per call |\n|---|---|")
    rows, recorder = micro()
    for name, us in rows.items():
        print(f"| {name} | {us:.1f} |")
    for name, fn in again.items():
        recorder.begin_call()
        print(f"{name}, recorder recording, audit hook installed: {fn()}")
        recorder.end_call()


if __name__ == "__main__":
    main()
